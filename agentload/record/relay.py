"""The recording reverse proxy's forwarding: HTTP/1.1 on raw asyncio protocols, both sides.

* Every request is forwarded to the upstream with its headers (credentials included:
  ``Authorization`` and ``x-api-key`` pass through, they never reach the trace), less the
  hop-by-hop ones, and with ``accept-encoding: identity`` so the recorder can read the answer.
  ``POST`` to a Chat Completions, Responses or Messages path (``agentload.wire.api_for_path``) is
  also recorded; anything else (``/v1/models``, ``/v1/messages/count_tokens``, ...) is not.
* The answer's bytes go to the agent as the upstream framed them, each read written on before
  anything else is done with it, so a streamed answer reaches the agent chunk by chunk as it
  arrives. The relay parses only the framing (``http1``) to know where the answer ends, and
  keeps the payload of a recorded call with the time each read came; the recorder process
  (``worker``) reads it once the call is over. Nothing else is done per chunk.
* Upstream errors reach the agent as the upstream sent them (status, headers, body); an
  upstream that cannot be reached is a 502 in the API's error shape; an upstream that breaks an
  answer breaks the agent's connection too (closed without the rest of the answer). A client
  that disconnects closes the upstream request. Each is recorded as the call's error.
* Upstream connections are kept alive and reused last-in first-out; a reused connection that
  the upstream closed before answering is retried once on a fresh one (it never got the
  request). A slow client pauses its upstream (the transport's flow control), so nothing grows
  without bound.
* A WebSocket upgrade (Codex's Responses over WebSocket) is checked strictly and forwarded; the
  upstream's checked 101 turns both connections into a ``websocket.Tunnel`` (frames piped both
  ways, their messages noted as unread); any other answer is relayed as it came. Plain requests
  pay one scan of their headers for an ``Upgrade`` field, nothing more.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Protocol
from urllib.parse import urlsplit

import orjson

from agentload.errors import ConfigError
from agentload.errortext import clip
from agentload.masking import mask_text, redact_url, remember_url
from agentload.record.http1 import Body, Head, HeadError, body_for, split_head
from agentload.record.websocket import (
    Tunnel,
    asks_websocket,
    check_switch,
    check_upgrade,
    deflate_negotiated,
)
from agentload.wire import Api, api_for_path

__all__ = ["CLIENT_LEFT", "Answer", "Relay", "Sink", "Upstream", "describe"]

CLIENT_LEFT = "client disconnected before the answer ended"
"""The error of a call whose agent left first (the recorder drops it when the streamed answer
had reached its last event: the agent had it all, it only did not wait for the framing's end)."""
CONNECT_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 75.0
"""How long an agent's idle keep-alive connection stays open."""
HEAD_TIMEOUT_S = 30.0
"""From a request head's first byte to its end, however it trickles in (slowloris): then a 408."""
BODY_IDLE_S = 60.0
"""How long a request body may pause between two reads before it is a 408."""
GRACE_S = 5.0
"""On stop: how long answers in flight may still run."""

_HOP_OUT = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"upgrade",
    }
)
"""Answer headers not forwarded (the body goes on as framed: its framing headers stay)."""
_HOP = _HOP_OUT | {b"transfer-encoding", b"host", b"content-length", b"accept-encoding", b"expect"}
"""Request headers not forwarded (the relay frames the body itself)."""


class Sink(Protocol):
    """Where the facts of a recorded call go (the recorder process)."""

    def begin(self, cid: int, api: Api, body: bytes, headers: list[tuple[bytes, bytes]],
              submit_ns: int) -> None: ...  # fmt: skip

    def end(self, cid: int, answer: Answer) -> None: ...

    def note(self, kind: str, ns: int, details: dict[str, object]) -> None:
        """An event for the trace (a WebSocket's unread messages, its end)."""


@dataclass
class Answer:
    """What a recorded call got: the upstream's status and headers that tell how to read the
    body (None: no answer came), the payload as it came (each read with its arrival time, ns),
    when it ended, and the error that ended it, if one did."""

    status: int | None
    content_type: str
    content_encoding: str
    pieces: list[tuple[int, bytes]]
    end_ns: int
    error: str | None


