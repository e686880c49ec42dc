"""WebSocket pass-through in ``agentload record`` (issue 29, finding 8).

Codex tries Responses over WebSocket first (``GET /v1/responses`` with ``Upgrade: websocket``).
Before, the proxy dropped ``Upgrade`` and ``Connection`` as hop-by-hop headers, so the upgrade
failed every time and Codex fell back to HTTP after ~7 s, its traffic changed by the proxy. Now
a well-formed upgrade is forwarded, the upstream's 101 relayed, and the frames piped both ways
unchanged; a refused upgrade reaches the agent as the upstream answered it; a malformed one is
the proxy's 400 and never reaches the upstream; the proxy's stop ends open tunnels. The
messages are not recorded: each agent message is an ``unread_request`` event, counted on the
stop line, and the connection a ``websocket`` event.
"""

from __future__ import annotations

import base64
import os
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.sync.server import Server, ServerConnection, serve

from agentload.record.cli import stop_line
from agentload.record.websocket import accept_key
from agentload.trace.reader import read_trace
from agentload.trace.schema import EventRecord
from agentload.trace.validate import validate_trace

sys.path.insert(0, str(Path(__file__).parent))  # the raw upstream of test_relay

from test_relay import _json_answer, _raw_exchange, _upstream

_BETA = "responses_websockets=2026-02-06"


class EchoUpstream:
    """A ``websockets`` server on 127.0.0.1 that answers each message at ``/v1/responses``
    with ``reply(message)`` and keeps what it got; any other path gets a 404."""

    def __init__(self) -> None:
        self.got: list[str | bytes] = []
        self.headers: list[dict[str, str]] = []
        self.closed = threading.Event()
        self.server: Server = serve(
            self._handle, "127.0.0.1", 0, process_request=self._check, max_size=None
        )
        self.url = f"http://127.0.0.1:{self.server.socket.getsockname()[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def _check(self, conn: ServerConnection, request: Any) -> Any:
        self.headers.append({k.lower(): v for k, v in request.headers.raw_items()})
        if request.path != "/v1/responses":
            return conn.respond(404, "no websockets here\n")
        return None

    def _handle(self, conn: ServerConnection) -> None:
        try:
            for message in conn:
                self.got.append(message)
                if message == "bye":
                    conn.close(1000, "done")
                    return
                conn.send(_reply(message))
        except ConnectionClosed:
            pass
        finally:
            self.closed.set()

    def stop(self) -> None:
        self.server.shutdown()
        self._thread.join(10)


def _reply(message: str | bytes) -> str | bytes:
    if isinstance(message, bytes):
        return message[::-1]
    return orjson.dumps({"type": "response.completed", "echo": message}).decode()


@pytest.fixture
def echo_upstream() -> Iterator[EchoUpstream]:
    up = EchoUpstream()
    yield up
    up.stop()


def _ws_url(proxy: Any) -> str:
    return proxy.url.replace("http://", "ws://") + "/v1/responses"


def _events(path: Path) -> list[EventRecord]:
    return [r for r in read_trace(path) if isinstance(r, EventRecord)]


def test_messages_pass_both_ways_and_are_counted_as_not_recorded(
    record_proxy: Callable[..., Any], echo_upstream: EchoUpstream
) -> None:
    proxy = record_proxy(echo_upstream.url)
    create = orjson.dumps({"type": "response.create", "model": "m", "input": "hi"}).decode()
    sizes = [0, 1, 125, 126, 65535, 65536, 1 << 20]
    sent: list[str | bytes] = [create, *(os.urandom(n) for n in sizes), "é" * 70000]
    with connect(  # permessage-deflate is offered, as Codex does
        _ws_url(proxy),
        additional_headers={"Authorization": "Bearer sk-test-key", "openai-beta": _BETA},
        max_size=None,
    ) as ws:
        got = []
        for m in sent:
            ws.send(m)
            got.append(ws.recv(timeout=10))
        ws.send(["frag", "mented ", "message"])  # one message in three frames
        got_frag = ws.recv(timeout=10)
        ws.ping(b"are you there").wait(10)
        ws.send("bye")
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1000  # relayed close
    assert echo_upstream.got == [*sent, "fragmented message", "bye"]
    assert got == [_reply(m) for m in sent]
    assert got_frag == _reply("fragmented message")
    head = echo_upstream.headers[0]
    assert head["authorization"] == "Bearer sk-test-key" and head["openai-beta"] == _BETA
    assert (
        head["upgrade"] == "websocket" and "permessage-deflate" in head["sec-websocket-extensions"]
    )
    path = proxy.stop()
    st = proxy.server.stats
    messages = len(sent) + 2
    assert (st.calls, st.unread, st.websockets) == (0, messages, 1)
    line = stop_line(st, str(path), "stopped")
    assert f"; {messages} requests not recorded (first: websocket: " in line
    assert "; 1 WebSocket connections relayed" in line
    events = _events(path)
    unread = [e for e in events if e.kind == "unread_request"]
    assert len(unread) == messages
    assert unread[0].details["transport"] == "websocket"
    assert unread[0].details["api"] == "responses"
    [conn] = [e for e in events if e.kind == "websocket"]
    assert conn.details["agent_messages"] == messages
    assert conn.details["upstream_messages"] == len(sent) + 1
    report = validate_trace(path)
    assert report.not_recorded["unread_request"] == messages
    assert "sk-test-key" not in path.read_bytes().decode("latin-1")


