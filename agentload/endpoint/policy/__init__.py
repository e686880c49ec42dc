"""agentload.endpoint.policy: the simulator's "model", what each request gets back.

Deterministic: a hash of the server seed and the request content seeds every choice, so the
same conversation always gets the same reply. ``Policy.decide`` dispatches on the role marker
on the first line of the system message (see ``agentload.contract``): agentload's own agents
are played by ``agent_policy`` as a competent coding agent reading the real tool outputs; any
other conversation gets ``BasePolicy.plain``, a plain-text answer, and tool calls only when
tools are offered (honouring ``tool_choice``: ``none``, ``auto``, ``required`` or a named
function).

* ``types`` — ``PolicyConfig`` and ``LengthDist`` (the knobs), ``Conversation`` (a request as
  the policy sees it), ``Decision`` (its reply before length limits);
* ``base`` — ``BasePolicy``: the conversation of a request, its vocabulary and prose, schema
  arguments, the plain reply;
* ``agent_policy`` — the orchestrator, and the entry for agentload's agents;
* ``subagents`` — code_search, file_reader and test_runner;
* ``reading`` — the policy's reading of an agent's conversation (``Ctx``: what the agent knows
  at one call) and the pickers the agent policies share;
* ``facts`` — paths, ``file:line`` locations, identifiers and errors read out of the text;
* ``prose`` — English / code-review prose from the conversation's own vocabulary;
* ``textgen`` — token-exact text: counting, cutting and padding with the server's tokenizer.
"""

from __future__ import annotations

from agentload.endpoint.policy.agent_policy import decide_agent
from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.types import Conversation, Decision, LengthDist, PolicyConfig

__all__ = ["BasePolicy", "Conversation", "Decision", "LengthDist", "Policy", "PolicyConfig"]


class Policy(BasePolicy):
    """Entry point: ``decide(...)`` for one request."""

    def decide(self, conv: Conversation) -> Decision:
        if conv.role is not None:
            return decide_agent(self, conv)
        return self.plain(conv)
