"""The proxy's HTTP/1.1 relay with a raw upstream whose every byte the test controls: a kept-alive
connection the upstream dropped is retried once on a fresh one, a chunked request body arrives
whole, ``Expect: 100-continue`` is answered, a malformed request is one 400, and the answer's
bytes reach the agent as the upstream framed them (an HTTP/1.0 agent gets the payload). An HTTPS upstream is verified against the
system's CAs (SSL_CERT_FILE), and an untrusted one is a 502 the agent sees and the trace holds. A
call goes to the recorder before the agent can see its answer's end."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import openai
import orjson
import pytest

from agentload.endpoint.server import ServeOptions, SimulatorServer
from agentload.trace.trace import load_trace

_ANSWER = orjson.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                     "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
)  # fmt: skip
_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}


class RawUpstream:
    """A threaded socket server on 127.0.0.1. Each connection's requests (Content-Length
    bodies) are handed to ``answer(n_on_this_connection, head, body)``, which returns the bytes
    to send, or None to close the connection without answering."""

    def __init__(self, answer: Callable[[int, bytes, bytes], bytes | None]) -> None:
        self.answer = answer
        self.requests: list[tuple[bytes, bytes]] = []
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf, n = b"", 0
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v)
                while len(buf) < length:
                    buf += conn.recv(65536)
                body, buf = buf[:length], buf[length:]
                self.requests.append((head, body))
                out = self.answer(n, head, body)
                n += 1
                if out is None:
                    return
                conn.sendall(out)

    def close(self) -> None:
        self._stop = True
        self.sock.close()


def _json_answer(body: bytes = _ANSWER) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


def _upstream(answer: Callable[[int, bytes, bytes], bytes | None]) -> Iterator[RawUpstream]:
    up = RawUpstream(answer)
    try:
        yield up
    finally:
        up.close()


def test_a_dropped_kept_alive_connection_is_retried_on_a_fresh_one(
    record_proxy: Callable[..., Any],
) -> None:
    # The upstream answers the first request of a connection, then closes it at the next one
    # without answering: as a server whose keep-alive timeout ran out as the request came.
    for up in _upstream(lambda n, head, body: _json_answer() if n == 0 else None):
        proxy = record_proxy(up.url)
        with httpx.Client(base_url=proxy.url, timeout=10) as client:
            for _ in range(3):
                r = client.post("/v1/chat/completions", json=_CHAT)
                assert r.status_code == 200 and r.content == _ANSWER
        assert up.connections == 3  # each retry went out on a fresh connection
        assert len(up.requests) == 5  # 3 answered, 2 dropped
        t = load_trace(proxy.stop())
        assert len(t.calls) == 3 and all(c.error is None for c in t.calls.values())


def test_a_chunked_request_body_arrives_whole_with_its_length(
    record_proxy: Callable[..., Any],
) -> None:
    body = orjson.dumps(_CHAT)
    for up in _upstream(lambda n, head, b: _json_answer()):
        proxy = record_proxy(up.url)

        def pieces() -> Iterator[bytes]:
            yield body[:7]
            yield body[7:]

        r = httpx.post(proxy.url + "/v1/chat/completions", content=pieces(), timeout=10)
        assert r.status_code == 200
        head, got = up.requests[0]
        assert got == body
        assert b"content-length: %d" % len(body) in head.lower()
        assert b"transfer-encoding" not in head.lower()
        assert len(load_trace(proxy.stop()).calls) == 1


def _raw_exchange(url: str, data: bytes, *, first: bytes = b"") -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        if first:
            s.sendall(first)
            got = s.recv(65536)
            assert got == b"HTTP/1.1 100 Continue\r\n\r\n", got
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_expect_100_continue_and_a_bad_request(record_proxy: Callable[..., Any]) -> None:
    body = orjson.dumps(_CHAT)
    for up in _upstream(lambda n, head, b: _json_answer()):
        proxy = record_proxy(up.url)
        head = (
            b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n" % len(body)
        )
        out = _raw_exchange(proxy.url, body, first=head)
        assert out.startswith(b"HTTP/1.1 200 OK") and out.endswith(_ANSWER)
        assert b"expect" not in up.requests[0][0].lower()
        bad = _raw_exchange(proxy.url, b"NOT-HTTP\r\n\r\n")
        assert bad.startswith(b"HTTP/1.1 400 ") and b"bad request line" in bad
        assert len(up.requests) == 1  # the bad one never went upstream
        assert len(load_trace(proxy.stop()).calls) == 1


def test_a_streamed_answer_goes_on_as_the_upstream_framed_it(
    record_proxy: Callable[..., Any],
) -> None:
    events = [
        {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": w},
                      "finish_reason": None}]}
        for w in ("one ", "two")
    ]  # fmt: skip
    sse = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    framed = b"".join(b"%x\r\n%s\r\n" % (len(sse[i : i + 50]), sse[i : i + 50])
                      for i in range(0, len(sse), 50)) + b"0\r\n\r\n"  # fmt: skip
    answer = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    for up in _upstream(lambda n, head, b: answer + framed):
        proxy = record_proxy(up.url)
        body = orjson.dumps({**_CHAT, "stream": True})
        req = b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n"
        sized = b"content-length: %d\r\n\r\n%s" % (len(body), body)
        out = _raw_exchange(proxy.url, req + sized)
        assert out.endswith(b"\r\n\r\n" + framed)  # the chunks as the upstream cut them
        old = _raw_exchange(proxy.url, req.replace(b"HTTP/1.1", b"HTTP/1.0") + sized)
        head, _, payload = old.partition(b"\r\n\r\n")
        assert payload == sse  # an HTTP/1.0 agent gets the payload, ended by the close
        assert b"transfer-encoding" not in head.lower() and b"connection: close" in head.lower()
        calls = load_trace(proxy.stop()).calls.values()
        assert [c.error for c in calls] == [None, None]
        assert all(c.response.text_len == len("one two") for c in calls)


def test_an_https_upstream_with_a_trusted_ca_and_an_untrusted_one(
    record_proxy: Callable[..., Any], tls_files: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    with SimulatorServer(
        "instant",
        serving=ServeOptions(ssl_certfile=tls_files["cert"], ssl_keyfile=tls_files["key"]),
    ) as srv:
        assert srv.base_url.startswith("https://127.0.0.1:")
        monkeypatch.setenv("SSL_CERT_FILE", str(tls_files["ca"]))
        trusted = record_proxy(srv.base_url)
        monkeypatch.delenv("SSL_CERT_FILE")
        untrusted = record_proxy(srv.base_url)
        msgs: Any = [{"role": "user", "content": "hello over tls"}]
        client = openai.OpenAI(base_url=trusted.base_url, api_key="x", max_retries=0)
        stream = client.chat.completions.create(model=srv.model, messages=msgs, stream=True)
        text = "".join((c.choices[0].delta.content or "") for c in stream if c.choices)
        assert text
        bad = openai.OpenAI(base_url=untrusted.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.APIStatusError) as err:
            bad.chat.completions.create(model=srv.model, messages=msgs)
        assert err.value.status_code == 502 and "CERTIFICATE_VERIFY_FAILED" in str(err.value)
        client.close()
        bad.close()
    (ok,) = load_trace(trusted.stop()).calls.values()
    assert ok.error is None and ok.response.text_len == len(text)
    (failed,) = load_trace(untrusted.stop()).calls.values()
    assert failed.error is not None and "CERTIFICATE_VERIFY_FAILED" in failed.error
    assert "SSL_CERT_FILE" in failed.error


def _peeking(end: Callable[[int, Any], None], look: socket.socket, seen: list[int]) -> Any:
    """``end`` after noting how many bytes wait unread on ``look`` (the agent's socket)."""

    def looking_end(cid: int, answer: Any) -> None:
        try:
            seen.append(len(look.recv(1 << 20, socket.MSG_PEEK | socket.MSG_DONTWAIT)))
        except BlockingIOError:
            seen.append(0)
        end(cid, answer)

    return looking_end


def test_a_call_goes_to_the_recorder_before_the_agent_sees_its_answer_end(
    record_proxy: Callable[..., Any],
) -> None:
    # An agent that read its answer whole may kill the proxy at once (``kill -9``): the call
    # must already be on its way to the recorder. At each call's end the test's sink looks, on
    # the agent's own socket, at what has arrived: the answer's last bytes must not have.
    for up in _upstream(lambda n, head, b: _json_answer()):
        proxy = record_proxy(up.url)
        recorder = proxy.server.recorder
        seen: list[int] = []
        agent = socket.create_connection(("127.0.0.1", int(proxy.url.rsplit(":", 1)[1])), 10)
        look = socket.socket(fileno=os.dup(agent.fileno()))  # no timeout: a peek never waits
        recorder.end = _peeking(recorder.end, look, seen)
        body = orjson.dumps(_CHAT)
        with agent, look:
            agent.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n"
                          b"content-length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            got = b""
            while not got.endswith(_ANSWER):
                got += agent.recv(65536)
        assert seen == [0]  # nothing of the answer had reached the agent
        assert len(load_trace(proxy.stop()).calls) == 1
