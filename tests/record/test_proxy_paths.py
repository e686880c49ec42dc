"""Every request the recording proxy forwards is accounted for (issue 49, item 2).

A hostile probe found POSTs answered 200 through the proxy that were recorded wrongly or not
as calls: a chat path in capitals, with ``//``, a ``;param`` or an encoded trailing slash, an
Azure deployment's path; legacy Completions, embeddings and Ollama's ``/api/chat`` were
counted as requests to no API; a gzip, zstd (or br) request body was forwarded but counted as unread
("str is not valid UTF-8"). Now each LLM call is recorded (messages and reply), each other
kind is counted as what it is, and the upstream still gets the request as the agent wrote it:
its path and its bytes.
"""

from __future__ import annotations

import gzip
import http.client
import json
import threading
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import brotli
import pytest
import zstandard

from agentload.record.cli import stop_line
from agentload.trace.stats import compute_stats
from agentload.trace.trace import Trace, load_trace
from agentload.trace.validate import validate_trace

REPLY = "Hello from upstream."
CHAT = {"model": "m", "messages": [{"role": "user", "content": "Say hello."}]}
_ANSWERS: list[tuple[str, dict[str, Any]]] = [
    ("embed", {"object": "list", "data": [{"object": "embedding", "embedding": [0.1, 0.2]}]}),
    ("/api/", {"model": "m", "message": {"role": "assistant", "content": REPLY}, "done": True}),
    (
        "/responses",
        {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "output": [
                {
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": REPLY}],
                }
            ],
        },
    ),
    (
        "/chat",
        {
            "id": "c1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": REPLY},
                    "finish_reason": "stop",
                }
            ],
        },
    ),
    ("", {"id": "t1", "object": "text_completion", "choices": [{"index": 0, "text": REPLY}]}),
]
"""The upstream's answer by what the lower-cased path holds (the first that matches)."""


_CODERS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "deflate": zlib.compress,
    "br": brotli.compress,
}


@dataclass
class Got:
    """One request the upstream received: its target as sent, its headers, its body's bytes."""

    target: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Upstream:
    """An upstream on 127.0.0.1 that keeps each request as it came and answers 200 in the
    shape its path asks for (``_ANSWERS``), whatever the body."""

    got: list[Got] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def start(self) -> Upstream:
        up = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                headers = {k.lower(): v for k, v in self.headers.items()}
                up.got.append(Got(self.path, headers, body))
                low = self.path.lower()
                answer = next(a for key, a in _ANSWERS if key in low)
                data = json.dumps(answer).encode()
                coding = headers.get("x-test-answer-coding")  # as if it ignored identity
                if coding is not None:
                    data = _CODERS[coding](data)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                if coding is not None:
                    self.send_header("content-encoding", coding)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    up = Upstream().start()
    yield up
    up.stop()


def _send(
    proxy: Any, target: str, body: bytes, headers: dict[str, str] | None = None
) -> tuple[int, bytes]:
    """POST ``body`` to the proxy at ``target`` exactly as written (no client normalises it)."""
    host, port = proxy.url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request("POST", target, body, {"content-type": "application/json", **(headers or {})})
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def _run(
    record_proxy: Callable[..., Any],
    upstream: Upstream,
    sends: list[tuple[str, bytes, dict[str, str]]],
) -> tuple[Any, Trace]:
    """Send each request through a fresh proxy; the proxy and its trace."""
    proxy = record_proxy(upstream.url)
    for target, body, headers in sends:
        status, _ = _send(proxy, target, body, headers)
        assert status == 200
    return proxy, load_trace(proxy.stop())


def _events(trace: Trace) -> list[Any]:
    """The trace's events but the writer's ``trace_end``."""
    return [e for e in trace.events if e.kind != "trace_end"]


def _reply(trace: Trace, call: Any) -> Any:
    return trace.blobs[call.response.content].content["content"]


