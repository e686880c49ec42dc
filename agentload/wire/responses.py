"""OpenAI Responses (``/v1/responses``) read into the chat shape. OWNER: helper H1b."""

from __future__ import annotations

from typing import Any

from agentload.wire.reply import StreamReader, WireReply

__all__ = ["Stream", "reply_from_json", "to_chat"]


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    raise NotImplementedError


def reply_from_json(obj: Any) -> WireReply:
    raise NotImplementedError


class Stream(StreamReader):
    def event(self, name: str | None, data: bytes) -> bool:
        raise NotImplementedError
