"""Request bodies as sent: the recorded traffic body, salted where the call's plan says
(``CallPlan.salt_at``, ``salt``), plus model, stream and extras; in Chat Completions, or in the
call's recorded API (Responses, Messages, Gemini) when the target speaks it
(``CallPlan.send_api``). A Gemini body names neither its model nor streaming: both are in its
path (the client's ``chat(..., model=)``). A Chat Completions body for Dynamo carries its
request extension (``dynamo_nvext``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from agentload.options.engines import EnginePreset
from agentload.replay.callplan import pin_length
from agentload.replay.plan import CallPlan
from agentload.replay.salt import make_salt, salt_messages, salt_native, unsalt_messages

__all__ = [
    "DYNAMO_EXTRA_FIELDS",
    "BodyBuilder",
    "dynamo_nvext",
    "make_salt",
    "salt_messages",
    "unsalt_messages",
]


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
        if self.engine.nvext and api == "chat":
            body["nvext"] = dynamo_nvext(body.get("nvext"), _length(api, body))
        return orjson.dumps(body)


DYNAMO_EXTRA_FIELDS = ("worker_id", "timing")
"""What Dynamo is asked to put in each answer's ``nvext``: the workers that served it (a
prefill and a decode worker, the same one when aggregated) and its own timing (TTFT, queue
wait, the router's predicted KV hit rate)."""


def dynamo_nvext(recorded: Any, osl: int) -> dict[str, Any]:
    """A request's ``nvext`` for Dynamo: the recorded one (when an object) with
    ``agent_hints.osl``, the expected output length, and ``extra_fields`` asking for
    ``DYNAMO_EXTRA_FIELDS``."""
    nvext = dict(recorded) if isinstance(recorded, dict) else {}
    hints = nvext.get("agent_hints")
    nvext["agent_hints"] = {**(hints if isinstance(hints, dict) else {}), "osl": osl}
    fields = nvext.get("extra_fields")
    have = [f for f in fields if isinstance(f, str)] if isinstance(fields, list) else []
    nvext["extra_fields"] = have + [f for f in DYNAMO_EXTRA_FIELDS if f not in have]
    return nvext


def _length(api: str, body: dict[str, Any]) -> Any:
    """The output length a body in ``api`` asks for."""
    if api == "gemini":
        return body["generationConfig"]["maxOutputTokens"]
    return body["max_output_tokens" if api == "responses" else "max_tokens"]