@pytest.mark.parametrize(
    "target",
    [
        "/V1/CHAT/COMPLETIONS",
        "/chat/completions",  # an OpenAI SDK given a base URL without /v1
        "/v1/chat//completions",
        "/v1/chat/completions%2F",
        "/v1/chat/completions;x=1",
        "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
    ],
)
def test_a_chat_call_on_a_path_of_another_shape_is_recorded_and_forwarded_as_written(
    record_proxy: Callable[..., Any], upstream: Upstream, target: str
) -> None:
    azure = "deployments" in target
    body = json.dumps({k: v for k, v in CHAT.items() if not (azure and k == "model")}).encode()
    proxy, trace = _run(record_proxy, upstream, [(target, body, {})])
    [got] = upstream.got
    assert (got.target, got.body) == (target, body)  # the original path and bytes
    assert (proxy.server.stats.calls, proxy.server.stats.unread) == (1, 0)
    [call] = trace.calls.values()
    assert trace.messages(call) == CHAT["messages"]
    assert _reply(trace, call) == REPLY
    assert call.request.api == "chat"
    assert call.request.model == ("gpt-4o-prod" if azure else "m")  # the deployment, if none


def test_a_responses_call_without_v1_is_recorded(
    record_proxy: Callable[..., Any], upstream: Upstream
) -> None:
    body = json.dumps({"model": "m", "input": "Say hello."}).encode()
    _, trace = _run(record_proxy, upstream, [("/responses", body, {})])
    [call] = trace.calls.values()
    assert call.request.api == "responses" and call.request.model == "m"
    assert trace.messages(call) == [{"role": "user", "content": "Say hello."}]


def test_an_azure_responses_call_is_recorded_with_the_deployment_as_its_model(
    record_proxy: Callable[..., Any], upstream: Upstream
) -> None:
    target = "/openai/deployments/prod-5/responses?api-version=2025-04-01-preview"
    body = json.dumps({"input": "Say hello."}).encode()
    _, trace = _run(record_proxy, upstream, [(target, body, {})])
    assert [(g.target, g.body) for g in upstream.got] == [(target, body)]
    [call] = trace.calls.values()
    assert call.request.api == "responses" and call.request.model == "prod-5"
    assert trace.messages(call) == [{"role": "user", "content": "Say hello."}]
    assert _reply(trace, call) == REPLY


@pytest.mark.parametrize(
    ("target", "kind", "why"),
    [
        ("/api/chat", "ollama", "Ollama's native API is not recorded; point the agent at /v1"),
        ("/v1/completions", "completions", "legacy Completions API (prompt) is not recorded"),
    ],
)
def test_a_known_api_that_is_not_recorded_is_counted_as_itself(
    record_proxy: Callable[..., Any], upstream: Upstream, target: str, kind: str, why: str
) -> None:
    body = b'{"model": "m", "prompt": "Say hello.", "messages": [], "stream": false}'
    proxy, trace = _run(record_proxy, upstream, [(target, body, {})])
    assert [(g.target, g.body) for g in upstream.got] == [(target, body)]
    st = proxy.server.stats
    assert (st.calls, st.unread) == (0, 1)
    [event] = _events(trace)
    assert event.kind == "unread_request" and event.details["request_kind"] == kind
    assert why in event.details["error"] and event.details["status"] == 200
    assert why in stop_line(st, "t", "stopped")
    assert validate_trace(trace.path).not_recorded == {"unread_request": 1}


def test_embeddings_are_counted_as_embeddings_not_as_calls_nor_unread(
    record_proxy: Callable[..., Any], upstream: Upstream
) -> None:
    sends = [
        ("/v1/embeddings", b'{"model": "e", "input": "hi"}', {}),
        ("/openai/deployments/emb/embeddings?api-version=2024-10-21", b'{"input": "hi"}', {}),
        ("/v1beta/models/text-embedding-004:embedContent", b'{"content": {}}', {}),
    ]
    proxy, trace = _run(record_proxy, upstream, sends)
    assert [(g.target, g.body) for g in upstream.got] == [(t, b) for t, b, _ in sends]
    st = proxy.server.stats
    assert (st.calls, st.unread, st.embeddings) == (0, 0, 3)
    assert [(e.kind, e.details["path"], e.details["status"]) for e in _events(trace)] == [
        ("embedding", t.split("?")[0], 200) for t, _, _ in sends
    ]
    assert stop_line(st, "t", "stopped").startswith(
        "recorded 0 calls in 0 sessions (0 failed); 3 embeddings requests (no LLM calls)"
    )
    assert compute_stats(trace)["embedding_requests"] == 3
    assert compute_stats(trace)["unread_requests"] == 0
    assert validate_trace(trace.path).not_recorded == {}


