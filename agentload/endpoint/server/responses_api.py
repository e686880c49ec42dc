"""``POST /v1/responses``: the simulator answering OpenAI Responses requests.

A request is read into chat with ``agentload.wire.responses.to_chat`` and answered by the same
``admit`` as ``/v1/chat/completions``, so a conversation gets one reply whichever API carries it.
The answer is a ``response`` object: a ``message`` item with the text (when there is text),
then one ``function_call`` item per tool call (``call_id`` the chat reply's tool call id; a
call of a ``custom`` tool is a ``custom_tool_call`` whose ``input`` is its chat arguments'
``input``, streamed as ``custom_tool_call_input.delta`` events). Namespace tools' inner
functions may be called (by their own names; the ``function_call`` item names its
``namespace``, which Codex routes the call by); hosted tools (``web_search``...) are offered
no call. An ``encrypted_content`` part of an input item (Codex sends back a function argument
its tool marks ``encrypted`` so) reads as the text it holds: the simulator encrypts nothing.
``incomplete`` with ``max_output_tokens`` when the reply hit ``max_output_tokens``. Streamed, it
is the event sequence the ``openai`` SDK's typed stream accumulator accepts:
``response.created``, ``response.in_progress``, per item ``output_item.added``, its content
events (``content_part.added``, one ``output_text.delta`` per token, ``output_text.done``,
``content_part.done``; or one ``function_call_arguments.delta`` per token and
``function_call_arguments.done``), ``output_item.done``, and ``response.completed`` carrying
the whole response with usage. Every event has its ``type`` and an increasing
``sequence_number``. Responses are kept (the last ``STORED_RESPONSES``, unless ``store`` is false)
so a request may continue one with ``previous_response_id`` (an unknown id is a 404). A body
broken in shape is a 400 in OpenAI's words (``request.openai_shape_error``).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from agentload.endpoint.server.answering import Answering
from agentload.endpoint.server.request import (
    APIError,
    ChatRequest,
    body_and_model,
    chat_request_from,
    openai_shape_error,
)
from agentload.endpoint.server.sse import Rendered, Reply
from agentload.trace.capture import assistant_message
from agentload.wire import responses as wire
from agentload.wire.reply import ShapeError

__all__ = ["ResponseIds", "render_response", "render_response_stream", "responses"]


class ResponseIds:
    """The ids of one response: ``resp_X``, its message ``msg_X`` and calls ``fc_X_NN``."""

    def __init__(self, tail: str) -> None:
        self.response = f"resp_{tail}"
        self.message = f"msg_{tail}"
        self._tail = tail

    def call(self, i: int) -> str:
        return f"fc_{self._tail}_{i:02x}"


async def responses(sim: Answering, request: Request) -> Response:
    """The handler of ``POST /v1/responses`` (errors in OpenAI's ``{"error": ...}`` shape)."""
    try:
        body, model = body_and_model(await request.body())
        req = _chat_request(body, model, sim.stored_responses)
        reply, seq = sim.admit(req, "input")
    except APIError as exc:
        return Response(exc.body(), status_code=exc.status, media_type="application/json")
    ids = ResponseIds(sim.response_id("resp").partition("-")[2])
    if body.get("store", True) is not False:
        _store(sim.stored_responses, ids.response, req.messages, reply)
    if req.stream:
        r = render_response_stream(reply, ids, sim.created, sim.model, body)

        def on_first() -> None:
            r.events[-1] = _completed_event(
                reply, ids, sim.created, sim.model, body, len(r.events) - 1
            )

        return sim.streaming(r, reply, seq, on_first)
    await sim.finish(reply, seq)
    return Response(
        render_response(reply, ids, sim.created, sim.model, body), media_type="application/json"
    )


STORED_RESPONSES = 1024
"""Responses a simulator keeps for ``previous_response_id`` (the oldest are forgotten)."""


def _store(
    store: MutableMapping[str, list[dict[str, Any]]],
    rid: str,
    messages: list[dict[str, Any]],
    reply: Reply,
) -> None:
    """Keep a response's conversation, its reply last in the chat form, for requests that
    continue from it."""
    calls = [
        {"id": cid, "type": "function", "function": {"name": name, "arguments": "".join(a)}}
        for cid, name, a in reply.tool_calls
    ]
    store[rid] = [*messages, assistant_message(reply.content or None, calls or None)]
    while len(store) > STORED_RESPONSES:
        del store[next(iter(store))]


def _chat_request(
    body: dict[str, Any], model: str, store: Mapping[str, list[dict[str, Any]]]
) -> ChatRequest:
    try:
        chat = wire.to_chat(_decrypted(body))
    except ShapeError as exc:
        raise openai_shape_error(exc) from None
    prev = wire.previous_response_id(body)
    if prev is not None:
        earlier = store.get(prev)
        if earlier is None:
            raise APIError(
                404,
                f"previous_response_id: no stored response {prev!r} (this server keeps the "
                f"last {STORED_RESPONSES})",
                "previous_response_id",
                "previous_response_not_found",
            )
        chat["messages"] = wire.continue_from(earlier, chat["messages"])
    if not chat["messages"]:
        raise APIError(
            400, "input: field required (a string or a non-empty list)", "input", "missing_field"
        )
    try:
        return chat_request_from(chat, model)
    except APIError as exc:
        native = _NATIVE.get(exc.param or "")
        if native is None:
            raise
        message = native + exc.message.removeprefix(exc.param or "")
        raise APIError(exc.status, message, native, exc.code) from None


def _decrypted(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with each ``encrypted_content`` content part read as the text it holds: a
    function argument the tool marks ``encrypted`` (Codex's ``spawn_agent`` ``message``) comes
    back as one, and the simulator's encryption is the identity."""
    items = body.get("input")
    if not isinstance(items, list) or "encrypted_content" not in orjson.dumps(items).decode():
        return body
    out = []
    for item in items:
        parts = item.get("content") if isinstance(item, dict) else None
        if isinstance(parts, list):
            parts = [
                {"type": "input_text", "text": p["encrypted_content"]}
                if isinstance(p, dict)
                and p.get("type") == "encrypted_content"
                and isinstance(p.get("encrypted_content"), str)
                else p
                for p in parts
            ]
            item = {**item, "content": parts}
        out.append(item)
    return {**body, "input": out}


_NATIVE = {"max_tokens": "max_output_tokens", "tool_choice.function.name": "tool_choice.name"}
"""Chat fields whose errors are named by the Responses field they came from."""


# -- the response object ------------------------------------------------------------------------


def _response(
    r: Reply | None, ids: ResponseIds, created: int, model: str, body: dict[str, Any]
) -> dict[str, Any]:
    """The ``response`` object: ``in_progress`` with no output when ``r`` is None."""
    status = (
        "in_progress" if r is None else "incomplete" if r.finish_reason == "length" else "completed"
    )
    return {
        "id": ids.response,
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": model,
        "output": [] if r is None else _output(r, ids, body),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": {"effort": None, "summary": None},
        "store": body.get("store", True) is not False,
        "temperature": body.get("temperature", 1.0),
        "text": {"format": {"type": "text"}},
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools") or [],
        "top_p": body.get("top_p", 1.0),
        "truncation": "disabled",
        "usage": None if r is None else _usage(r),
        "user": None,
        "metadata": {},
    }


def _usage(r: Reply) -> dict[str, Any]:
    return {
        "input_tokens": r.prompt_tokens,
        "input_tokens_details": {"cached_tokens": r.cached_tokens},
        "output_tokens": r.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": r.prompt_tokens + r.completion_tokens,
    }


def _message(ids: ResponseIds, text: str, status: str) -> dict[str, Any]:
    content = [] if status == "in_progress" else [_part(text)]
    return {
        "id": ids.message,
        "type": "message",
        "role": "assistant",
        "status": status,
        "content": content,
    }


def _part(text: str) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}


def _call(
    ids: ResponseIds,
    i: int,
    cid: str,
    name: str,
    args: str,
    status: str,
    custom: bool = False,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A ``function_call`` item (of ``namespace`` when its tool is inside one), or
    (``custom``: a call of a freeform tool, whose chat form takes one string ``input``) a
    ``custom_tool_call`` item."""
    if custom:
        return {
            "id": ids.call(i),
            "type": "custom_tool_call",
            "call_id": cid,
            "name": name,
            "input": _custom_input(args),
            "status": status,
        }
    item = {
        "id": ids.call(i),
        "type": "function_call",
        "call_id": cid,
        "name": name,
        "arguments": args,
        "status": status,
    }
    if namespace is not None:
        item["namespace"] = namespace
    return item


def _custom_input(args: str) -> str:
    """A custom tool call's input: the ``input`` of its chat arguments (the text if none)."""
    if not args:
        return ""
    try:
        value = orjson.loads(args)
    except orjson.JSONDecodeError:
        return args
    got = value.get("input") if isinstance(value, dict) else None
    return got if isinstance(got, str) else args


def custom_tools(body: dict[str, Any]) -> frozenset[str]:
    """The names of a request's ``custom`` (freeform) tools, in a ``namespace`` too."""
    names: set[str] = set()
    pending = list(body.get("tools") or ())
    while pending:
        t = pending.pop()
        if isinstance(t, dict) and t.get("type") == "namespace":
            pending.extend(t.get("tools") or ())
        elif isinstance(t, dict) and t.get("type") == "custom" and isinstance(t.get("name"), str):
            names.add(t["name"])
    return frozenset(names)


def namespaces(body: dict[str, Any]) -> dict[str, str]:
    """The namespace of each function a request's ``namespace`` tools hold (by its name)."""
    out: dict[str, str] = {}
    for t in body.get("tools") or ():
        if isinstance(t, dict) and t.get("type") == "namespace" and isinstance(t.get("name"), str):
            for inner in t.get("tools") or ():
                if isinstance(inner, dict) and isinstance(inner.get("name"), str):
                    out.setdefault(inner["name"], t["name"])
    return out


def _output(r: Reply, ids: ResponseIds, body: dict[str, Any]) -> list[dict[str, Any]]:
    out = [_message(ids, r.content, "completed")] if r.content else []
    custom, spaces = custom_tools(body), namespaces(body)
    for i, (cid, name, pieces) in enumerate(r.tool_calls):
        args = "".join(pieces)
        out.append(_call(ids, i, cid, name, args, "completed", name in custom, spaces.get(name)))
    return out


def render_response(
    r: Reply, ids: ResponseIds, created: int, model: str, body: dict[str, Any]
) -> bytes:
    """The non-streamed ``response`` object."""
    return orjson.dumps(_response(r, ids, created, model, body))


# -- the event stream ---------------------------------------------------------------------------


def _event(kind: str, seq: int, fields: dict[str, Any]) -> bytes:
    data = orjson.dumps({"type": kind, "sequence_number": seq, **fields})
    return b"event: " + kind.encode() + b"\ndata: " + data + b"\n\n"


def _completed_event(
    r: Reply, ids: ResponseIds, created: int, model: str, body: dict[str, Any], seq: int
) -> bytes:
    response = _response(r, ids, created, model, body)
    kind = "response.incomplete" if response["status"] == "incomplete" else "response.completed"
    return _event(kind, seq, {"response": response})


def render_response_stream(
    r: Reply, ids: ResponseIds, created: int, model: str, body: dict[str, Any]
) -> Rendered:
    """All SSE events of a streamed response; ``token_pos[k]`` is how many may go out once
    ``k + 1`` tokens are generated. The last event (``response.completed``) is built again
    when usage is known (``reply.cached_tokens``, at the first token)."""
    start = _response(None, ids, created, model, body)
    events = [
        _event("response.created", 0, {"response": start}),
        _event("response.in_progress", 1, {"response": start}),
    ]
    token_pos: list[int] = []

    def add(kind: str, **fields: Any) -> None:
        events.append(_event(kind, len(events), fields))

    index = 0
    if r.content:
        where: dict[str, Any] = {"item_id": ids.message, "output_index": 0, "content_index": 0}
        add("response.output_item.added", output_index=0, item=_message(ids, "", "in_progress"))
        add("response.content_part.added", **where, part=_part(""))
        for p in r.content_pieces:
            events.append(_text_delta(len(events), ids.message, p))
            token_pos.append(len(events))
        add("response.output_text.done", **where, text=r.content, logprobs=[])
        add("response.content_part.done", **where, part=_part(r.content))
        add("response.output_item.done", output_index=0, item=_message(ids, r.content, "completed"))
        index = 1
    custom, spaces = custom_tools(body), namespaces(body)
    for i, (cid, name, pieces) in enumerate(r.tool_calls):
        args = "".join(pieces)
        at = index + i
        mine = name in custom
        ns = spaces.get(name)
        where = {"item_id": ids.call(i), "output_index": at}
        add(
            "response.output_item.added",
            output_index=at,
            item=_call(ids, i, cid, name, "", "in_progress", mine, ns),
        )
        for delta in _input_deltas(pieces) if mine else pieces:
            kind = "custom_tool_call_input" if mine else "function_call_arguments"
            add(f"response.{kind}.delta", **where, delta=delta)
            token_pos.append(len(events))
        if mine:
            add("response.custom_tool_call_input.done", **where, input=_custom_input(args))
        else:
            add("response.function_call_arguments.done", **where, name=name, arguments=args)
        add(
            "response.output_item.done",
            output_index=at,
            item=_call(ids, i, cid, name, args, "completed", mine, ns),
        )
    events.append(_completed_event(r, ids, created, model, body, len(events)))
    return Rendered(events, token_pos, 2)


def _input_deltas(pieces: list[str]) -> list[str]:
    """A custom tool call's input cut into one delta per generated token (its chat arguments'
    pieces), so it is paced as they are."""
    text = _custom_input("".join(pieces))
    n = len(pieces)
    return [text[k * len(text) // n : (k + 1) * len(text) // n] for k in range(n)]


def _text_delta(seq: int, item_id: str, piece: str) -> bytes:
    """One ``response.output_text.delta`` (the per-token event, built without a dict)."""
    return (
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        b'"sequence_number":'
        + str(seq).encode()
        + b',"item_id":"'
        + item_id.encode()
        + b'","output_index":0,"content_index":0,"delta":'
        + orjson.dumps(piece)
        + b',"logprobs":[]}\n\n'
    )