@dataclass(frozen=True)
class Upstream:
    """Where requests go: ``http(s)://host[:port][/prefix][?query]`` (a trailing ``/v1`` is
    dropped: the agent's paths carry it; a query, e.g. Azure's ``api-version``, is added to
    every request's). The URL is checked once here: only visible ASCII, so nothing from it can
    break a request head."""

    host: str
    port: int
    tls: ssl.SSLContext | None
    prefix: bytes
    host_header: bytes
    query: bytes = b""

    @classmethod
    def from_url(cls, url: str) -> Upstream:
        remember_url(url)
        shown = redact_url(url)
        if not url.isascii() or not url.isprintable() or " " in url:
            raise ConfigError(
                f"--upstream {shown!r}: a URL holds visible ASCII only (no spaces, CR, LF or "
                "control characters; percent-encode the rest, punycode for a host)"
            )
        try:
            u = urlsplit(url)
        except ValueError:
            raise ConfigError(f"--upstream {shown!r}: its host does not parse") from None
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ConfigError(
                f"--upstream {shown!r}: expected an http(s):// URL, http(s)://HOST[:PORT][/PATH]"
            )
        try:
            port = u.port
        except ValueError:
            raise ConfigError(f"--upstream {shown!r}: the port must be 1-65535") from None
        if port == 0:
            raise ConfigError(f"--upstream {shown!r}: the port must be 1-65535")
        tls = ssl.create_default_context() if u.scheme == "https" else None
        host = u.hostname
        netloc = f"[{host}]" if ":" in host else host
        if port:
            netloc += f":{port}"
        prefix = u.path.rstrip("/").removesuffix("/v1").rstrip("/")
        return cls(
            host,
            port or (443 if tls else 80),
            tls,
            prefix.encode(),
            netloc.encode(),
            u.query.encode(),
        )

    def target(self, target: bytes) -> bytes:
        """The request target sent upstream for the agent's ``target`` (origin form)."""
        if not self.query:
            return self.prefix + target
        return self.prefix + target + (b"&" if b"?" in target else b"?") + self.query

    @property
    def label(self) -> str:
        return f"{self.host}:{self.port}"


def error_json(api: Api | None, status: int, message: str) -> bytes:
    """An error body in the shape of ``api`` (Messages' or OpenAI's)."""
    if api == "messages":
        kind = "api_error" if status >= 500 else "invalid_request_error"
        return orjson.dumps({"type": "error", "error": {"type": kind, "message": message}})
    return orjson.dumps(
        {"error": {"message": message, "type": "upstream_error", "param": None, "code": status}}
    )


def describe(exc: BaseException | None, default: str = "") -> str:
    """An exception as one clipped line with secrets masked (``default`` for None)."""
    if exc is None:
        return default
    return mask_text(clip(str(exc) or type(exc).__name__))


def _json_response(status: bytes, body: bytes, *, close: bool) -> bytes:
    """A whole JSON answer of the relay's own; ``status`` as in ``b"502 Bad Gateway"``."""
    conn = b"connection: close\r\n" if close else b""
    return b"HTTP/1.1 %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n%s" % (
        status, len(body), conn, body)  # fmt: skip


def _nodelay(transport: asyncio.BaseTransport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Relay:
    """The proxy: serves agents on a listening socket, forwards to one upstream."""

    def __init__(self, upstream: Upstream, sink: Sink | None) -> None:
        self.upstream = upstream
        self.sink = sink
        self.in_flight = 0
        self.last_activity_ns = time.perf_counter_ns()
        self.stopping = False
        self._idle: list[_UpConn] = []
        self._clients: set[_Client] = set()
        self._tunnels: set[Tunnel] = set()
        self._server: asyncio.Server | None = None
        self._next_cid = 0

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), sock=sock, backlog=2048)

    async def aclose(self) -> None:
        """Stop accepting, let answers in flight run for up to ``GRACE_S``, then close all."""
        self.stopping = True
        if self._server is not None:
            self._server.close()
        for c in list(self._clients):
            if c.exchange is None:
                c.transport.close()
        deadline = time.monotonic() + GRACE_S
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for c in list(self._clients):
            c.transport.abort()
        for t in list(self._tunnels):  # open WebSockets end with the proxy
            t.stop()
        for up in self._idle:
            up.transport.abort()
        self._idle.clear()
        await asyncio.sleep(0)  # let the aborts' connection_lost callbacks run

    def cid(self) -> int:
        self._next_cid += 1
        return self._next_cid

    # -- upstream connections (last-in first-out) --------------------------------------------
    def take_idle(self) -> _UpConn | None:
        while self._idle:
            up = self._idle.pop()
            if not up.closed:
                return up
        return None

    async def connect(self) -> _UpConn:
        u = self.upstream
        loop = asyncio.get_running_loop()
        server_hostname = u.host if u.tls is not None else None
        _, up = await asyncio.wait_for(
            loop.create_connection(_UpConn, u.host, u.port, ssl=u.tls,
                                   server_hostname=server_hostname),
            CONNECT_TIMEOUT_S,
        )  # fmt: skip
        return up

    def give_back(self, up: _UpConn) -> None:
        up.exchange = None
        if self.stopping or up.closed:
            up.transport.close()
        else:
            self._idle.append(up)


