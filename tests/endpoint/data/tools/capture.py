"""Capture the tools a real agent sends, and write them in OpenAI chat ``tools`` form.

    python capture.py serve PORT DIR      # save every POST body as DIR/NNN.json, answer "Done."
    python capture.py tools DIR > x.json  # the first request's tools (the first that has any)

``serve`` answers each API in its own shape (Anthropic Messages, OpenAI Chat Completions and
Responses, streamed or not, and Gemini ``generateContent``/``streamGenerateContent``) with one
short text, so the agent ends its turn and exits. ``tools`` converts the tools of the first
request that offers any to chat form the way the simulator reads them: Messages and Responses
through ``agentload.wire`` (a Codex namespace's inner tools, a freeform tool as a function of
one string ``input``, hosted tools dropped); Gemini ``functionDeclarations`` with their
``parametersJsonSchema`` (or ``parameters``) as the function's parameters.
"""

from __future__ import annotations

import itertools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

TEXT = "Done."


def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> bytes:
    out = [f"event: {e}\ndata: {json.dumps(d)}\n\n" if e else f"data: {json.dumps(d)}\n\n"
           for e, d in events]  # fmt: skip
    return "".join(out).encode()


def _messages(body: dict[str, Any], stream: bool) -> tuple[bytes, str]:
    msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"),
           "content": [], "stop_reason": None, "stop_sequence": None,
           "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip
    if not stream:
        msg.update(content=[{"type": "text", "text": TEXT}], stop_reason="end_turn")
        return json.dumps(msg).encode(), "application/json"
    return _sse([
        ("message_start", {"type": "message_start", "message": msg}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": TEXT}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "usage": {"output_tokens": 1},
                           "delta": {"stop_reason": "end_turn", "stop_sequence": None}}),
        ("message_stop", {"type": "message_stop"}),
    ]), "text/event-stream"  # fmt: skip


def _chat(body: dict[str, Any], stream: bool) -> tuple[bytes, str]:
    base = {"id": "c1", "created": 0, "model": body.get("model")}
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    if not stream:
        choice = {"index": 0, "message": {"role": "assistant", "content": TEXT},
                  "finish_reason": "stop"}  # fmt: skip
        reply = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
        return json.dumps(reply).encode(), "application/json"
    base["object"] = "chat.completion.chunk"
    delta = {"role": "assistant", "content": TEXT}
    return _sse([
        (None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        (None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        (None, {**base, "choices": [], "usage": usage}),
    ]) + b"data: [DONE]\n\n", "text/event-stream"  # fmt: skip


def _responses(body: dict[str, Any]) -> tuple[bytes, str]:
    item = {"type": "message", "id": "m1", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": TEXT, "annotations": []}]}  # fmt: skip
    resp = {"id": "r1", "object": "response", "created_at": 0, "status": "in_progress",
            "model": body.get("model"), "output": []}  # fmt: skip
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
             "input_tokens_details": {"cached_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}  # fmt: skip
    done = {**resp, "status": "completed", "output": [item], "usage": usage}
    return _sse([
        ("response.created", {"type": "response.created", "response": resp}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                        "item": {**item, "content": [], "status": "in_progress"}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "output_index": 0,
                                        "content_index": 0, "item_id": "m1", "delta": TEXT}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                       "item": item}),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]), "text/event-stream"  # fmt: skip


def _gemini(path: str) -> tuple[bytes, str]:
    chunk = {"candidates": [{"content": {"role": "model", "parts": [{"text": TEXT}]},
                             "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                               "totalTokenCount": 2}}  # fmt: skip
    if "stream" in path.lower():
        return f"data: {json.dumps(chunk)}\r\n\r\n".encode(), "text/event-stream"
    return json.dumps(chunk).encode(), "application/json"


def _reply(path: str, body: dict[str, Any]) -> tuple[int, bytes, str]:
    stream = body.get("stream") is True
    if "count_tokens" in path:
        return 200, b'{"input_tokens": 10}', "application/json"
    if "countTokens" in path:
        return 200, b'{"totalTokens": 10}', "application/json"
    if "/messages" in path:
        return 200, *_messages(body, stream)
    if "/chat/completions" in path:
        return 200, *_chat(body, stream)
    if "/responses" in path:
        return 200, *_responses(body)
    if "enerateContent" in path:
        return 200, *_gemini(path)
    return 404, b'{"error": {"message": "unknown path"}}', "application/json"


def serve(port: int, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    count = itertools.count()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, data: bytes, ctype: str) -> None:
            self.send_response(code)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            models = {"object": "list", "data": [{"id": "m", "object": "model", "created": 0,
                                                  "owned_by": "capture"}]}  # fmt: skip
            self._send(200, json.dumps(models).encode(), "application/json")

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = {"_raw": raw.decode("utf-8", "replace")}
            saved = {"path": self.path, "body": body}
            (out / f"{next(count):03d}.json").write_text(json.dumps(saved))
            self._send(*_reply(self.path, body if isinstance(body, dict) else {}))

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def chat_tools(path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
    """``body``'s tools in chat form (see the module docstring)."""
    from agentload.wire import messages, responses

    if "/messages" in path:
        stub = {"model": "m", "max_tokens": 1, "messages": [], "tools": body["tools"]}
        return list(messages.to_chat(stub)["tools"])
    if "/responses" in path:
        return list(responses.to_chat({"input": "", "tools": body["tools"]})["tools"])
    if "enerateContent" in path:
        out = []
        for group in body["tools"]:
            for fd in group.get("functionDeclarations") or ():
                params = fd.get("parametersJsonSchema") or fd.get("parameters") or {}
                fn = {"name": fd["name"], "description": fd.get("description", ""),
                      "parameters": params}  # fmt: skip
                out.append({"type": "function", "function": fn})
        return out
    return list(body["tools"])


def first_tools(folder: Path) -> list[dict[str, Any]]:
    for f in sorted(folder.glob("*.json")):
        saved = json.loads(f.read_text())
        if saved["body"].get("tools"):
            return chat_tools(saved["path"], saved["body"])
    raise SystemExit(f"no request with tools in {folder}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(int(sys.argv[2]), Path(sys.argv[3]))
    elif sys.argv[1:2] == ["tools"]:
        print(json.dumps(first_tools(Path(sys.argv[2])), separators=(",", ":")))
    else:
        raise SystemExit(__doc__)
