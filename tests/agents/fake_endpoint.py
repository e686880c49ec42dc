"""A scripted OpenAI-compatible endpoint for tests the simulator cannot stage (failures).

A real HTTP server (uvicorn in a thread, 127.0.0.1, free port); ``handler(body)`` decides each
answer: ``Reply(content, tool_calls, prompt_tokens)`` streamed as SSE chunks with usage, or
``Fail(status, message)`` as an OpenAI-shaped error.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Reply:
    content: str | None = "ok"
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    prompt_tokens: int = 100


@dataclass
class Fail:
    status: int
    message: str
    retry_after: str | None = None


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


class ScriptedEndpoint:
    def __init__(self, handler: Callable[[dict[str, Any]], Reply | Fail]) -> None:
        self.handler = handler
        self.requests: list[dict[str, Any]] = []
        app = Starlette(
            routes=[
                Route("/v1/models", self._models),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
            ]
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.model = "fake"
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _chat(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(body)
        ans = self.handler(body)
        if isinstance(ans, Fail):
            return JSONResponse(
                {"error": {"message": ans.message, "type": "invalid_request_error"}},
                status_code=ans.status,
                headers={"retry-after": ans.retry_after} if ans.retry_after else None,
            )

        async def stream() -> Any:
            yield _chunk({"role": "assistant"})
            if ans.content:
                for i in range(0, len(ans.content), 8):
                    await asyncio.sleep(0)
                    yield _chunk({"content": ans.content[i : i + 8]})
            for i, tc in enumerate(ans.tool_calls):
                yield _chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": tc["id"],
                                "type": "function",
                                "function": {"name": tc["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                yield _chunk(
                    {"tool_calls": [{"index": i, "function": {"arguments": tc["arguments"]}}]}
                )
            yield _chunk({}, "tool_calls" if ans.tool_calls else "stop")
            usage = {
                "prompt_tokens": ans.prompt_tokens,
                "completion_tokens": 5,
                "total_tokens": ans.prompt_tokens + 5,
            }
            obj = {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "fake",
                "choices": [],
                "usage": usage,
            }
            yield b"data: " + json.dumps(obj).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    def __enter__(self) -> ScriptedEndpoint:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake endpoint did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
