"""Request bodies as sent: the recorded traffic body, salted where the call's plan says
(``CallPlan.salt_at``, ``salt``), plus model, stream and extras; in Chat Completions, or in the
call's recorded API (Responses, Messages, Gemini) when the target speaks it
(``CallPlan.send_api``). A Gemini body names neither its model nor streaming: both are in its
path (the client's ``chat(..., model=)``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from agentload.options.engines import EnginePreset
from agentload.replay.callplan import pin_length
from agentload.replay.plan import CallPlan
from agentload.replay.salt import make_salt, salt_messages, salt_native, unsalt_messages

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
        api = call.send_api
        if max_tokens is not None:
            # Responses asks for at least 16 output tokens
            n = max(max_tokens, 16) if api == "responses" else max_tokens
            body = {**body, "max_tokens": n} if api == "chat" else pin_length(api, body, n)
        if salt:
            if api == "chat":
                body["messages"] = salt_messages(body["messages"], salt, call.salt_at)
            else:
                body = salt_native(api, body, salt, call.salt_at)
        if api != "gemini":  # a Gemini call's model and streaming are in its path
            body["model"] = self.model
            body["stream"] = True
        if self.engine.include_usage and api == "chat":
            body["stream_options"] = {"include_usage": True}
        if self.engine.ignore_eos:
            body["ignore_eos"] = True
        if self.engine.min_tokens:
            body["min_tokens"] = _length(api, body)
        if self.session_field and session_id is not None:
            body[self.session_field] = session_id
        return orjson.dumps(body)


def _length(api: str, body: dict[str, Any]) -> Any:
    """The output length a body in ``api`` asks for."""
    if api == "gemini":
        return body["generationConfig"]["maxOutputTokens"]
    return body["max_output_tokens" if api == "responses" else "max_tokens"]
