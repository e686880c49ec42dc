"""What a replay plan is made of: ``CallPlan`` (one recorded call, ready to send) and
``SessionPlan`` (a session's calls as a graph, each wait between two calls an ``Edge``).

``plan`` builds them from traces (its module docstring says how: the traffic body, its
digest, the waits between calls, the synthesized bodies of content-free traces); the body
builder, the scheduler and the session pool read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentload.hashing import canonical_json, sha256_hex
from agentload.options.engines import agent_session_id
from agentload.replay.salt import SaltAt
from agentload.trace.synth import Layout, Synthesizer

__all__ = ["CallPlan", "Edge", "SessionPlan", "pin_length"]


def pin_length(api: str, body: dict[str, Any], tokens: int) -> dict[str, Any]:
    """A copy of a body in ``api`` (not chat) whose output length is pinned to ``tokens``:
    Responses' ``max_output_tokens``, Messages' ``max_tokens``, Gemini's
    ``generationConfig.maxOutputTokens``."""
    if api == "gemini":
        config = body.get("generationConfig")
        config = dict(config) if isinstance(config, dict) else {}
        return {**body, "generationConfig": {**config, "maxOutputTokens": tokens}}
    key = "max_output_tokens" if api == "responses" else "max_tokens"
    return {**body, key: tokens}


@dataclass(frozen=True)
class Edge:
    """``call`` may be sent ``gap_ns * gap_scale`` after predecessor ``pred`` completed."""

    pred: str
    gap_ns: int


@dataclass
class CallPlan:
    """One recorded call, ready to send."""

    id: str
    key: str
    """Unique key across all given traces (``call id``, prefixed by the trace index when
    several traces are given)."""
    session_id: str
    agent_id: str
    seq: int
    traffic: dict[str, Any]
    """The unsalted traffic body (see ``plan``'s module docstring); of a synthesized call, all but its
    messages (``body()`` adds them)."""
    expected_tokens: int
    """Recorded completion tokens (the server's when reported, else ours): the pinned length."""
    prompt_tokens: int
    """Recorded prompt tokens (server's when reported, else ours)."""
    ceiling_tokens: int
    """Prompt tokens reusable from earlier calls of the session: leading blocks of this call
    already present in earlier calls' block lists, times the trace's block size (the recorded
    sharing; the ceiling when ``within_tokens`` is not known)."""
    rel_submit_ns: int
    """Recorded submit time, relative to the session's first submit."""
    rel_end_ns: int
    preds: list[Edge] = field(default_factory=list)
    succs: list[str] = field(default_factory=list)
    recorded_gap_ns: int | None = None
    """Recorded wait after the previous call of the same agent (None for an agent's first)."""
    salt_at: SaltAt = "after-system"
    """Where the salt goes in the call's body (``salt``): the mode it was planned for."""
    within_tokens: int | None = None
    """Prompt tokens of the call as sent reusable from its own session instance (``reuse``);
    None when not computed (the trace's tokenizer cannot be loaded)."""
    cross_tokens: int | None = None
    """Prompt tokens of the call as sent that another instance can have put in the cache
    (``reuse``); None when not computed."""
    prompt_tokens_ours: int = 0
    """Recorded prompt tokens in agentload's count (the trace's tokenizer), unsalted."""
    salt_tokens: int = 0
    """Tokens the salt line adds to the prompt in agentload's count (0 unsalted or when not
    computed)."""
    synth: tuple[Synthesizer, Layout] | None = None
    """A content-free call's synthesizer and layout (None: the trace has the messages)."""
    rel_trace_submit_ns: int = 0
    """Recorded submit time, relative to the earliest submit of its trace (``--schedule
    recorded``)."""
    api: str = "chat"
    """The API the call was recorded in (``chat``, ``responses``, ``messages``, ``gemini``)."""
    native: dict[str, Any] | None = None
    """The body as recorded in ``api`` when that is not chat (``request.native``)."""
    send_api: str = "chat"
    """The API it is sent in: ``api`` when the target speaks it (``use_api``), else chat (its
    Chat Completions translation, ``traffic``)."""
    agent_path: str = ""
    """Its agent's place under the session's root agent: "" for the root agent (or an agent
    without a recorded parent), else the agent's id (a per-agent session id, ``agent_session``)."""
    parent_path: str | None = None
    """Its agent's parent's ``agent_path`` (None for a root agent)."""
    _digest: str | None = None

    def use_api(self, api: str) -> None:
        """Send the call in ``api`` (its recorded API, or chat)."""
        if api not in ("chat", self.api) or (api != "chat" and self.native is None):
            raise ValueError(f"call {self.id}: cannot be sent in {api}")
        if api != self.send_api:
            self.send_api = api
            self._digest = None

    def body(self) -> dict[str, Any]:
        """The unsalted traffic body, messages included (built anew for a synthesized call); in
        its recorded API when sent in it (``send_api``), length pinned to ``expected_tokens``."""
        if self.send_api != "chat" and self.native is not None:
            return pin_length(self.send_api, self.native, self.expected_tokens)
        if self.synth is None:
            return self.traffic
        synth, layout = self.synth
        return {"messages": synth.messages(layout), **self.traffic}

    def ceiling(self) -> int:
        """The KV-survival ceiling of the call as sent: the larger of ``within_tokens`` and
        ``cross_tokens`` (``ceiling_tokens`` when they are not known)."""
        if self.within_tokens is None or self.cross_tokens is None:
            return self.ceiling_tokens
        return max(self.within_tokens, self.cross_tokens)

    def within(self) -> int:
        """The part of the ceiling reusable from the call's own session instance."""
        return self.ceiling_tokens if self.within_tokens is None else self.within_tokens

    def ours(self) -> int:
        """Prompt tokens of the call as sent (salt included), in agentload's count."""
        return self.prompt_tokens_ours + self.salt_tokens

    def agent_session(self, instance: str) -> str:
        """The session id of its agent in session instance ``instance``: the instance's id for
        the root agent, ``INSTANCE/AGENT`` for a sub-agent."""
        return agent_session_id(instance, self.agent_path)

    def parent_session(self, instance: str) -> str | None:
        """The session id of its agent's parent in ``instance`` (None for the root agent)."""
        p = self.parent_path
        return None if p is None else agent_session_id(instance, p)

    @property
    def digest(self) -> str:
        """sha256 of the canonical unsalted traffic body (in the API it is sent in)."""
        if self._digest is None:
            self._digest = sha256_hex(canonical_json(self.body()))
        return self._digest


@dataclass
class SessionPlan:
    """One recorded session: its calls as a graph, in recorded submit order."""

    key: str
    session_id: str
    trace_path: str
    calls: dict[str, CallPlan]
    order: list[str]
    """Call ids by recorded submit time."""
    duration_ns: int
    n_agents: int
    max_width: int
    """Most calls of this session the recording had in flight at once."""
    salt_at: SaltAt = "after-system"
    """The salt mode it was planned for (every call's ``salt_at``)."""

    @property
    def last_submit_ns(self) -> int:
        return self.calls[self.order[-1]].rel_submit_ns if self.order else 0
