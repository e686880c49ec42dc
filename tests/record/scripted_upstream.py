"""A scripted "model" for the real-agent tests: an HTTP server on 127.0.0.1 that speaks
Anthropic Messages, OpenAI Responses, Chat Completions and Google's Gemini API (each streamed or
not) and answers every request with the turn a test's script picks from the conversation so
far.

A script is a function of the request (``Asked``: its API, headers and body) to a ``Turn``: some
text and/or tool calls. The server renders the turn in the request's own API, the way the real
services do (Messages SSE events with ``input_json_delta``, Responses ``response.*`` events with
``function_call`` items, Chat chunks with ``tool_calls`` deltas, Gemini
``GenerateContentResponse`` SSE events with ``functionCall`` parts, without an ``id`` as the
real service sends them unless ``gemini_call_ids``), and keeps every request it served, in
order, so a test can compare the trace with what the agent really sent. A Gemini request is
``POST …/models/{model}:generateContent`` or ``:streamGenerateContent?alt=sse`` (the path
says the model and whether it streams).

A request for anything else (a WebSocket upgrade, ``/api/hello``, a model list) gets a 404, as
from a server without those features; the agents then fall back on plain HTTP.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agentload.wire.apis import GEMINI_CALLS, gemini_target


@dataclass(frozen=True)
class Call:
    """A tool call the model makes: the tool's name and its arguments."""

    name: str
    arguments: dict[str, Any]
    namespace: str | None = None
    """Responses only: the namespace tool the function belongs to (Codex's ``multi_agent_v1``)."""


@dataclass(frozen=True)
class Turn:
    """What the model answers: text, tool calls, or both."""

    text: str = ""
    calls: tuple[Call, ...] = ()


@dataclass
class Asked:
    """One model request the server served: its API, path, headers (lower-case) and body."""

    api: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    turn: Turn | None = None

    def texts(self) -> list[str]:
        """Every text of the request's conversation (system, messages, input items, or
        Gemini's ``systemInstruction`` and ``contents``: text parts, call arguments, results)."""
        out: list[str] = []
        _strings(self.body.get("system"), out)
        _strings(self.body.get("instructions"), out)
        _strings(self.body.get("messages"), out)
        _strings(self.body.get("input"), out)
        _gemini_strings(self.body.get("systemInstruction"), out)
        _gemini_strings(self.body.get("contents"), out)
        return out

    def first_user_text(self) -> str:
        """The text of the first user message (a sub-agent's task)."""
        texts = self.user_texts()
        return texts[0] if texts else ""

    def user_texts(self) -> list[str]:
        """The text of each user message (or user input item, or Gemini ``user`` content
        with text parts: one that carries only function responses is no user text), in
        order."""
        if self.api == "gemini":
            return [t for c in _contents(self.body) if c.get("role", "user") == "user"
                    for t in [_gemini_text(c)] if t]  # fmt: skip
        items = self.body.get("messages") or self.body.get("input") or []
        if isinstance(items, str):
            return [items]
        out: list[str] = []
        for m in items:
            if isinstance(m, dict) and m.get("role") == "user":
                part: list[str] = []
                _strings(m.get("content"), part)
                out.append("\n".join(part))
        return out

    def results(self) -> list[str]:
        """The tool results the conversation carries, oldest first."""
        out: list[str] = []
        for m in self.body.get("messages") or []:
            if m.get("role") == "tool":
                _strings(m.get("content"), out)
            content = m.get("content")
            if isinstance(content, list):
                for b in content:
                    if isinstance(b, dict) and b.get("type") == "tool_result":
                        part: list[str] = []
                        _strings(b.get("content"), part)
                        out.append("\n".join(part))
        inp = self.body.get("input")
        if isinstance(inp, list):
            for it in inp:
                if isinstance(it, dict) and str(it.get("type", "")).endswith("_output"):
                    part = []
                    _strings(it.get("output"), part)
                    out.append("\n".join(part))
        for p in _parts(self.body):
            resp = p.get("functionResponse")
            if isinstance(resp, dict):
                value = resp.get("response")
                if isinstance(value, dict) and list(value) == ["output"]:
                    value = value["output"]
                out.append(value if isinstance(value, str) else json.dumps(value))
        return out

    def calls_made(self) -> list[str]:
        """The names of the tool calls the conversation carries (the model's earlier turns)."""
        out: list[str] = []
        for m in self.body.get("messages") or []:
            for tc in m.get("tool_calls") or ():
                out.append(str((tc.get("function") or {}).get("name")))
            content = m.get("content")
            if isinstance(content, list):
                out += [
                    b["name"]
                    for b in content
                    if isinstance(b, dict) and b.get("type") == "tool_use"
                ]
        inp = self.body.get("input")
        if isinstance(inp, list):
            out += [
                str(it.get("name"))
                for it in inp
                if isinstance(it, dict) and it.get("type") in ("function_call", "custom_tool_call")
            ]
        out += [str(p["functionCall"].get("name")) for p in _parts(self.body)
                if isinstance(p.get("functionCall"), dict)]  # fmt: skip
        return out


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in ("text", "content", "output", "input", "arguments", "message", "prompt"):
                _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def _contents(body: dict[str, Any]) -> list[dict[str, Any]]:
    contents = body.get("contents")
    return [c for c in contents if isinstance(c, dict)] if isinstance(contents, list) else []


