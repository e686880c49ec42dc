"""``POST …/models/{model}:generateContent``: the simulator speaking Google's Gemini API.

Served under ``/v1beta`` (where Gemini CLI and Google's SDKs send it) and ``/v1``. A request
is read into its chat form (``agentload.wire.gemini.to_chat``; the model and whether it
streams are in the path), validated as a chat request and answered by ``Simulator.admit``: one
conversation gets one reply whichever API carried it.

* ``:generateContent`` → one ``GenerateContentResponse``: the first candidate's parts (a text
  part when there is text, or nothing else; one ``functionCall`` part per call, with an
  ``id``), its ``finishReason`` (``STOP``, also for function calls; ``MAX_TOKENS``), the
  ``usageMetadata`` (``promptTokenCount`` counts every prompt token,
  ``cachedContentTokenCount`` the prefix-cache hits), ``modelVersion`` and ``responseId``.
* ``:streamGenerateContent?alt=sse`` → the same as SSE events (``data: `` lines, each a
  ``GenerateContentResponse``): one text part per token, each function call whole once its
  arguments are generated, then a last event with the ``finishReason`` and the usage; paced by
  the engine like the chat stream. Without ``alt=sse`` the answer is a JSON array of them.
* ``:countTokens`` → ``{"totalTokens": N}`` for the ``contents`` (or the
  ``generateContentRequest``) it carries, in the simulator's count of the chat form.
* ``GET /v1beta/models`` and ``GET /v1beta/models/{model}`` list the model served.

Errors use Google's shape (``{"error": {"code", "message", "status"}}``); a body broken in
shape is a 400 naming the field (``contents[0].parts[1].text: expected str, got int``).
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from agentload.endpoint.server.answering import Answering
from agentload.endpoint.server.request import APIError, chat_request_from
from agentload.endpoint.server.sse import Rendered, Reply, js_string
from agentload.wire.apis import GEMINI_CALLS
from agentload.wire.gemini import to_chat
from agentload.wire.reply import ShapeError

__all__ = ["error_response", "gemini", "gemini_model", "gemini_models", "render_response"]

_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}
_FINISH = {"length": "MAX_TOKENS"}
_METHODS = [*GEMINI_CALLS, "countTokens"]


def error_response(exc: APIError) -> Response:
    """An ``APIError`` in Google's error shape, with its status."""
    status = _STATUS.get(exc.status, "INTERNAL")
    body = orjson.dumps({"error": {"code": exc.status, "message": exc.message, "status": status}})
    return Response(body, status_code=exc.status, media_type="application/json")


def _usage(r: Reply) -> dict[str, int]:
    u = {
        "promptTokenCount": r.prompt_tokens,
        "candidatesTokenCount": r.completion_tokens,
        "totalTokenCount": r.prompt_tokens + r.completion_tokens,
    }
    if r.cached_tokens:
        u["cachedContentTokenCount"] = r.cached_tokens
    return u


def _call_part(cid: str, name: str, pieces: list[str]) -> dict[str, Any]:
    args = orjson.loads("".join(pieces)) if pieces else {}
    return {"functionCall": {"id": cid, "name": name, "args": args}}


