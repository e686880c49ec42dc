"""The recording reverse proxy's forwarding: HTTP/1.1 on raw asyncio protocols, both sides.

* Every request is forwarded to the upstream with its headers (credentials included:
  ``Authorization`` and ``x-api-key`` pass through, they never reach the trace), less the
  hop-by-hop ones, and with ``accept-encoding: identity`` so the recorder can read the answer.
  ``POST`` to a Chat Completions, Responses, Messages or Gemini ``generateContent`` path
  (``agentload.wire.api_for_path``) is also recorded; anything else (``/v1/models``,
  ``/v1/messages/count_tokens``, a Gemini ``:countTokens``, ...) is not.
* The answer's bytes go to the agent as the upstream framed them, each read written on before
  anything else is done with it, so a streamed answer reaches the agent chunk by chunk as it
  arrives. The relay parses only the framing (``http1``) to know where the answer ends, and
  keeps the payload of a recorded call with the time each read came; the recorder process
  (``recorder_process``) reads it once the call is over. Nothing else is done per chunk.
* Upstream errors reach the agent as the upstream sent them (status, headers, body); an
  upstream that cannot be reached is a 502 in the API's error shape; an upstream that breaks an
  answer breaks the agent's connection too (closed without the rest of the answer). A client
  that disconnects closes the upstream request. Each is recorded as the call's error.
* Upstream connections are kept alive and reused last-in first-out; a reused connection that
  the upstream closed before answering is retried once on a fresh one (it never got the
  request). A slow client pauses its upstream (the transport's flow control), so nothing grows
  without bound; the other way too: an agent that pipelines requests is not read while more than
  ``MAX_PIPELINED`` bytes of them wait behind the one answered, nor while the upstream does not
  take a large body as fast as it comes (``exchange.MAX_HELD_BODY``).
* A WebSocket upgrade (Codex's Responses over WebSocket) is checked strictly and forwarded; the
  upstream's checked 101 turns both connections into a ``websocket.Tunnel`` (frames piped both
  ways, their messages noted as unread); any other answer is relayed as it came. Plain requests
  pay one scan of their headers for an ``Upgrade`` field, nothing more.

This module is the relay itself (``Relay``: the listening socket, the idle upstream connections,
the WebSocket tunnels, the stop) and its agent connections (each request head read strictly,
the keep-alive, head and body timers). One request and its answer is an ``exchange.Exchange``
(its answer relayed by ``answer``); the upstream and one connection to it are ``upstream``; the
heads and error answers the relay writes, ``heads``; what it hands the recorder process,
``sink``.
"""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Callable
from enum import Enum

from agentload.client.http1 import Head, HeadError, body_for, split_head
from agentload.record.diskguard import DiskGuard
from agentload.record.exchange import AgentConn, Exchange
from agentload.record.heads import error_json, json_response, switch_head
from agentload.record.sink import Sink
from agentload.record.upstream import Upstream, UpstreamConn, nodelay
from agentload.record.websocket import Tunnel, asks_websocket, check_upgrade, open_tunnel

__all__ = ["Relay"]

CONNECT_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 75.0
"""How long an agent's idle keep-alive connection stays open."""
HEAD_TIMEOUT_S = 30.0
"""From a request head's first byte to its end, however it trickles in (slowloris): then a 408."""
BODY_IDLE_S = 60.0
"""How long a request body may pause between two reads before it is a 408."""
GRACE_S = 5.0
"""On stop: how long answers in flight may still run."""
MAX_PIPELINED = 1 << 20
"""Bytes of an agent's next requests read ahead while one is in flight: past it, its connection
is not read until that one ends."""


