"""Small real HTTP servers for replay tests: an OpenAI-style streaming chat endpoint that
records every body it receives and misbehaves on request (500s, resets, stalls); and
``timed_serve``, ``agentload serve`` in its own process with a timed profile."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from serve_process import serve_process
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


@dataclass
class Seen:
    """One request as the server received it."""

    t_ns: int
    end_ns: int
    body: bytes
    headers: dict[str, str]


@dataclass
class Behaviour:
    """What the server does; ``fail`` maps the n-th request (0-based) to a failure kind."""

    chunk_delay_s: float = 0.0
    ttft_s: float = 0.0
    fail: dict[int, str] = field(default_factory=dict)
    stall_s: float = 30.0
    report_cached: bool = True
    spaced: bool = False
    """Encode events with Python's default ``", "``/``": "`` separators (not compact)."""
    overflow_message: str = "This model's maximum context length is 8 tokens"
    """The 400 error text of an ``overflow`` failure."""
    cached_in_timings: bool = False
    """Report cached tokens as older llama.cpp builds do: only ``timings.cache_n`` of the last
    event, no ``prompt_tokens_details``."""
    nvext: dict[str, Any] | None = None
    """Dynamo's answer extension: this ``worker_id`` object on every chunk, ``timing`` (its
    ``timing`` value) on the finish chunk."""


class ChatServer:
    """A streaming chat endpoint on 127.0.0.1 in a background thread (start/stop)."""

    def __init__(self, model: str = "test-model", behaviour: Behaviour | None = None) -> None:
        self.model = model
        self.behaviour = behaviour or Behaviour()
        self.seen: list[Seen] = []
        self.active = 0
        self.max_active = 0
        self._n = 0
        self._lock = threading.Lock()
        self._prefixes: list[bytes] = []
        app = Starlette(
            routes=[
                Route("/v1/models", self._models, methods=["GET"]),
                Route("/v1/chat/completions", self._chat, methods=["POST"]),
            ]
        )
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        sock.close()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error", lifespan="off")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def start(self) -> ChatServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("test server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)

    def __enter__(self) -> ChatServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": self.model, "object": "model"}]})

    def _cached(self, body: dict[str, Any]) -> int:
        """Characters/4 of the longest message-list prefix seen before (a toy prefix cache)."""
        msgs = [orjson.dumps(m) for m in body.get("messages", [])]
        best = 0
        for prev in self._prefixes:
            acc = 0
            pos = 0
            for m in msgs:
                if prev[pos : pos + len(m)] != m:
                    break
                pos += len(m)
                acc += len(m)
            best = max(best, acc)
        self._prefixes.append(b"".join(msgs))
        return best // 4

    async def _chat(self, request: Request) -> Response:
        t = time.perf_counter_ns()
        raw = await request.body()
        body = orjson.loads(raw)
        with self._lock:
            n_req = self._n
            self._n += 1
            cached = self._cached(body)
        seen = Seen(t, 0, raw, dict(request.headers))
        self.seen.append(seen)
        b = self.behaviour
        kind = b.fail.get(n_req)
        if kind == "500":
            seen.end_ns = time.perf_counter_ns()
            return JSONResponse({"error": {"message": "boom"}}, status_code=500)
        if kind == "overflow":
            seen.end_ns = time.perf_counter_ns()
            return JSONResponse(
                {"error": {"message": self.behaviour.overflow_message}},
                status_code=400,
            )
        n = int(body.get("max_tokens") or 16)
        dumps = (lambda o: json.dumps(o).encode()) if b.spaced else orjson.dumps
        prompt = len(raw) // 4

        async def gen() -> AsyncIterator[bytes]:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
            try:
                if kind == "stall":
                    await asyncio.sleep(b.stall_s)
                if b.ttft_s:
                    await asyncio.sleep(b.ttft_s)
                for i in range(n):
                    if kind == "reset" and i == n // 2:
                        raise RuntimeError("connection reset by test server")
                    delta = {"content": "tok "} if i else {"role": "assistant", "content": "tok "}
                    ev = {
                        "id": "x",
                        "object": "chat.completion.chunk",
                        "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
                    }
                    if b.nvext is not None:
                        ev["nvext"] = {"worker_id": b.nvext["worker_id"]}
                    yield b"data: " + dumps(ev) + b"\n\n"
                    if b.chunk_delay_s:
                        await asyncio.sleep(b.chunk_delay_s)
                ev = {"id": "x", "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}
                if b.nvext is not None:
                    ev["nvext"] = b.nvext
                yield b"data: " + dumps(ev) + b"\n\n"
                usage: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": n}
                last: dict[str, Any] = {"id": "x", "choices": [], "usage": usage}
                if b.cached_in_timings:
                    last["timings"] = {"cache_n": cached, "prompt_n": prompt - cached}
                elif b.report_cached:
                    usage["prompt_tokens_details"] = {"cached_tokens": cached}
                yield b"data: " + dumps(last) + b"\n\n"
                yield b"data: [DONE]\n\n"
            finally:
                self.active -= 1
                seen.end_ns = time.perf_counter_ns()

        return StreamingResponse(gen(), media_type="text/event-stream")


@contextmanager
def timed_serve(folder: Path, decode: float, degradation: float) -> Iterator[str]:
    """``agentload serve`` (its own process) with a profile that decodes ``decode`` tokens/s
    alone and ``decode / (1 + degradation (N - 1))`` each with N running, prefill and overhead
    next to nothing; its base URL."""
    prof = folder / f"profile-{decode:g}-{degradation:g}.yaml"
    prof.write_text(
        f"name: timed-{decode:g}\ndescription: decode {decode:g} tok/s alone\ninstant: false\n"
        f"prefill_tokens_per_s: 10000000\ndecode_tokens_per_s: {decode:g}\n"
        f"decode_degradation: {degradation:g}\noverhead_ms: 0\nmax_batch: 1024\n"
    )
    with serve_process("--profile", str(prof)) as url:
        yield url