@pytest.mark.parametrize("coding", list(_CODERS))
def test_a_compressed_request_body_is_recorded_and_forwarded_as_sent(
    record_proxy: Callable[..., Any], upstream: Upstream, coding: str
) -> None:
    body = _CODERS[coding](json.dumps(CHAT).encode())
    proxy, trace = _run(
        record_proxy, upstream, [("/v1/chat/completions", body, {"content-encoding": coding})]
    )
    [got] = upstream.got
    assert got.body == body and got.headers["content-encoding"] == coding  # not re-coded
    assert (proxy.server.stats.calls, proxy.server.stats.unread) == (1, 0)
    [call] = trace.calls.values()
    assert trace.messages(call) == CHAT["messages"] and _reply(trace, call) == REPLY


@pytest.mark.parametrize("coding", ["zstd", "br"])
def test_an_answer_compressed_although_identity_was_asked_is_read(
    record_proxy: Callable[..., Any], upstream: Upstream, coding: str
) -> None:
    headers = {"x-test-answer-coding": coding}
    _, trace = _run(
        record_proxy, upstream, [("/v1/chat/completions", json.dumps(CHAT).encode(), headers)]
    )
    assert upstream.got[0].headers["accept-encoding"] == "identity"
    [call] = trace.calls.values()
    assert call.error is None and _reply(trace, call) == REPLY


def _zstd_bomb(gib: int) -> bytes:
    """A few tens of KiB of zstd that inflate to ``gib`` GiB of zeros."""
    c = zstandard.ZstdCompressor(level=1).compressobj()
    zeros = b"\0" * (1 << 24)
    return b"".join(c.compress(zeros) for _ in range(64 * gib)) + c.flush()


def test_a_compression_bomb_is_forwarded_and_counted_not_read(
    record_proxy: Callable[..., Any], upstream: Upstream
) -> None:
    bomb = _zstd_bomb(1)
    assert len(bomb) < 100_000
    sends = [
        ("/v1/chat/completions", bomb, {"content-encoding": "zstd"}),
        ("/v1/chat/completions", json.dumps(CHAT).encode(), {}),  # the proxy goes on
    ]
    proxy, trace = _run(record_proxy, upstream, sends)
    assert upstream.got[0].body == bomb
    st = proxy.server.stats
    assert (st.calls, st.unread) == (1, 1)
    [event] = [e for e in trace.events if e.kind == "unread_request"]
    assert "over 256 MiB once decoded (zstd)" in event.details["error"], event.details


def test_the_decoder_stops_a_bomb_within_its_limit() -> None:
    """What the recorder holds of a 4 GiB bomb stays near the limit (never the whole)."""
    from agentload.errors import WireError
    from agentload.record.decoding import decode

    co = zlib.compressobj(9, wbits=31)
    zeros = b"\0" * (1 << 24)
    gz = b"".join(co.compress(zeros) for _ in range(64)) + co.flush()
    br = brotli.Compressor(quality=5)
    brb = b"".join(br.process(zeros) for _ in range(64)) + br.finish()  # 1 GiB in 2 KiB
    for coding, data in (("zstd", _zstd_bomb(4)), ("gzip", gz), ("br", brb)):
        tracemalloc.start()
        tracemalloc.reset_peak()  # (tracing may have been on already: PYTHONTRACEMALLOC)
        try:
            with pytest.raises(WireError, match="over 8 MiB once decoded"):
                decode(data, coding, limit=8 << 20)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 32 << 20, (coding, peak)
