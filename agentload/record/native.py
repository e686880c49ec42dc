"""What a request's headers say about who sent it: the session, the agent, the agent's names.

``--session-header`` / ``--agent-header`` (default ``x-agentload-session`` /
``x-agentload-agent``) are ours: an agent that sends them gets exact sessions and agents. Some
agents name themselves in headers of their own, read when ours are absent (docs/record.md):

| agent | session | agent | names a spawn call's result gives |
|---|---|---|---|
| Claude Code | ``x-claude-code-session-id`` (its sub-agents share it) | — | — |
| Codex CLI | ``session-id`` (its sub-agents share it) | ``thread-id`` (one per thread) | a sub-agent's thread id and its agent path (``agent_name`` in ``x-codex-turn-metadata``: ``/root/read_a``) |

A name lets ``threads.Threads`` link a sub-agent to the call that spawned it when nothing else
does: Codex answers ``spawn_agent`` at once with ``{"agent_id": THREAD}`` (or, with
``multi_agent_v2``, ``{"task_name": PATH}``), and a sub-agent started without the parent's
history carries no id or text of that call, only its own thread id and path in its headers.
``--session-header ''`` turns every header rule off, these too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import orjson

__all__ = ["AGENT_HEADER", "NATIVE_HEADERS", "SESSION_HEADER", "Identity", "identity"]

SESSION_HEADER = "x-agentload-session"
"""The default ``--session-header``."""
AGENT_HEADER = "x-agentload-agent"
"""The default ``--agent-header``."""

NATIVE_SESSION_HEADERS = ("x-claude-code-session-id", "session-id")
"""Headers by which agents name their own session (Claude Code, Codex)."""
NATIVE_AGENT_HEADERS = ("thread-id",)
"""Headers by which agents name the agent within the session (Codex: one per thread)."""
_CODEX_METADATA = "x-codex-turn-metadata"
NATIVE_HEADERS = (*NATIVE_SESSION_HEADERS, *NATIVE_AGENT_HEADERS, _CODEX_METADATA)
"""Every header this module reads besides the configured ones (the proxy passes these on)."""
_MAX_NAME = 200
_MIN_NAME = 8
"""A shorter name (``/root``) is too common to link anything by."""


@dataclass(frozen=True)
class Identity:
    """Who a request says it is from: its session, its agent and names a spawning call's
    result may give (each None or empty when the headers do not say)."""

    session: str | None = None
    agent: str | None = None
    names: tuple[str, ...] = ()


def identity(
    headers: Mapping[str, str], session_header: str | None, agent_header: str | None
) -> Identity:
    """The identity a request's headers (lower-case names) give (see the module docstring).
    The agent and the names count only within a session a header names."""
    if not session_header:
        return Identity()
    session = headers.get(session_header) or _first(headers, NATIVE_SESSION_HEADERS)
    if not session:
        return Identity()
    agent = headers.get(agent_header) if agent_header else None
    native_agent = _first(headers, NATIVE_AGENT_HEADERS)
    names: list[str] = []
    meta = _codex_metadata(headers.get(_CODEX_METADATA))
    if meta.get("thread_source") == "subagent" or (native_agent and native_agent != session):
        names = [n for n in (native_agent, meta.get("agent_name")) if n]
    names = [n[:_MAX_NAME] for n in names if len(n) >= _MIN_NAME]
    return Identity(session[:_MAX_NAME], (agent or native_agent or None), tuple(names))


def _first(headers: Mapping[str, str], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = headers.get(name)
        if value:
            return value
    return None


def _codex_metadata(raw: str | None) -> dict[str, str]:
    """The string fields of Codex's turn metadata (a JSON object in a header), {} if none."""
    if not raw or len(raw) > 16_384:
        return {}
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
