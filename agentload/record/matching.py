"""The comparisons the threading rules (``threads``) make on what requests carry.

A reply compared with the message a later request carries in its place (``same_reply``, rule 2),
a tool call told delegation-like by its name or arguments (``delegation_like``, rules 3 and 5),
and the reading of chat messages those rules share: a content's text, the strings of a JSON
value, the names a tool's JSON result gives, a request's leading system messages. All are pure
functions of chat-form messages (``agentload.wire``).
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = [
    "args_value",
    "content_text",
    "delegation_like",
    "names_in",
    "same_reply",
    "static_ids",
    "strings_in",
    "thread_text",
]

_DELEGATION_NAME = re.compile(r"^(task|delegate.*|transfer_to_.*|handoff.*|spawn.*|.*agent.*)$")
_DELEGATION_ARGS = ("subagent_type", "agent_type", "task", "prompt", "input")


def delegation_like(name: str, arguments: str) -> bool:
    """Whether a tool call looks like a delegation by its name or arguments (rule 5)."""
    if _DELEGATION_NAME.match(name.lower()):
        return True
    args = args_value(arguments)
    return isinstance(args, dict) and any(isinstance(args.get(k), str) for k in _DELEGATION_ARGS)


def args_value(text: str) -> Any:
    """A tool call's arguments as JSON (``{}`` for none), or the text itself when malformed."""
    try:
        return orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return text


def content_text(content: Any) -> str:
    """The text of a chat message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _covers(mine: Any, theirs: Any) -> bool:
    """Whether the value the agent carries (``theirs``) is the model's (``mine``): every key
    there with an equal value (extra keys allowed), lists item by item, strings up to
    surrounding whitespace."""
    if isinstance(mine, dict):
        return isinstance(theirs, dict) and all(
            k in theirs and _covers(v, theirs[k]) for k, v in mine.items()
        )
    if isinstance(mine, list):
        return (
            isinstance(theirs, list)
            and len(mine) == len(theirs)
            and all(_covers(a, b) for a, b in zip(mine, theirs, strict=True))
        )
    if isinstance(mine, str):
        return isinstance(theirs, str) and mine.strip() == theirs.strip()
    if isinstance(mine, bool) or isinstance(theirs, bool):
        return mine is theirs
    return bool(mine == theirs)


def same_reply(reply: dict[str, Any], carried: dict[str, Any]) -> bool:
    """Whether ``carried`` (a message of a later request) is ``reply`` as the agent carries it
    on (rule 2 of the module docstring)."""
    if carried.get("role") != "assistant":
        return False
    a, b = reply.get("tool_calls") or [], carried.get("tool_calls") or []
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        fx, fy = x.get("function") or {}, y.get("function") or {}
        if fx.get("name") != fy.get("name"):
            return False
        mine = args_value(str(fx.get("arguments", "")))
        if not isinstance(mine, dict):
            continue  # malformed (cut at max_tokens, not an object): agents repair it their way
        if not _covers(mine, args_value(str(fy.get("arguments", "")))):
            return False
    return (
        content_text(reply.get("content")).strip() == content_text(carried.get("content")).strip()
    )


def thread_text(messages: list[dict[str, Any]], start: int) -> str:
    """The text of ``messages[start:]``, one message a line (where rule 5 looks for a task)."""
    return "\n".join(content_text(m.get("content")) for m in messages[start:])


def names_in(result: str) -> set[str]:
    """The strings of a tool result that is a JSON object or list (Codex's ``spawn_agent``
    answers ``{"agent_id": ...}``); empty for any other result."""
    text = result.strip()
    if not text.startswith(("{", "[")) or len(text) > 65_536:
        return set()
    try:
        return set(strings_in(orjson.loads(text)))
    except orjson.JSONDecodeError:
        return set()


def static_ids(messages: list[dict[str, Any]], ids: list[str]) -> tuple[str, ...]:
    """The content ids of a request's leading system (or developer) messages."""
    out = []
    for m, mid in zip(messages, ids, strict=False):
        if m.get("role") not in ("system", "developer"):
            break
        out.append(mid)
    return tuple(out)


def strings_in(value: Any) -> list[str]:
    """Every string of a JSON value, depth first."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in strings_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in strings_in(v)]
    return []
