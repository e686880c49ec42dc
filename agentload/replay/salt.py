"""The salt: a short unique line in every prompt of a session instance (the same salt for all
of its agents' calls), so prefix-cache hits can only come from within the session, up to the
salt's place, never from another replica of it or another sweep point. ``unsalt_messages``
undoes it exactly.

Where the line goes is the salt mode (``--salt-at``, ``SALT_MODES``):

* ``start``: in front of the first system message's text (else the first message's), so
  nothing but the tool schemas (which chat templates render first) and the salt's own head can
  be shared across instances;
* ``after-system`` (the default): after the tools and every leading system/developer message,
  in front of the text of the first message that is neither (the first user turn, usually), so
  the static part every user of an agent product sends — tools and system prompt — is shared
  across sessions as it is in production, and the conversation is not; when every message is
  a system/developer message the line is appended to the last one's text instead;
* ``off``: no salt; replicas of one recorded session send identical prompts.

The salt is ``[agentload-salt D]`` + newline, where D is 18 decimal digits: 9 naming the run
and point (the nonce), 9 the instance. A fixed number of digits is a fixed number of tokens
(tiktoken vocabularies split digits in groups of three, each one token), so every instance's
salted prompt has the same token layout: the reuse ceiling (``reuse``) is computed once per
recorded session, with ``REPRESENTATIVE_SALTS``.

A text to salt is a string content or a list's first text part; a list without a text part
gets one inserted first (holding just the salt), a missing or null content becomes the salt.
Unsalting removes such an inserted part, and gives a null content back as ``""``: the two
cases it cannot tell apart are a null content from ``""`` and an inserted part from a recorded
first text part that was empty and had no other keys (dropped too).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any

from agentload.options.modes import SALT_MODES, SaltAt

__all__ = [
    "NONCE_DIGITS",
    "REPRESENTATIVE_SALTS",
    "SALT_MODES",
    "SaltAt",
    "make_salt",
    "new_nonce",
    "new_run_id",
    "salt_gemini",
    "salt_messages",
    "salt_native",
    "salt_target",
    "unsalt_messages",
]

_LINE = r"\[agentload-salt [0-9a-z-]+\]\n"
_FRONT = re.compile("^" + _LINE)
_END = re.compile(_LINE + r"\Z")
_SYSTEM = ("system", "developer")
NONCE_DIGITS = 9
_INDEX_DIGITS = 9


def new_run_id() -> str:
    """6 random digits naming one replay run in its salts."""
    return f"{secrets.randbelow(10**6):06d}"


def new_nonce(run: str | None = None, point: int = 0) -> str:
    """A salt nonce: 6 digits naming the run (``new_run_id`` unless given) and 3 the point."""
    return f"{run if run is not None else new_run_id()}{point % 1000:03d}"


def make_salt(nonce: str, index: int) -> str:
    """The salt line of session instance ``index`` in the run/point identified by ``nonce``
    (``NONCE_DIGITS`` decimal digits)."""
    if len(nonce) != NONCE_DIGITS or not nonce.isdigit():
        raise ValueError(f"a salt nonce is {NONCE_DIGITS} decimal digits, not {nonce!r}")
    if not 0 <= index < 10**_INDEX_DIGITS:
        raise ValueError(f"session instance {index} out of the salt's range")
    return f"[agentload-salt {nonce}{index:0{_INDEX_DIGITS}d}]\n"


REPRESENTATIVE_SALTS = (make_salt("0" * NONCE_DIGITS, 0), make_salt("0" * NONCE_DIGITS, 1))
"""Two salts with every instance's token layout that differ only in their last token: the
most two instances' salts can share."""


def _is_system(m: Any) -> bool:
    return isinstance(m, dict) and m.get("role") in _SYSTEM


def salt_target(messages: list[dict[str, Any]], at: SaltAt = "start") -> tuple[int, bool]:
    """(index of the message the salt goes into, whether it is appended to the end of its text
    rather than put in front) in mode ``at`` (see the module docstring; ``off`` places it as
    ``after-system`` would)."""
    if at == "start":
        return next((i for i, m in enumerate(messages) if m.get("role") == "system"), 0), False
    for i, m in enumerate(messages):
        if not _is_system(m):
            return i, False
    return len(messages) - 1, True


def _edit_text(
    messages: list[dict[str, Any]],
    i: int,
    edit: Callable[[str], str],
    add: str | None,
) -> list[dict[str, Any]]:
    """A copy of ``messages`` with message ``i``'s text (its string content, or its first text
    part) replaced by ``edit(text)``; a list content without a text part gets ``add`` as its
    first part (when given); a text part ``edit`` empties that is exactly the salt line it
    removed, first in the list with no other keys, is dropped (it was added)."""
    msg = dict(messages[i])
    content = msg.get("content")
    if isinstance(content, list):
        parts = [dict(p) if isinstance(p, dict) else p for p in content]
        j = next(
            (k for k, p in enumerate(parts) if isinstance(p, dict) and p.get("type") == "text"),
            None,
        )
        if j is not None:
            old = str(parts[j].get("text", ""))
            new = edit(old)
            if (
                add is None
                and j == 0
                and not new
                and new != old
                and set(parts[0])
                == {
                    "type",
                    "text",
                }
            ):
                del parts[0]
            else:
                parts[j]["text"] = new
        elif add is not None:
            parts.insert(0, {"type": "text", "text": add})
        msg["content"] = parts
    elif isinstance(content, str) or (content is None and add is not None):
        msg["content"] = edit(content or "")
    # any other content (an object, a number: real-world deviations a proxy recorded) has no
    # text to salt: the message goes as recorded
    out = list(messages)
    out[i] = msg
    return out


