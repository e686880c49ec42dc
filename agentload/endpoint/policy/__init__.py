"""agentload.endpoint.policy: the simulator's "model", what each request gets back.

Deterministic: a hash of the server seed and the request content seeds every choice, so the
same conversation always gets the same reply.

**What it plays.** A request carries nothing agentload-specific, so ``Policy.decide`` infers
the agent from what any server sees (``roles.infer_role``, in this order): a request whose
tools are all agentload's contract tools and include ``delegate`` is the orchestrator; one
whose system message names a sub-agent kind as the scenario presets write it ("You are a
code-search sub-agent", "test-runner", "file-reader") is that kind; one offered exactly a
kind's usual tool set (``contract.SUBAGENT_TOOLS``) is that kind; one whose system message
holds the first prompt's ``## Repository map`` is an orchestrator working alone. These are
played by ``agent_policy`` as a competent coding agent reading the real tool outputs. Any other
conversation offered tools that do coding work — an agent product such as Claude Code, Codex
CLI or mini-swe-agent — is a **foreign agent** (``foreign``): its tools sorted by capability
from their names and schemas (``toolkinds``), it delegates 1–2 sub-tasks when it may (and waits
for Codex's sub-agents), lists, searches, reads, runs the tests and answers (or runs the
finish command its instructions name), in about 6–15 calls; a sub-agent of its own delegation
does its sub-task in 1–3 calls and reports. An agent offered no tools whose system prompt
teaches *SEARCH/REPLACE blocks* (aider) is a **text-edit agent** (``editblocks``): it asks for
the file to be added to the chat, edits it in one block (the reference fix in oracle mode) and
closes on what came back, in 2–3 calls. The rest (no tools, e.g. Claude Code's title
requests, or tools that do no coding work) gets ``BasePolicy.plain``, a plain-text answer, and
tool calls only when tools are offered (honouring ``tool_choice``: ``none``, ``auto``,
``required`` or a named function).

**When it stops.** No limit travels in a request either: the simulated model's own pacing is
server-side configuration (``PolicyConfig.context_target``, ``max_rounds``,
``max_parallel_delegations``, ``subagent_max_turns``), as a real model's habits come from its
training. ``generate`` sets them from the scenario when it starts the built-in simulator;
``agentload serve`` takes them from the profile (defaults: the coding-session scenario's). The
agents' harness enforces every limit itself, whatever the model does.

* ``types`` — ``PolicyConfig`` and ``LengthDist`` (the knobs), ``Conversation`` (a request as
  the policy sees it), ``Decision`` (its reply before length limits);
* ``base`` — ``BasePolicy``: the conversation of a request, its vocabulary and prose, schema
  arguments, the plain reply;
* ``agent_policy`` — the orchestrator, and the entry for agentload's agents;
* ``subagents`` — code_search, file_reader and test_runner;
* ``oracle`` — eval's oracle mode: the reference fix of a recognised eval task, through tools;
* ``foreign`` — the foreign agent (root and sub-agent steps); ``foreign_oracle`` its oracle
  mode through the product's own edit tools; ``session`` — a foreign conversation read (task,
  cwd, finish convention, calls and results); ``toolkinds`` — tools by capability, and the
  agent kinds a delegate tool takes; ``argfill`` — a call's arguments made valid for its tool's
  JSON schema (required, enums, types, absolute paths); ``moves`` — an intention as a call of
  the offered tools;
  ``report`` — the foreign agent's texts, quoting its results; ``editblocks`` — the text-edit
  agent;
* ``roles`` — which agent a request comes from (the rules above);
* ``reading`` — the policy's reading of an agent's conversation (``Ctx``: what the agent knows
  at one call) and the pickers the agent policies share;
* ``facts`` — paths, ``file:line`` locations, identifiers and errors read out of the text;
* ``prose`` — English / code-review prose from the conversation's own vocabulary;
* ``textgen`` — token-exact text: counting, cutting and padding with the server's tokenizer.
"""

from __future__ import annotations

from agentload.endpoint.policy.agent_policy import decide_agent
from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.editblocks import decide_editblocks, is_editblock_agent
from agentload.endpoint.policy.foreign import decide_foreign
from agentload.endpoint.policy.types import Conversation, Decision, LengthDist, PolicyConfig

__all__ = ["BasePolicy", "Conversation", "Decision", "LengthDist", "Policy", "PolicyConfig"]


class Policy(BasePolicy):
    """Entry point: ``decide(...)`` for one request."""

    def decide(self, conv: Conversation) -> Decision:
        if conv.role is not None:
            return decide_agent(self, conv)
        if conv.tools:
            d = decide_foreign(self, conv)
            if d is not None:
                return d
        elif is_editblock_agent(conv):
            return decide_editblocks(self, conv)
        return self.plain(conv)
