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
    "reply_match",
    "same_reply",
    "static_ids",
    "strings_in",
    "thread_text",
    "user_texts",
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
    """Whether ``carried`` (a message of a later request) is ``reply`` exactly as the agent
    carries it on (rule 2 of the module docstring): its calls, arguments and text."""
    return reply_match(reply, carried) == EXACT


EXACT, CHANGED, OTHER = 2, 1, 0
"""``reply_match``'s answers: the reply as carried, the reply carried changed, another one."""

_THINK = re.compile(r"<think>.*?</think>", re.DOTALL)
_SPACE = re.compile(r"\s+")


def _calls_match(a: list[dict[str, Any]], b: list[dict[str, Any]], by_id: bool) -> bool:
    """The same tool calls: count, names and arguments (covered), or (``by_id``) the model's
    own id carried back for a call."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if by_id and x.get("id") and x.get("id") == y.get("id"):
            continue
        fx, fy = x.get("function") or {}, y.get("function") or {}
        if fx.get("name") != fy.get("name"):
            return False
        mine = args_value(str(fx.get("arguments", "")))
        if not isinstance(mine, dict):
            continue  # malformed (cut at max_tokens, not an object): agents repair it their way
        if not _covers(mine, args_value(str(fy.get("arguments", "")))):
            return False
    return True


def _plain(content: Any) -> str:
    """A turn's text without reasoning markup, its whitespace collapsed."""
    return _SPACE.sub(" ", _THINK.sub("", content_text(content))).strip()


def reply_match(reply: dict[str, Any], carried: dict[str, Any]) -> int:
    """How ``carried`` (a message of a later request) stands to ``reply``: ``EXACT`` (the same
    calls, arguments covered, and text up to surrounding whitespace), ``CHANGED`` (the agent
    changed the turn but it is this one: its tool calls, each the model's own id or the same
    name and arguments, with the text dropped or reworded; a text-only turn whose text was
    dropped, cut, or stripped of reasoning), else ``OTHER``."""
    if carried.get("role") != "assistant":
        return OTHER
    a, b = reply.get("tool_calls") or [], carried.get("tool_calls") or []
    text_a, text_b = content_text(reply.get("content")), content_text(carried.get("content"))
    if _calls_match(a, b, by_id=False) and text_a.strip() == text_b.strip():
        return EXACT
    if a:
        return CHANGED if _calls_match(a, b, by_id=True) else OTHER
    if b:
        return OTHER
    plain_a, plain_b = _plain(reply.get("content")), _plain(carried.get("content"))
    if not plain_b or plain_a == plain_b:
        return CHANGED
    if len(plain_b) >= _MIN_TEXT and (plain_a.startswith(plain_b) or plain_b.startswith(plain_a)):
        return CHANGED
    return OTHER


_MIN_TEXT = 24
"""The shortest text of a cut turn that still tells it (a shorter one might begin any reply)."""


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


SIDE_MIN_CHARS = 16
"""The shortest user text that ties a side call to its session (rule 7)."""


def user_texts(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of a request's user messages, each stripped, of ``SIDE_MIN_CHARS`` or more."""
    out = []
    for m in messages:
        if m.get("role") == "user":
            text = content_text(m.get("content")).strip()
            if len(text) >= SIDE_MIN_CHARS:
                out.append(text)
    return out
