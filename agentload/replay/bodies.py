"""Request bodies as sent: the recorded traffic body, salted (``salt``), plus model, stream
and extras."""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from agentload.replay.engines import EnginePreset
from agentload.replay.plan import CallPlan
from agentload.replay.salt import make_salt, salt_messages, unsalt_messages

__all__ = ["BodyBuilder", "make_salt", "salt_messages", "unsalt_messages"]


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
        body = dict(call.body())
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if salt:
            body["messages"] = salt_messages(body["messages"], salt)
        body["model"] = self.model
        body["stream"] = True
        if self.engine.include_usage:
            body["stream_options"] = {"include_usage": True}
        if self.engine.ignore_eos:
            body["ignore_eos"] = True
        if self.engine.min_tokens:
            body["min_tokens"] = body["max_tokens"]
        if self.session_field and session_id is not None:
            body[self.session_field] = session_id
        return orjson.dumps(body)
