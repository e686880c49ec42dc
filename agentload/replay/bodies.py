"""Request bodies as sent: the recorded traffic body, salted, plus model, stream and extras.

Salting puts a short unique line in front of the first system message of every agent of a
session instance (the same salt for the whole session), so prefix-cache hits can only come
from within the session, never from another replica of it. ``unsalt`` undoes it exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from agentload.replay.engines import EnginePreset
from agentload.replay.plan import CallPlan

__all__ = ["BodyBuilder", "make_salt", "salt_messages", "unsalt_messages"]

_SALT_RE = re.compile(r"^\[agentload-salt [0-9a-z-]+\]\n")


def make_salt(nonce: str, index: int) -> str:
    """The salt line of session instance ``index`` in the run/point identified by ``nonce``."""
    return f"[agentload-salt {nonce}-{index:x}]\n"


def _first_target(messages: list[dict[str, Any]]) -> int:
    for i, m in enumerate(messages):
        if m.get("role") == "system":
            return i
    return 0


def salt_messages(messages: list[dict[str, Any]], salt: str) -> list[dict[str, Any]]:
    """A copy of ``messages`` with ``salt`` in front of the first system message's text."""
    if not messages:
        return messages
    i = _first_target(messages)
    msg = dict(messages[i])
    content = msg.get("content")
    if isinstance(content, list):
        parts = [dict(p) if isinstance(p, dict) else p for p in content]
        for p in parts:
            if isinstance(p, dict) and p.get("type") == "text":
                p["text"] = salt + str(p.get("text", ""))
                break
        else:
            parts.insert(0, {"type": "text", "text": salt})
        msg["content"] = parts
    else:
        msg["content"] = salt + (content or "")
    out = list(messages)
    out[i] = msg
    return out


def unsalt_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Undo ``salt_messages`` (messages without a salt line are returned unchanged)."""
    if not messages:
        return messages
    i = _first_target(messages)
    msg = dict(messages[i])
    content = msg.get("content")
    if isinstance(content, str):
        msg["content"] = _SALT_RE.sub("", content, count=1)
    elif isinstance(content, list):
        parts = [dict(p) if isinstance(p, dict) else p for p in content]
        for p in parts:
            if isinstance(p, dict) and p.get("type") == "text":
                p["text"] = _SALT_RE.sub("", str(p.get("text", "")), count=1)
                break
        msg["content"] = parts
    out = list(messages)
    out[i] = msg
    return out


@dataclass(frozen=True)
class BodyBuilder:
    """Builds the bytes of one request from a ``CallPlan``."""

    model: str
    engine: EnginePreset
    session_field: str | None = None

    def build(
        self,
        call: CallPlan,
        salt: str | None,
        session_id: str | None,
        max_tokens: int | None = None,
    ) -> bytes:
        """The request bytes; ``max_tokens`` overrides the pinned length (warm-up sends 1:
        only its prefill matters, since the next prompt carries the recorded reply anyway)."""
        body = dict(call.traffic)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if salt:
            body["messages"] = salt_messages(body["messages"], salt)
        body["model"] = self.model
        body["stream"] = True
        if self.engine.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.engine.ignore_eos and self.engine.nvext:
            body["nvext"] = {**body.get("nvext", {}), "ignore_eos": True}
        elif self.engine.ignore_eos:
            body["ignore_eos"] = True
        if self.engine.min_tokens:
            body["min_tokens"] = body["max_tokens"]
        if self.session_field and session_id is not None:
            body[self.session_field] = session_id
        return orjson.dumps(body)