def salt_messages(
    messages: list[dict[str, Any]], salt: str, at: SaltAt = "start"
) -> list[dict[str, Any]]:
    """A copy of ``messages`` with ``salt`` placed as mode ``at`` says (module docstring);
    unchanged for ``off`` or no messages."""
    if at == "off" or not messages:
        return messages
    i, append = salt_target(messages, at)
    edit = (lambda text: text + salt) if append else (lambda text: salt + text)
    return _edit_text(messages, i, edit, add=salt)


def unsalt_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Undo ``salt_messages`` in whichever mode it salted (messages without a salt line are
    returned unchanged)."""
    modes: tuple[SaltAt, ...] = ("start", "after-system")
    for at in modes if messages else ():
        i, append = salt_target(messages, at)
        pattern = _END if append else _FRONT

        def strip(text: str, pattern: re.Pattern[str] = pattern) -> str:
            return pattern.sub("", text, count=1)

        out = _edit_text(messages, i, strip, add=None)
        if out[i] != messages[i]:
            return out
    return messages


def _salt_input(items: list[Any], salt: str, at: SaltAt) -> list[Any]:
    """Responses ``input`` items with the salt in front of the first message item's text
    (``start``), or of the first one that is not a system/developer message (``after-system``;
    when every message item is one, appended to the last one's text)."""
    messages = [
        i
        for i, item in enumerate(items)
        if isinstance(item, dict) and "role" in item and "content" in item
    ]
    if not messages:
        return items
    target = messages[0]
    append = False
    if at == "after-system":
        rest = [i for i in messages if not _is_system(items[i])]
        target, append = (rest[0], False) if rest else (messages[-1], True)
    msg = dict(items[target])
    content = msg["content"]
    if isinstance(content, str):
        msg["content"] = content + salt if append else salt + content
    elif isinstance(content, list):
        part = {"type": "input_text", "text": salt}
        msg["content"] = [*content, part] if append else [part, *content]
    out = list(items)
    out[target] = msg
    return out


def salt_native(api: str, body: dict[str, Any], salt: str, at: SaltAt = "start") -> dict[str, Any]:
    """A copy of a Responses or Messages body with ``salt`` where ``salt_messages`` puts it in
    the chat form. ``start``: Messages' ``system`` (a string, or its first text block; added
    when absent); Responses' ``instructions`` (else the first input text). ``after-system``:
    Messages' first ``messages`` item (its string content or first text block; a text block
    added first when it has none), ``system`` untouched; Responses' first input item that is
    not a system/developer message (a string ``input``: in front), ``instructions`` untouched.
    Gemini: ``salt_gemini``. ``off``: the body unchanged."""
    if at == "off":
        return body
    if api == "gemini":
        return salt_gemini(body, salt, at)
    out = dict(body)
    if api == "messages":
        if at == "after-system":
            items = out.get("messages")
            if isinstance(items, list) and items and isinstance(items[0], dict):
                out["messages"] = salt_messages(items, salt, "after-system")
            return out
        system = out.get("system")
        if isinstance(system, list) and any(
            isinstance(b, dict) and b.get("type") == "text" for b in system
        ):
            blocks = [dict(b) if isinstance(b, dict) else b for b in system]
            first = next(b for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            first["text"] = salt + str(first.get("text", ""))
            out["system"] = blocks
        else:
            out["system"] = salt + (system if isinstance(system, str) else "")
        return out
    if at == "start" and (isinstance(out.get("instructions"), str) or not out.get("input")):
        out["instructions"] = salt + str(out.get("instructions") or "")
    elif isinstance(out.get("input"), str):
        out["input"] = salt + out["input"]
    elif isinstance(out.get("input"), list) and out["input"]:
        out["input"] = _salt_input(list(out["input"]), salt, at)
    else:  # after-system without input: nothing follows the instructions; append to them
        out["instructions"] = str(out.get("instructions") or "") + salt
    return out


def salt_gemini(body: dict[str, Any], salt: str, at: SaltAt = "start") -> dict[str, Any]:
    """A copy of a Gemini body with ``salt`` where ``salt_messages`` puts it in the chat form:
    in front of the first text part of ``systemInstruction`` (``start``; without one, of the
    first content) or of the first content (``after-system``; with no content, at the end of
    the ``systemInstruction``); a content without a text part gets one first."""
    out = dict(body)
    contents = out.get("contents")
    given = out.get("systemInstruction")
    system: dict[str, Any] = given if isinstance(given, dict) else {}
    has_system = isinstance(system.get("parts"), list)
    if at == "start" and has_system:
        out["systemInstruction"] = _salt_parts(system, salt, append=False)
    elif isinstance(contents, list) and contents and isinstance(contents[0], dict):
        out["contents"] = [_salt_parts(contents[0], salt, append=False), *contents[1:]]
    elif has_system:
        out["systemInstruction"] = _salt_parts(system, salt, append=True)
    return out


def _salt_parts(content: dict[str, Any], salt: str, *, append: bool) -> dict[str, Any]:
    """A copy of a Gemini content with ``salt`` in front of its first text part (or at the end
    of its last, ``append``); a text part holding the salt added when it has none."""
    parts = [dict(p) if isinstance(p, dict) else p for p in content.get("parts") or ()]
    texts = [
        k
        for k, p in enumerate(parts)
        if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
    ]
    if not texts:
        parts.insert(len(parts) if append else 0, {"text": salt})
    elif append:
        parts[texts[-1]]["text"] += salt
    else:
        parts[texts[0]]["text"] = salt + parts[texts[0]]["text"]
    return {**content, "parts": parts}