class _UpConn(asyncio.Protocol):
    """One connection to the upstream; it hands what it reads to its exchange."""

    transport: asyncio.Transport

    def __init__(self) -> None:
        self.exchange: _Exchange | None = None
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        _nodelay(transport)

    def data_received(self, data: bytes) -> None:
        ex = self.exchange
        if ex is not None:
            ex.up_data(data)
        else:  # bytes on an idle connection: it is out of step, never reuse it
            self.closed = True
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        ex = self.exchange
        if ex is not None:
            ex.up_lost(exc)


class _Wait(Enum):
    """What an agent connection's one timer waits for."""

    NONE = "none"  # an answer is running
    IDLE = "idle"  # the next request on a kept-alive connection (KEEP_ALIVE_S)
    HEAD = "head"  # the rest of a request head (HEAD_TIMEOUT_S from its first byte)
    BODY = "body"  # the next read of a request body (BODY_IDLE_S)


class _Client(asyncio.Protocol):
    """One agent connection: reads requests one after another, one exchange at a time."""

    transport: asyncio.Transport

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.buf = bytearray()
        self.exchange: _Exchange | None = None
        self.closed = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self._timer_kind = _Wait.NONE

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        _nodelay(transport)
        self.relay._clients.add(self)
        self._arm()

    def _timer(self, delay: float | None = None, then: Callable[[], None] | None = None,
               kind: _Wait = _Wait.NONE) -> None:  # fmt: skip
        """One timer at a time (``kind``): the idle keep-alive, the head's deadline, the body's
        stall; none while the answer runs."""
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        self._timer_kind = kind
        if delay is not None and then is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(delay, then)

    def _arm(self) -> None:
        self._timer(KEEP_ALIVE_S, self.transport.close, _Wait.IDLE)

    def _body_stall(self) -> None:
        why = f"request body stalled for {BODY_IDLE_S:.0f} s"
        self._timer(BODY_IDLE_S, lambda: self._late(why), _Wait.BODY)

    def _late(self, message: str) -> None:
        self._idle_timer = None
        if self.closed:
            return
        ex = self.exchange
        if ex is not None and not ex.finished:
            ex._settle()
        self.refuse(message, status=408)

    def data_received(self, data: bytes) -> None:
        ex = self.exchange
        if ex is not None and not ex.body.done:
            self._body_stall()
            ex.feed_request(data)
            return
        self.buf += data
        if ex is None:
            self.next_request()

    def next_request(self) -> None:
        if self.exchange is not None or self.closed:
            return
        if not self.buf:
            self._arm()
            return
        try:
            got = split_head(self.buf, request=True)
            if got is None:  # a deadline from its first byte, however slowly the rest comes
                if self._timer_kind is not _Wait.HEAD:
                    why = f"request head not whole after {HEAD_TIMEOUT_S:.0f} s"
                    self._timer(HEAD_TIMEOUT_S, lambda: self._late(why), _Wait.HEAD)
                return
            head, n = got
            body = body_for(head, request=True)
            websocket = asks_websocket(head)
            problem = check_upgrade(head) if websocket else None
            if problem is not None:
                raise HeadError(problem)
        except HeadError as exc:
            self.refuse(f"bad request: {exc}")
            return
        rest = bytes(self.buf[n:])
        self.buf.clear()
        if b"100-continue" in head.tokens(b"expect"):
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.exchange = _Exchange(self, head, body)
        if websocket:
            self.exchange.ws_key = head.get(b"sec-websocket-key")
        if body.done:
            self._timer()
        else:
            self._body_stall()
        self.exchange.feed_request(rest)

    def body_whole(self) -> None:
        """The request's body is whole: its stall timer stops."""
        self._timer()

    def refuse(self, message: str, *, status: int = 400) -> None:
        """A request the relay cannot read (400) or that came too slowly (408): one answer, and
        the connection is closed."""
        body = error_json(None, status, message)
        line = b"400 Bad Request" if status == 400 else b"408 Request Timeout"
        self.transport.write(_json_response(line, body, close=True))
        self.transport.close()

    def upgraded(self) -> None:
        """Its connection became a WebSocket tunnel: no longer a client of the relay's."""
        self._timer()
        self.exchange = None
        self.closed = True
        self.relay._clients.discard(self)

    def done(self, keep_alive: bool) -> None:
        """The exchange in flight is over."""
        self.exchange = None
        if not keep_alive or self.relay.stopping:
            self.transport.close()
            return
        self.next_request()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.relay._clients.discard(self)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
        if self.exchange is not None:
            self.exchange.client_lost()

    def pause_writing(self) -> None:
        up = self.exchange.up if self.exchange is not None else None
        if up is not None and not up.closed:
            up.transport.pause_reading()

    def resume_writing(self) -> None:
        up = self.exchange.up if self.exchange is not None else None
        if up is not None and not up.closed:
            up.transport.resume_reading()


