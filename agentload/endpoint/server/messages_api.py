"""``POST /v1/messages``: the simulator speaking Anthropic Messages.

A request is read into its chat form (``agentload.wire.messages.to_chat``), validated as a chat
request and answered by ``Simulator.admit``: one conversation gets one reply whether it came
as Messages or as Chat Completions. The reply is rendered as Anthropic sends it: a ``message``
object whose content is a text block (when there is text, or nothing else) then one
``tool_use`` block per call (``input``: the call's arguments parsed), or its SSE events
(``message_start``, ``ping``, per block ``content_block_start`` / ``content_block_delta`` /
``content_block_stop``, ``message_delta``, ``message_stop``), one delta per token, paced by
the engine like the chat stream (``Rendered.token_pos``). Usage: ``input_tokens`` are the
uncached prompt tokens, ``cache_read_input_tokens`` the prefix-cache hits,
``cache_creation_input_tokens`` 0. Every request the real API accepts is answered (system
messages mid-conversation, every block type, server tools, which are offered no call, and keys
such as ``thinking`` or ``context_management``, ignored). Errors use Anthropic's shape
(``{"type": "error", "error": {"type", "message"}}``) and, for a body broken in shape, its
wording (``messages.0.content.3.text: Field required``: ``anthropic_wording``). The stop reason is ``end_turn`` for
any chat ``stop`` (the simulator does not say whether a stop sequence cut the text).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from agentload.endpoint.server.answering import Answering
from agentload.endpoint.server.request import (
    APIError,
    body_and_model,
    chat_request_from,
)
from agentload.endpoint.server.sse import Rendered, Reply, js_string
from agentload.wire.messages import to_chat
from agentload.wire.reply import ShapeError

__all__ = [
    "anthropic_wording",
    "error_response",
    "messages",
    "render_events",
    "render_message",
    "start_event",
]

_STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_KINDS = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


_VALID = {
    "str": "a valid string",
    "list": "a valid list",
    "dict": "a valid dictionary",
    "an object": "a valid dictionary",
    "int": "a valid integer",
}


def anthropic_wording(exc: ShapeError) -> str:
    """A body broken in shape as Anthropic's API words it (``messages.1.content.0.text: Field
    required``; ``messages.0.content: Input should be a valid string or a valid list``)."""
    path = exc.field.removeprefix("body.").replace("[", ".").replace("]", "")
    if exc.got == "NoneType":
        return f"{path}: Field required"
    return f"{path}: Input should be " + " or ".join(_VALID.get(e, e) for e in exc.expected)


def error_response(exc: APIError) -> Response:
    """An ``APIError`` in Anthropic's error shape, with its status."""
    err = {"type": _KINDS.get(exc.status, "api_error"), "message": exc.message}
    body = orjson.dumps({"type": "error", "error": err})
    return Response(body, status_code=exc.status, media_type="application/json")


def _usage(r: Reply) -> dict[str, int]:
    return {
        "input_tokens": r.prompt_tokens - r.cached_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": r.cached_tokens,
        "output_tokens": r.completion_tokens,
    }


def _blocks(r: Reply) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if r.content or not r.tool_calls:
        out.append({"type": "text", "text": r.content})
    for cid, name, pieces in r.tool_calls:
        out.append({"type": "tool_use", "id": cid, "name": name, "input": _input(pieces)})
    return out


def _input(pieces: list[str]) -> Any:
    return orjson.loads("".join(pieces)) if pieces else {}


def render_message(r: Reply, mid: str, model: str) -> bytes:
    """The non-streamed ``message`` object."""
    return orjson.dumps(
        {
            "id": mid,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": _blocks(r),
            "stop_reason": _STOP.get(r.finish_reason, "end_turn"),
            "stop_sequence": None,
            "usage": _usage(r),
        }
    )


def _event(name: bytes, data: dict[str, Any]) -> bytes:
    return b"event: " + name + b"\ndata: " + orjson.dumps(data) + b"\n\n"


def start_event(r: Reply, mid: str, model: str) -> bytes:
    """``message_start`` (usage as known when the first token is ready: cached tokens set)."""
    usage = {**_usage(r), "output_tokens": 1}
    msg: dict[str, Any] = {
        "id": mid,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return _event(b"message_start", {"type": "message_start", "message": msg})


def render_events(r: Reply, mid: str, model: str) -> Rendered:
    """All SSE events of a streamed answer; ``events[0]`` (``message_start``) is rebuilt with
    ``start_event`` once the cached tokens are known."""
    events = [start_event(r, mid, model), _event(b"ping", {"type": "ping"})]
    token_pos: list[int] = []
    index = 0

    def block(start: dict[str, Any], kind: bytes, key: bytes, pieces: list[str]) -> None:
        nonlocal index
        idx = str(index).encode()
        events.append(
            _event(
                b"content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        pre = (
            b'event: content_block_delta\ndata: {"type":"content_block_delta","index":'
            + idx
            + b',"delta":{"type":"'
            + kind
            + b'","'
            + key
            + b'":'
        )
        for p in pieces:
            events.append(pre + js_string(p) + b"}}\n\n")
            token_pos.append(len(events))
        events.append(_event(b"content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if r.content_pieces or not r.tool_calls:
        block({"type": "text", "text": ""}, b"text_delta", b"text", r.content_pieces)
    for cid, name, pieces in r.tool_calls:
        start = {"type": "tool_use", "id": cid, "name": name, "input": {}}
        block(start, b"input_json_delta", b"partial_json", pieces)
    delta = {"stop_reason": _STOP.get(r.finish_reason, "end_turn"), "stop_sequence": None}
    events.append(
        _event(
            b"message_delta",
            {
                "type": "message_delta",
                "delta": delta,
                "usage": {"output_tokens": r.completion_tokens},
            },
        )
    )
    events.append(_event(b"message_stop", {"type": "message_stop"}))
    return Rendered(events, token_pos, 2)


async def messages(sim: Answering, request: Request) -> Response:
    """``POST /v1/messages`` (``max_tokens`` required, as Anthropic's API has it); a body
    ``to_chat`` cannot read is a 400 naming the field."""
    try:
        body, model = body_and_model(await request.body())
        if body.get("max_tokens") is None:
            raise APIError(400, "max_tokens: field required", "max_tokens", "missing_field")
        try:
            chat = to_chat(body)
        except ShapeError as exc:
            raise APIError(400, anthropic_wording(exc), None, "invalid_value") from None
        req = chat_request_from(chat, model)
        reply, seq = sim.admit(req)
    except APIError as exc:
        return error_response(exc)
    mid = sim.response_id("msg").replace("-", "_", 1)
    if req.stream:
        r = render_events(reply, mid, sim.model)

        def on_first() -> None:
            r.events[0] = start_event(reply, mid, sim.model)

        return sim.streaming(r, reply, seq, on_first)
    await sim.finish(reply, seq)
    return Response(render_message(reply, mid, sim.model), media_type="application/json")