class Relay:
    """The proxy: serves agents on a listening socket, forwards to one upstream."""

    def __init__(
        self, upstream: Upstream, sink: Sink | None, guard: DiskGuard | None = None
    ) -> None:
        self.upstream = upstream
        self.sink = sink
        self.guard = guard
        """Asked before each recorded call goes upstream (a full disk refuses it: a 507)."""
        self.in_flight = 0
        self.last_activity_ns = time.perf_counter_ns()
        self.stopping = False
        self._idle: list[UpstreamConn] = []
        self._clients: set[_Client] = set()
        self.tunnels: set[Tunnel] = set()  # open WebSockets (``tunnel`` adds them)
        self._server: asyncio.Server | None = None
        self._listeners: list[asyncio.Server] = []
        self._next_cid = 0

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Client(self), sock=sock, backlog=2048)

    async def listen(
        self, sock: socket.socket, session: str, on_call: Callable[[], None] | None = None
    ) -> asyncio.Server:
        """Serve agents on one more listening socket (TCP or Unix), every request it brings
        recorded as of ``session`` (``generate --agent``: one listener per session, so the
        trace's sessions are exact whatever the agent sends); ``on_call`` is called (in the
        relay's thread) as each recorded call goes out. Closed with the relay, or by the caller
        once the session is over."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _Client(self, session, on_call), sock=sock, backlog=64
        )
        self._listeners.append(server)
        return server

    async def aclose(self) -> None:
        """Stop accepting, let answers in flight run for up to ``GRACE_S``, then close all."""
        self.stopping = True
        if self._server is not None:
            self._server.close()
        for server in self._listeners:
            server.close()
        for c in list(self._clients):
            if c.exchange is None:
                c.transport.close()
        deadline = time.monotonic() + GRACE_S
        while self.in_flight and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for c in list(self._clients):
            c.transport.abort()
        for t in list(self.tunnels):  # open WebSockets end with the proxy
            t.stop()
        for up in self._idle:
            up.transport.abort()
        self._idle.clear()
        await asyncio.sleep(0)  # let the aborts' connection_lost callbacks run

    def refusal(self) -> str | None:
        """Why a recorded call may not go upstream now (``DiskGuard``), else None."""
        return self.guard.refusal() if self.guard is not None else None

    def cid(self) -> int:
        self._next_cid += 1
        return self._next_cid

    # -- upstream connections (last-in first-out) --------------------------------------------
    def take_idle(self) -> UpstreamConn | None:
        while self._idle:
            up = self._idle.pop()
            if not up.closed:
                return up
        return None

    async def connect(self) -> UpstreamConn:
        u = self.upstream
        loop = asyncio.get_running_loop()
        server_hostname = u.host if u.tls is not None else None
        _, up = await asyncio.wait_for(
            loop.create_connection(
                UpstreamConn, u.host, u.port, ssl=u.tls, server_hostname=server_hostname
            ),
            CONNECT_TIMEOUT_S,
        )
        return up

    def give_back(self, up: UpstreamConn) -> None:
        up.exchange = None
        if self.stopping or up.closed:
            up.transport.close()
        else:
            self._idle.append(up)

    # -- WebSocket tunnels -------------------------------------------------------------------
    def tunnel(
        self, client: AgentConn, up: UpstreamConn, switch: Head, rest: bytes, path: str
    ) -> None:
        """Join an agent connection and its upstream one in a ``Tunnel``, kept until it ends:
        the upstream's checked 101 (``switch``) goes to the agent, rebuilt, then what each side
        sent after it (``rest``: the upstream's)."""
        self.last_activity_ns = time.perf_counter_ns()
        client.transport.write(switch_head(switch))
        client.upgraded()
        early = bytes(client.buf)
        client.buf.clear()

        def active() -> None:
            self.last_activity_ns = time.perf_counter_ns()

        def closed(t: Tunnel) -> None:
            self.tunnels.discard(t)
            active()

        tunnel = open_tunnel(
            client.transport,
            up.transport,
            switch,
            path,
            self.sink,
            on_close=closed,
            on_activity=active,
        )
        self.tunnels.add(tunnel)
        tunnel.start(early, rest)


class _Wait(Enum):
    """What an agent connection's one timer waits for."""

    NONE = "none"  # an answer is running
    IDLE = "idle"  # the next request on a kept-alive connection (KEEP_ALIVE_S)
    HEAD = "head"  # the rest of a request head (HEAD_TIMEOUT_S from its first byte)
    BODY = "body"  # the next read of a request body (BODY_IDLE_S)


class _Client(asyncio.Protocol):
    """One agent connection: reads requests one after another, one exchange at a time."""

    transport: asyncio.Transport

    def __init__(
        self, relay: Relay, session: str | None = None, on_call: Callable[[], None] | None = None
    ) -> None:
        self.relay = relay
        self.session = session
        self.on_call = on_call
        self.buf = bytearray()
        self.exchange: Exchange | None = None
        self.closed = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self._timer_kind = _Wait.NONE
        self._held = False
        """Its reads are paused (``flow``)."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        nodelay(transport)
        self.relay._clients.add(self)
        self._arm()

    def _timer(
        self,
        delay: float | None = None,
        then: Callable[[], None] | None = None,
        kind: _Wait = _Wait.NONE,
    ) -> None:
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
            ex.settle()
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
        self.flow()

    def flow(self) -> None:
        """Read the agent's connection or not: not while more than ``MAX_PIPELINED`` bytes of
        its next requests wait, nor while a streamed body waits for its upstream (its stall
        timer stops meanwhile)."""
        ex = self.exchange
        hold = ex is not None and (ex.holding or len(self.buf) > MAX_PIPELINED)
        if hold == self._held or self.closed or self.transport.is_closing():
            return
        self._held = hold
        if hold:
            self.transport.pause_reading()
            if ex is not None and ex.holding:
                self._timer()
        else:
            self.transport.resume_reading()
            if ex is not None and not ex.body.done:
                self._body_stall()

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
        del self.buf[:n]
        wanted = body.wanted  # the body's bytes here; the rest is the next request's
        take = len(self.buf) if wanted is None else min(wanted, len(self.buf))
        rest = bytes(self.buf[:take])
        del self.buf[:take]
        if b"100-continue" in head.tokens(b"expect"):
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        self.exchange = Exchange(self, head, body)
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
        self.transport.write(json_response(line, body, close=True))
        self.transport.close()

    def upgraded(self) -> None:
        """Its connection became a WebSocket tunnel: no longer a client of the relay's."""
        self._timer()
        self.exchange = None
        self.closed = True
        self.relay._clients.discard(self)
        if self._held:  # the tunnel reads it now
            self._held = False
            self.transport.resume_reading()

    def done(self, keep_alive: bool) -> None:
        """The exchange in flight is over."""
        self.exchange = None
        if not keep_alive or self.relay.stopping:
            self.transport.close()
            return
        self.next_request()
        self.flow()

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