class _Exchange:
    """One request and its answer, from the agent's request head to the answer's end."""

    def __init__(self, client: _Client, head: Head, body: Body) -> None:
        self.client = client
        self.relay = relay = client.relay
        self.head = head
        self.body = body
        method, target, version = head.start
        self.method = method
        if not target.startswith(b"/"):  # absolute form: keep the path
            target = b"/" + target.split(b"/", 3)[3] if target.count(b"/") >= 3 else b"/"
        self.target = target
        conn = head.tokens(b"connection")
        self.http10 = version == b"HTTP/1.0"
        self.keep_alive = b"keep-alive" in conn if self.http10 else b"close" not in conn
        self.unchunk = False
        """Chunks from the upstream go to an HTTP/1.0 agent as their payload."""
        path = target.split(b"?", 1)[0].decode("latin-1")
        self.api: Api | None = api_for_path(path) if method == b"POST" else None
        self.record = self.api is not None and relay.sink is not None
        self.cid = relay.cid() if self.record else 0
        self._parts: list[bytes] = []
        self.request = b""
        """The request's body, once it is whole."""
        self.up: _UpConn | None = None
        self.reused = False
        self.retried = False
        self.resp_buf = b""
        self.resp_body: Body | None = None
        self.up_keep = True
        self.status: int | None = None
        self.content_type = ""
        self.content_encoding = ""
        self.pieces: list[tuple[int, bytes]] = []
        self.submit_ns = 0
        self.finished = False
        self.begun = False
        self.ws_key: bytes | None = None
        """A checked WebSocket upgrade's key (``websocket.check_upgrade``), else None."""
        relay.in_flight += 1

    # -- the request -------------------------------------------------------------------------
    def feed_request(self, data: bytes) -> None:
        try:
            payload = self.body.feed(data)
        except HeadError as exc:
            self._settle()
            self.client.refuse(f"bad request body: {exc}")
            return
        if payload:
            self._parts.append(payload)
        if self.body.done:
            self.client.body_whole()
            if self.body.extra:  # the agent's next request, pipelined
                self.client.buf[:0] = self.body.extra
            self.request = b"".join(self._parts)
            self._parts = []
            self.submit_ns = time.perf_counter_ns()
            self._go()

    def _upstream_head(self) -> bytes:
        u = self.relay.upstream
        named = self.head.tokens(b"connection")
        lines = [self.method + b" " + u.target(self.target) + b" HTTP/1.1",
                 b"host: " + u.host_header]  # fmt: skip
        lines += [k + b": " + v for k, v in self.head.headers if k not in _HOP and k not in named]
        lines.append(b"accept-encoding: identity")
        if self.ws_key is not None:
            lines += [b"connection: upgrade", b"upgrade: websocket"]
        if self.request or self.method not in (b"GET", b"HEAD", b"DELETE", b"OPTIONS"):
            lines.append(b"content-length: %d" % len(self.request))
        return b"\r\n".join(lines) + b"\r\n\r\n"

    def _go(self) -> None:
        up = None if self.retried else self.relay.take_idle()
        if up is not None:
            self._send(up, reused=True)
        else:
            self._connecting = asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        try:
            up = await self.relay.connect()
        except (OSError, TimeoutError) as exc:
            why = "connect timed out" if isinstance(exc, TimeoutError) else describe(exc)
            if isinstance(exc, ssl.SSLCertVerificationError):
                why += " (a private CA is trusted through SSL_CERT_FILE)"
            self._unreachable(f"upstream {self.relay.upstream.label} unreachable: {why}")
            return
        if self.finished:  # the agent left meanwhile
            self.relay.give_back(up)
            return
        self._send(up, reused=False)

    def _send(self, up: _UpConn, *, reused: bool) -> None:
        self.up, self.reused = up, reused
        up.exchange = self
        up.transport.write(self._upstream_head() + self.request)
        self._begin()

    def _begin(self) -> None:
        if self.record and not self.begun:
            self.begun = True
            assert self.relay.sink is not None and self.api is not None
            self.relay.sink.begin(self.cid, self.api, self.request, self.head.headers,
                                  self.submit_ns)  # fmt: skip

    def _unreachable(self, message: str) -> None:
        if self.finished:
            return
        body = error_json(self.api, 502, message)
        self.client.transport.write(_json_response(b"502 Bad Gateway", body, close=False))
        self._begin()
        self._end(time.perf_counter_ns(), message, keep_client=self.keep_alive)

    # -- the answer --------------------------------------------------------------------------
    def up_data(self, data: bytes) -> None:
        if self.resp_body is not None:
            self._take(data, time.perf_counter_ns())
            return
        self.resp_buf += data
        while True:
            try:
                got = split_head(self.resp_buf, request=False)
            except HeadError as exc:
                self._broken(f"upstream sent an unreadable answer: {exc}", before_head=True)
                return
            if got is None:
                return
            head, n = got
            try:
                status = int(head.start[1])
                if 100 <= status < 200 and status != 101:  # an interim answer: not forwarded
                    self.resp_buf = self.resp_buf[n:]
                    continue
                if status == 101:
                    problem = (
                        check_switch(head, self.ws_key)
                        if self.ws_key is not None
                        else "a 101 to a request that asked for no upgrade"
                    )
                    if problem is not None:
                        raise HeadError(problem)
                    break
                no_body = self.method == b"HEAD" or status in (204, 304)
                self.resp_body = body_for(head, request=False, no_body=no_body)
            except (ValueError, HeadError) as exc:
                self._broken(f"upstream sent an unreadable answer: {exc}", before_head=True)
                return
            break
        if status == 101:  # a checked switch to the WebSocket the agent asked for
            self._switch(head, self.resp_buf[n:])
            return
        assert self.resp_body is not None
        self.status = status
        self.content_type = (head.get(b"content-type") or b"").decode("latin-1")
        self.content_encoding = (head.get(b"content-encoding") or b"").decode("latin-1")
        conn = head.tokens(b"connection")
        self.up_keep = not (
            b"close" in conn
            or self.resp_body.to_close
            or (head.start[0] == b"HTTP/1.0" and b"keep-alive" not in conn)
        )
        # An HTTP/1.0 agent cannot read chunks: it gets the payload, ended by the close.
        self.unchunk = self.http10 and self.resp_body.chunked
        if self.resp_body.to_close or self.unchunk:
            self.keep_alive = False
        drop = _HOP_OUT | {b"transfer-encoding"} if self.unchunk else _HOP_OUT
        lines = [b" ".join(head.start)]
        lines += [k + b": " + v for k, v in head.headers if k not in drop]
        if not self.keep_alive:
            lines.append(b"connection: close")
        rest = self.resp_buf[n:]
        self.resp_buf = b""
        head_out = b"\r\n".join(lines) + b"\r\n\r\n"
        self._take(rest, time.perf_counter_ns(), head_out)

    def _take(self, data: bytes, t: int, head_out: bytes = b"") -> None:
        """Parse one read of the answer's body, then forward what was parsed: as framed
        (``head_out`` first, once), or its payload to an HTTP/1.0 agent. Bytes past the body's
        end, or a read whose framing is broken, never reach the agent."""
        body = self.resp_body
        assert body is not None
        try:
            payload = body.feed(data)
        except HeadError as exc:  # before the head went out: nothing was sent, so a 502
            self._broken(f"upstream broke the stream: {exc}", before_head=bool(head_out))
            return
        if self.unchunk:
            self.client.transport.write(head_out + payload if head_out else payload)
        else:
            framed = data[: len(data) - len(body.extra)] if body.extra else data
            self.client.transport.write(head_out + framed if head_out else framed)
        if payload and self.record:
            self.pieces.append((t, payload))
        if body.done:
            if body.extra:
                self.up_keep = False
            self._end(t, None, keep_client=self.keep_alive)

    def _switch(self, head: Head, rest: bytes) -> None:
        """The upstream switched to WebSocket: its 101 goes to the agent, rebuilt from what was
        read, and the two connections become a ``Tunnel``; the exchange is over."""
        client, up, relay = self.client, self.up, self.relay
        assert up is not None
        self.up = None
        up.exchange = None
        self._settle()
        relay.last_activity_ns = time.perf_counter_ns()
        skip = _HOP_OUT | {b"transfer-encoding", b"content-length"}
        lines = [b" ".join(head.start)]
        lines += [k + b": " + v for k, v in head.headers if k not in skip]
        lines += [b"connection: upgrade", b"upgrade: websocket"]
        client.transport.write(b"\r\n".join(lines) + b"\r\n\r\n")
        client.upgraded()
        early = bytes(client.buf)
        client.buf.clear()
        path = self.target.split(b"?", 1)[0].decode("latin-1")
        sink = relay.sink
        api = api_for_path(path)
        opened = time.perf_counter_ns()

        def message(opcode: int) -> None:
            if sink is not None:
                sink.note("unread_request", time.perf_counter_ns(), {
                    "api": api, "path": path[:200], "transport": "websocket",
                    "error": "a message over a WebSocket is relayed, not recorded",
                })  # fmt: skip

        def closed(t: Tunnel, reason: str) -> None:
            relay._tunnels.discard(t)
            relay.last_activity_ns = time.perf_counter_ns()
            if sink is not None:
                sink.note("websocket", time.perf_counter_ns(), {
                    "path": path[:200], "api": api, "open_ns": opened,
                    "agent_messages": t.from_client.messages,
                    "upstream_messages": t.from_up.messages,
                    "agent_bytes": t.bytes_in, "upstream_bytes": t.bytes_out,
                    "end": reason,
                })  # fmt: skip

        def active() -> None:
            relay.last_activity_ns = time.perf_counter_ns()

        tunnel = Tunnel(client.transport, up.transport, deflate=deflate_negotiated(head),
                        on_message=message, on_close=closed, on_activity=active)  # fmt: skip
        relay._tunnels.add(tunnel)
        tunnel.start(early, rest)

    def up_lost(self, exc: Exception | None) -> None:
        if self.finished:
            return
        body = self.resp_body
        if body is None:
            if self.reused and not self.resp_buf and not self.retried:
                self.retried = True  # a kept-alive connection the upstream had closed
                self.up = None
                self._go()
                return
            why = describe(exc, "connection closed before the answer")
            self._unreachable(f"upstream {self.relay.upstream.label} unreachable: {why}")
            return
        if body.to_close and exc is None:
            self.up_keep = False
            self._end(time.perf_counter_ns(), None, keep_client=False)
            return
        self._broken(
            f"upstream broke the stream: "
            f"{describe(exc, 'connection closed before the answer ended')}",
            before_head=False,
        )

    def _broken(self, message: str, *, before_head: bool) -> None:
        """The upstream failed this answer: a 502 if nothing was sent on, else the agent's
        connection is closed without the rest (it sees the break, as from the upstream)."""
        self.up_keep = False
        if before_head:
            self._unreachable(message)
            return
        self._end(time.perf_counter_ns(), message, keep_client=False)
        self.client.transport.close()

    def client_lost(self) -> None:
        if self.finished:
            return
        if self.up is None and not self.body.done:  # it left before its request was whole
            self._settle()
            return
        self.up_keep = False
        why = "proxy stopped before the answer ended" if self.relay.stopping else CLIENT_LEFT
        self._end(time.perf_counter_ns(), why, keep_client=False)

    def _settle(self) -> None:
        """The exchange is over: it no longer counts as in flight."""
        self.finished = True
        self.relay.in_flight -= 1

    def _end(self, end_ns: int, error: str | None, *, keep_client: bool) -> None:
        self._settle()
        relay = self.relay
        relay.last_activity_ns = time.perf_counter_ns()
        up, self.up = self.up, None
        if up is not None:
            if self.up_keep and error is None:
                if not up.transport.is_reading():  # paused for a slow agent as the answer ended
                    up.transport.resume_reading()
                relay.give_back(up)
            else:
                up.exchange = None
                up.transport.abort()
        if self.begun and relay.sink is not None:
            answer = Answer(self.status, self.content_type, self.content_encoding,
                            self.pieces, end_ns, error)  # fmt: skip
            relay.sink.end(self.cid, answer)
        if not self.client.closed:
            self.client.done(keep_client)