def _upgrade_head(path: bytes = b"/v1/responses", *extra: bytes, key: bytes = b"") -> bytes:
    key = key or base64.b64encode(os.urandom(16))
    lines = [
        b"GET " + path + b" HTTP/1.1",
        b"host: x",
        b"connection: Upgrade",
        b"upgrade: websocket",
        b"sec-websocket-version: 13",
        b"sec-websocket-key: " + key,
        *extra,
    ]
    return b"\r\n".join(lines) + b"\r\n\r\n"


def _size(n: int, masked: int) -> bytes:
    if n < 126:
        return bytes([masked | n])
    if n < 1 << 16:
        return bytes([masked | 126]) + n.to_bytes(2, "big")
    return bytes([masked | 127]) + n.to_bytes(8, "big")


def _one_answer(url: str, data: bytes) -> bytes:
    """Send ``data``, read one answer framed by its content-length (the agent's connection
    stays open after a refused upgrade, as after any answer)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(data)
        out = b""
        while True:
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep:
                length = next(
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                )
                if len(body) >= length:
                    return out
            got = s.recv(65536)
            assert got, out
            out += got


def _masked(opcode: int, payload: bytes, *, fin: bool = True) -> bytes:
    mask = os.urandom(4)
    body = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
    return bytes([(0x80 if fin else 0) | opcode]) + _size(len(payload), 0x80) + mask + body


def _plain(opcode: int, payload: bytes) -> bytes:
    return bytes([0x80 | opcode]) + _size(len(payload), 0) + payload


class RawWebSocketUpstream:
    """Answers one upgrade with a 101, sends ``script`` (raw frame bytes) and keeps every byte
    the proxy sent it after the head, until the proxy closes."""

    def __init__(self, script: bytes) -> None:
        self.script = script
        self.head = b""
        self.after = b""
        self.done = threading.Event()
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += conn.recv(65536)
            self.head, _, self.after = buf.partition(b"\r\n\r\n")
            key = next(
                line.split(b":", 1)[1].strip()
                for line in self.head.split(b"\r\n")
                if line.lower().startswith(b"sec-websocket-key:")
            )
            conn.sendall(
                b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade"
                b"\r\nsec-websocket-accept: " + accept_key(key) + b"\r\n\r\n" + self.script[:3]
            )
            time.sleep(0.05)
            conn.sendall(self.script[3:])  # split inside a frame head
            conn.settimeout(10)
            while data := conn.recv(65536):
                self.after += data
        self.done.set()
        self.sock.close()


def test_frames_are_relayed_byte_for_byte_however_they_are_split(
    record_proxy: Callable[..., Any],
) -> None:
    script = _plain(1, b'{"type":"response.created"}') + _plain(2, os.urandom(300))
    script += _plain(9, b"ping") + _plain(8, (1000).to_bytes(2, "big"))
    up = RawWebSocketUpstream(script)
    proxy = record_proxy(up.url)
    frames = _masked(1, b'{"type":"response.create"}') + _masked(2, os.urandom(70000), fin=False)
    frames += _masked(10, b"pong") + _masked(0, b"end") + _masked(8, (1000).to_bytes(2, "big"))
    host, port = proxy.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(_upgrade_head(b"/v1/responses", b"openai-beta: " + _BETA.encode()))
        got = b""
        while not got.endswith(script):
            data = s.recv(65536)
            assert data, got
            got += data
        for i in range(0, len(frames), 7001):  # frame heads cut across reads
            s.sendall(frames[i : i + 7001])
        s.shutdown(socket.SHUT_WR)
        while data := s.recv(65536):
            got += data
    assert up.done.wait(10)
    head, _, after_head = got.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101 Switching Protocols")
    assert after_head == script  # upstream → agent, byte for byte
    assert up.after == frames  # agent → upstream, byte for byte
    lower = up.head.lower()
    assert b"upgrade: websocket" in lower and b"connection: upgrade" in lower
    assert b"openai-beta: " + _BETA.encode() in up.head
    assert proxy.server.stats.unread == 0  # not yet stopped
    proxy.stop()
    assert proxy.server.stats.unread == 2 and proxy.server.stats.websockets == 1


def test_a_refused_upgrade_reaches_the_agent_as_the_upstream_answered(
    record_proxy: Callable[..., Any],
) -> None:
    refusal = b"HTTP/1.1 426 Upgrade Required\r\ncontent-type: text/plain\r\ncontent-length: 7\r\n"
    refusal += b"connection: close\r\n\r\nno ws!\n"
    for up in _upstream(lambda n, head, body: refusal):
        proxy = record_proxy(up.url)
        out = _one_answer(proxy.url, _upgrade_head())
        assert out.endswith(b"no ws!\n") and out.startswith(b"HTTP/1.1 426 Upgrade Required\r\n")
        assert b"upgrade: websocket" in up.requests[0][0].lower()


def test_a_404_to_the_upgrade_lets_the_client_fall_back(
    record_proxy: Callable[..., Any], echo_upstream: EchoUpstream
) -> None:
    proxy = record_proxy(echo_upstream.url)
    with pytest.raises(InvalidStatus) as refused:
        connect(proxy.url.replace("http://", "ws://") + "/v1/elsewhere", open_timeout=10)
    assert refused.value.response.status_code == 404
    assert refused.value.response.body == b"no websockets here\n"


_BAD_UPGRADES = [
    ("two upgrade fields", _upgrade_head(b"/v1/responses", b"upgrade: websocket")),
    ("two protocols", _upgrade_head().replace(b"upgrade: websocket", b"upgrade: websocket, h2c")),
    ("no connection: upgrade", _upgrade_head().replace(b"connection: Upgrade", b"connection: x")),
    ("version 8", _upgrade_head().replace(b"version: 13", b"version: 8")),
    ("a short key", _upgrade_head(key=base64.b64encode(b"short"))),
    ("two keys", _upgrade_head(b"/v1/responses", b"sec-websocket-key: AAAAAAAAAAAAAAAAAAAAAA==")),
    ("a POST", _upgrade_head().replace(b"GET ", b"POST ", 1)),
    ("HTTP/1.0", _upgrade_head().replace(b"HTTP/1.1", b"HTTP/1.0", 1)),
    ("a body", _upgrade_head(b"/v1/responses", b"content-length: 4")[:-4] + b"\r\n\r\nabcd"),
]


@pytest.mark.parametrize(("case", "head"), _BAD_UPGRADES, ids=[c[0] for c in _BAD_UPGRADES])
def test_a_malformed_upgrade_is_refused_and_never_forwarded(
    record_proxy: Callable[..., Any], case: str, head: bytes
) -> None:
    for up in _upstream(lambda n, h, b: _json_answer()):
        proxy = record_proxy(up.url)
        out = _raw_exchange(proxy.url, head)
        assert out.startswith(b"HTTP/1.1 400 "), (case, out[:200])
        assert b"websocket" in out, out
        assert up.requests == []


def test_a_101_with_a_wrong_accept_is_a_502(record_proxy: Callable[..., Any]) -> None:
    bad = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: upgrade\r\n"
    bad += b"sec-websocket-accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n\r\n"
    for up in _upstream(lambda n, h, b: bad):
        proxy = record_proxy(up.url)
        out = _one_answer(proxy.url, _upgrade_head())
        assert out.startswith(b"HTTP/1.1 502 ") and b"sec-websocket-accept" in out


def test_the_proxy_stop_ends_an_open_tunnel(
    record_proxy: Callable[..., Any], echo_upstream: EchoUpstream
) -> None:
    proxy = record_proxy(echo_upstream.url)
    with connect(_ws_url(proxy), open_timeout=10) as ws:
        ws.send("hello")
        assert ws.recv(timeout=10) == _reply("hello")
        started = time.monotonic()
        path = proxy.stop()
        assert time.monotonic() - started < 4  # an open WebSocket does not hold the stop
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1001  # going away
    assert echo_upstream.closed.wait(10)  # the upstream's side was closed too
    [conn] = [e for e in _events(path) if e.kind == "websocket"]
    assert conn.details["end"] == "proxy stopped" and conn.details["agent_messages"] == 1