def _parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every part of a Gemini request's ``contents``, in order."""
    return [p for c in _contents(body) for p in c.get("parts") or () if isinstance(p, dict)]


def _gemini_text(content: dict[str, Any]) -> str:
    """A Gemini content's text parts (thoughts left out), joined with newlines."""
    texts = [p["text"] for p in content.get("parts") or ()
             if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")]  # fmt: skip
    return "\n".join(texts)


def _gemini_strings(value: Any, out: list[str]) -> None:
    """The texts of a Gemini content (or a list of them, or a string): text parts, function
    calls' arguments and function responses."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, list):
        for v in value:
            _gemini_strings(v, out)
    elif isinstance(value, dict):
        for p in value.get("parts") or ():
            if not isinstance(p, dict):
                continue
            if isinstance(p.get("text"), str):
                out.append(p["text"])
            for key, inner in (("functionCall", "args"), ("functionResponse", "response")):
                if isinstance(p.get(key), dict):
                    out.append(json.dumps(p[key].get(inner)))


Script = Callable[[Asked], Turn]


@dataclass
class ScriptedUpstream:
    """The running server (see the module docstring): ``url`` is its root (no ``/v1``)."""

    script: Script
    gemini_call_ids: bool = False
    """Whether a Gemini ``functionCall`` part carries an ``id`` (the real service usually sends
    none; the simulator sends one)."""
    asked: list[Asked] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    """``METHOD path`` of each request it answered 404, `` (upgrade: websocket)`` added to a
    WebSocket upgrade."""
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _ids: Iterator[int] = field(default_factory=itertools.count)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> ScriptedUpstream:
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                upstream._refuse(self)

            def do_HEAD(self) -> None:
                upstream._refuse(self)

            def do_POST(self) -> None:
                upstream._serve(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- serving -------------------------------------------------------------------------------
    def _refuse(self, h: BaseHTTPRequestHandler) -> None:
        with self._lock:
            upgrade = (h.headers.get("upgrade") or "").lower() == "websocket"
            self.refused.append(
                f"{h.command} {h.path}" + (" (upgrade: websocket)" if upgrade else "")
            )
        _send(h, 404, "application/json", b'{"error":{"message":"not found","type":"not_found"}}')

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("content-length") or 0)
        body = json.loads(h.rfile.read(n) or b"{}")
        path = h.path.split("?")[0]
        target = gemini_target(path)
        api = (
            "messages"
            if path.endswith("/messages")
            else "responses"
            if path.endswith("/responses")
            else "chat"
            if path.endswith("/chat/completions")
            else "gemini"
            if target is not None and target[1] in GEMINI_CALLS
            else ""
        )
        if not api or not isinstance(body, dict):
            self._refuse(h)
            return
        asked = Asked(api, h.path, {k.lower(): v for k, v in h.headers.items()}, body)
        turn = self.script(asked)
        with self._lock:
            asked.turn = turn
            self.asked.append(asked)
            n_id = next(self._ids)
        if api == "gemini" and target is not None:
            stream = target[1] == "streamGenerateContent"
            events = _gemini(turn, n_id, target[0], self.gemini_call_ids, stream)
            if not stream:
                _send(h, 200, "application/json", json.dumps(events[0]).encode())
            elif "alt=sse" in h.path:
                _send(h, 200, "text/event-stream", _sse([(None, e) for e in events]))
            else:
                _send(h, 200, "application/json", json.dumps(events).encode())
            return
        render = {"messages": _messages, "responses": _responses, "chat": _chat}[api]
        stream = bool(body.get("stream"))
        payload = render(turn, n_id, str(body.get("model", "scripted")), stream)
        _send(h, 200, "text/event-stream" if stream else "application/json", payload)


def _send(h: BaseHTTPRequestHandler, status: int, ctype: str, data: bytes) -> None:
    h.send_response(status)
    h.send_header("content-type", ctype)
    h.send_header("content-length", str(len(data)))
    h.end_headers()
    if h.command != "HEAD":
        h.wfile.write(data)


def _sse(events: list[tuple[str | None, Any]]) -> bytes:
    out = []
    for name, data in events:
        head = f"event: {name}\n" if name else ""
        out.append(f"{head}data: {data if isinstance(data, str) else json.dumps(data)}\n\n")
    return "".join(out).encode()


def _usage(turn: Turn) -> tuple[int, int]:
    return 100, 5 + len(turn.text.split()) + 10 * len(turn.calls)


# -- Anthropic Messages ----------------------------------------------------------------------------
def _messages(turn: Turn, n: int, model: str, stream: bool) -> bytes:
    blocks: list[dict[str, Any]] = []
    if turn.text:
        blocks.append({"type": "text", "text": turn.text})
    for i, c in enumerate(turn.calls):
        blocks.append(
            {"type": "tool_use", "id": f"toolu_{n:04d}_{i}", "name": c.name, "input": c.arguments}
        )
    stop = "tool_use" if turn.calls else "end_turn"
    p, o = _usage(turn)
    msg = {"id": f"msg_{n:04d}", "type": "message", "role": "assistant", "model": model}
    if not stream:
        return json.dumps(
            {**msg, "content": blocks, "stop_reason": stop, "stop_sequence": None,
             "usage": {"input_tokens": p, "output_tokens": o}}
        ).encode()  # fmt: skip
    ev: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": {
            **msg, "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": p, "output_tokens": 1}}}),
    ]  # fmt: skip
    for i, b in enumerate(blocks):
        if b["type"] == "text":
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": b["text"]}
        else:
            start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
        ev += [
            ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": i}),
        ]  # fmt: skip
    ev += [
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": o}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return _sse(ev)


# -- OpenAI Responses -------------------------------------------------------------------------------
def _responses(turn: Turn, n: int, model: str, stream: bool) -> bytes:
    items: list[dict[str, Any]] = []
    if turn.text:
        items.append({
            "type": "message", "id": f"msg_{n:04d}", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": turn.text, "annotations": []}],
        })  # fmt: skip
    for i, c in enumerate(turn.calls):
        item = {
            "type": "function_call", "id": f"fc_{n:04d}_{i}", "call_id": f"call_{n:04d}_{i}",
            "name": c.name, "arguments": json.dumps(c.arguments), "status": "completed",
        }  # fmt: skip
        if c.namespace:
            item["namespace"] = c.namespace
        items.append(item)
    p, o = _usage(turn)
    resp = {
        "id": f"resp_{n:04d}", "object": "response", "created_at": 1, "status": "completed",
        "model": model, "output": items,
        "usage": {"input_tokens": p, "output_tokens": o, "total_tokens": p + o,
                  "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens_details": {"reasoning_tokens": 0}},
    }  # fmt: skip
    if not stream:
        return json.dumps(resp).encode()
    ev: list[tuple[str | None, Any]] = [
        ("response.created", {"type": "response.created", "response": {**resp, "status": "in_progress", "output": []}}),
    ]  # fmt: skip
    for i, it in enumerate(items):
        ev.append(("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                   "item": {**it, "status": "in_progress"}}))  # fmt: skip
        if it["type"] == "message":
            ev.append(("response.output_text.delta", {"type": "response.output_text.delta", "output_index": i,
                       "content_index": 0, "item_id": it["id"], "delta": turn.text}))  # fmt: skip
        else:
            ev.append(("response.function_call_arguments.delta", {
                "type": "response.function_call_arguments.delta", "output_index": i,
                "item_id": it["id"], "delta": it["arguments"]}))  # fmt: skip
        ev.append(
            (
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": i, "item": it},
            )
        )
    ev.append(("response.completed", {"type": "response.completed", "response": resp}))
    return _sse(ev)


# -- Chat Completions --------------------------------------------------------------------------------
def _chat(turn: Turn, n: int, model: str, stream: bool) -> bytes:
    calls = [
        {"id": f"call_{n:04d}_{i}", "type": "function",
         "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
        for i, c in enumerate(turn.calls)
    ]  # fmt: skip
    finish = "tool_calls" if calls else "stop"
    p, o = _usage(turn)
    usage = {"prompt_tokens": p, "completion_tokens": o, "total_tokens": p + o}
    head = {"id": f"chatcmpl-{n:04d}", "created": 1, "model": model}
    if not stream:
        msg: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if calls:
            msg["tool_calls"] = calls
        return json.dumps({**head, "object": "chat.completion", "usage": usage,
                           "choices": [{"index": 0, "message": msg, "finish_reason": finish}]}).encode()  # fmt: skip
    chunk = {**head, "object": "chat.completion.chunk"}
    ev: list[tuple[str | None, Any]] = [
        (None, {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": turn.text}, "finish_reason": None}]}),
    ]  # fmt: skip
    for i, c in enumerate(calls):
        ev.append((None, {**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [{"index": i, **c}]}, "finish_reason": None}]}))  # fmt: skip
    ev.append((None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
    ev.append((None, {**chunk, "choices": [], "usage": usage}))
    ev.append((None, "[DONE]"))
    return _sse(ev)


# -- Google Gemini -----------------------------------------------------------------------------------
def _gemini(turn: Turn, n: int, model: str, ids: bool, stream: bool) -> list[dict[str, Any]]:
    """The ``GenerateContentResponse`` chunks of a streamed answer: the text, then the calls
    whole, the last chunk with ``finishReason: STOP`` (calls too) and the usage. Not
    streamed, the answer is one ``GenerateContentResponse`` with every part."""
    parts: list[dict[str, Any]] = [{"text": turn.text}] if turn.text or not turn.calls else []
    for i, c in enumerate(turn.calls):
        call: dict[str, Any] = {"name": c.name, "args": c.arguments}
        if ids:
            call["id"] = f"gc_{n:04d}_{i}"
        parts.append({"functionCall": call})
    p, o = _usage(turn)
    usage = {"promptTokenCount": p, "candidatesTokenCount": o, "totalTokenCount": p + o}
    tail = {"modelVersion": model, "responseId": f"resp_{n:04d}"}

    def response(chunk: list[dict[str, Any]], last: bool) -> dict[str, Any]:
        cand: dict[str, Any] = {"content": {"parts": chunk, "role": "model"}, "index": 0}
        if not last:
            return {"candidates": [cand], **tail}
        return {"candidates": [{**cand, "finishReason": "STOP"}], "usageMetadata": usage, **tail}

    chunks = [parts[:1], parts[1:]] if stream and turn.text and turn.calls else [parts]
    return [response(c, i == len(chunks) - 1) for i, c in enumerate(chunks)]