def _candidate(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        c["finishReason"] = finish
    return c


def _response(r: Reply, rid: str, model: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    if r.content or not r.tool_calls:
        parts.append({"text": r.content})
    parts += [_call_part(cid, name, pieces) for cid, name, pieces in r.tool_calls]
    return {
        "candidates": [_candidate(parts, _FINISH.get(r.finish_reason, "STOP"))],
        "usageMetadata": _usage(r),
        "modelVersion": model,
        "responseId": rid,
    }


def render_response(r: Reply, rid: str, model: str) -> bytes:
    """The non-streamed ``GenerateContentResponse``."""
    return orjson.dumps(_response(r, rid, model))


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\r\n\r\n"


def last_event(r: Reply, rid: str, model: str) -> bytes:
    """The stream's last event: the finish reason and the usage (cached tokens known)."""
    finish = _FINISH.get(r.finish_reason, "STOP")
    tail = {"usageMetadata": _usage(r), "modelVersion": model, "responseId": rid}
    return _event({"candidates": [_candidate([{"text": ""}], finish)], **tail})


def render_events(r: Reply, rid: str, model: str) -> Rendered:
    """All SSE events of a streamed answer; the last is rebuilt with ``last_event`` once the
    cached tokens are known."""
    tail = b'],"role":"model"},"index":0}],"modelVersion":' + js_string(model)
    tail += b',"responseId":"' + rid.encode() + b'"}\r\n\r\n'
    events: list[bytes] = []
    token_pos: list[int] = []
    for p in r.content_pieces:
        events.append(
            b'data: {"candidates":[{"content":{"parts":[{"text":' + js_string(p) + b"}" + tail
        )
        token_pos.append(len(events))
    for cid, name, pieces in r.tool_calls:
        token_pos.extend([len(events)] * max(0, len(pieces) - 1))  # the call goes out whole
        part = orjson.dumps(_call_part(cid, name, pieces))
        events.append(b'data: {"candidates":[{"content":{"parts":[' + part + tail)
        if pieces:
            token_pos.append(len(events))
    events.append(last_event(r, rid, model))
    return Rendered(events, token_pos, 0)


def _body(raw: bytes) -> dict[str, Any]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise APIError(400, f"body: malformed JSON: {exc}", None, "invalid_json") from None
    if not isinstance(body, dict):
        raise APIError(400, "body: expected a JSON object", None, "invalid_value")
    return body


def _chat(body: dict[str, Any], path: str) -> dict[str, Any]:
    try:
        return to_chat(body, path)
    except ShapeError as exc:
        raise APIError(400, str(exc), exc.field, "invalid_value") from None


async def gemini(sim: Answering, request: Request) -> Response:
    """``POST …/models/{model}:{method}`` (see the module docstring)."""
    model, _, method = request.path_params["target"].rpartition(":")
    try:
        if method not in _METHODS:
            raise APIError(404, f"method {method or '(none)'} not found; serves {_METHODS}")
        body = _body(await request.body())
        if method == "countTokens":
            return await _count(sim, body, request.url.path)
        chat = _chat(body, request.url.path)
        req = chat_request_from(chat, model)
        reply, seq = sim.admit(req, "contents")
    except APIError as exc:
        return error_response(exc)
    rid = sim.response_id("gen")
    if req.stream and request.query_params.get("alt") == "sse":
        r = render_events(reply, rid, sim.model)

        def on_first() -> None:
            r.events[-1] = last_event(reply, rid, sim.model)

        return sim.streaming(r, reply, seq, on_first)
    await sim.finish(reply, seq)
    answer = _response(reply, rid, sim.model)
    out = orjson.dumps([answer] if req.stream else answer)
    return Response(out, media_type="application/json")


async def _count(sim: Answering, body: dict[str, Any], path: str) -> Response:
    inner = body.get("generateContentRequest")
    chat = _chat(inner if isinstance(inner, dict) else body, path)
    _, tokens, _ = sim.prompt(chat_request_from(chat, str(chat.get("model", sim.model))))
    return Response(orjson.dumps({"totalTokens": tokens}), media_type="application/json")


def _model_obj(sim: Answering) -> dict[str, Any]:
    return {
        "name": f"models/{sim.model}",
        "version": "agentload",
        "displayName": sim.model,
        "supportedGenerationMethods": _METHODS,
    }


async def gemini_models(sim: Answering, request: Request) -> Response:
    """``GET …/models``: the model served, in Gemini's list shape."""
    return Response(orjson.dumps({"models": [_model_obj(sim)]}), media_type="application/json")


async def gemini_model(sim: Answering, request: Request) -> Response:
    """``GET …/models/{model}``: the model served, or 404."""
    if request.path_params["target"] != sim.model:
        name = request.path_params["target"]
        return error_response(APIError(404, f"models/{name} is not found; serves {sim.model}"))
    return Response(orjson.dumps(_model_obj(sim)), media_type="application/json")
