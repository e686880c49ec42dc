"""The salt: a short unique first line in front of the first system message of every agent of
a session instance (the same salt for the whole session), so prefix-cache hits can only come
from within the session, never from another replica of it or another sweep point.
``unsalt_messages`` undoes it exactly.

The salt is ``[agentload-salt D]`` + newline, where D is 18 decimal digits: 9 naming the run
and point (the nonce), 9 the instance. A fixed number of digits is a fixed number of tokens
(tiktoken vocabularies split digits in groups of three, each one token), so every instance's
salted prompt has the same token layout: the reuse ceiling (``reuse``) is computed once per
recorded session, with ``REPRESENTATIVE_SALTS``.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable
from typing import Any

__all__ = [
    "NONCE_DIGITS",
    "REPRESENTATIVE_SALTS",
    "make_salt",
    "new_nonce",
    "new_run_id",
    "salt_messages",
    "salt_native",
    "salt_target",
    "unsalt_messages",
]

_SALT_RE = re.compile(r"^\[agentload-salt [0-9a-z-]+\]\n")
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


def salt_target(messages: list[dict[str, Any]]) -> int:
    """Index of the message the salt goes into: the first system message (else the first)."""
    for i, m in enumerate(messages):
        if m.get("role") == "system":
            return i
    return 0


def _edit_text(
    messages: list[dict[str, Any]], edit: Callable[[str], str], add: str | None
) -> list[dict[str, Any]]:
    """A copy of ``messages`` with the salt target's text (its string content, or its first
    text part) replaced by ``edit(text)``; a list content without a text part gets ``add`` as
    its first part (when given)."""
    if not messages:
        return messages
    i = salt_target(messages)
    msg = dict(messages[i])
    content = msg.get("content")
    if isinstance(content, list):
        parts = [dict(p) if isinstance(p, dict) else p for p in content]
        text = next((p for p in parts if isinstance(p, dict) and p.get("type") == "text"), None)
        if text is not None:
            text["text"] = edit(str(text.get("text", "")))
        elif add is not None:
            parts.insert(0, {"type": "text", "text": add})
        msg["content"] = parts
    elif isinstance(content, str) or add is not None:
        msg["content"] = edit(content or "")
    out = list(messages)
    out[i] = msg
    return out


def salt_messages(messages: list[dict[str, Any]], salt: str) -> list[dict[str, Any]]:
    """A copy of ``messages`` with ``salt`` in front of the first system message's text."""
    return _edit_text(messages, lambda text: salt + text, add=salt)


def salt_native(api: str, body: dict[str, Any], salt: str) -> dict[str, Any]:
    """A copy of a Responses or Messages body with ``salt`` in front of its system text (where
    ``salt_messages`` puts it in the chat form): Messages' ``system`` (a string, or its first
    text block; added when absent); Responses' ``instructions`` (else the first input text)."""
    out = dict(body)
    if api == "messages":
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
    if isinstance(out.get("instructions"), str) or not out.get("input"):
        out["instructions"] = salt + str(out.get("instructions") or "")
    elif isinstance(out["input"], str):
        out["input"] = salt + out["input"]
    else:
        items = list(out["input"])
        for i, item in enumerate(items):
            if isinstance(item, dict) and "role" in item and "content" in item:
                msg = dict(item)
                content = msg["content"]
                if isinstance(content, str):
                    msg["content"] = salt + content
                elif isinstance(content, list):
                    msg["content"] = [{"type": "input_text", "text": salt}, *content]
                items[i] = msg
                break
        out["input"] = items
    return out


def unsalt_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Undo ``salt_messages`` (messages without a salt line are returned unchanged)."""
    return _edit_text(messages, lambda text: _SALT_RE.sub("", text, count=1), add=None)
