"""One request and its answer through the relay (``Exchange``): forwarding and capture.

* The request: its body is read by its framing (``http1.Body``; bytes past its end are the
  agent's next request), then the request goes upstream (``heads.request_head``) on the
  relay's last idle connection or a new one; a reused connection that the upstream closed
  before answering is retried once on a fresh one.
* A large body: one that grows past ``MAX_HELD_BODY`` before its end goes upstream as it
  arrives, on a fresh connection (the agent's connection is not read while the upstream takes
  no more), and is not recorded: an ``UnreadRequest`` counts it (the stop line says so).
* The answer: read and relayed as it comes by the exchange's ``answer.AnswerRelay`` (its head
  read and rebuilt for the agent, each read of the body written on as framed before anything
  else is done with it); a recorded call's ``Answer`` goes to the relay's sink at the end.
* A full disk: a recorded call is not forwarded while the trace's disk is full
  (``diskguard``): the agent gets a 507 in the API's error shape, and nothing is recorded.
* Failures: an upstream that cannot be reached, or that fails before anything went to the
  agent, is a 502 in the API's error shape; one that breaks the answer after that closes the
  agent's connection without the rest. The upstream's checked 101 turns both connections into
  a ``websocket.Tunnel`` (``Relay.tunnel``) and ends the exchange.

The exchange sees the relay (``relay.Relay``) and its agent connection only through what it
uses of them (``RelayHub``, ``AgentConn``).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import Callable
from typing import Protocol

from agentload.client.http1 import Body, Head, HeadError
from agentload.record.answer import AnswerRelay
from agentload.record.heads import error_json, json_response, request_head
from agentload.record.sink import CLIENT_LEFT, Sink, describe
from agentload.record.unread import unread_call, unread_event
from agentload.record.upstream import Upstream, UpstreamConn
from agentload.wire import Api, api_for_path, match_path, unrecorded_api

__all__ = ["MAX_HELD_BODY", "AgentConn", "Exchange", "RelayHub"]

MAX_HELD_BODY = 64 << 20
"""The largest request body the proxy holds whole and records: a larger one is forwarded as it
arrives and counted as a request not recorded (``UnreadRequest``)."""

_SLICE = 256 << 10
"""A held body is written upstream this much at a time, as the connection takes it."""


class RelayHub(Protocol):
    """What an exchange uses of the relay (``relay.Relay``)."""

    upstream: Upstream
    sink: Sink | None
    in_flight: int
    last_activity_ns: int
    stopping: bool

    def cid(self) -> int: ...

    def refusal(self) -> str | None: ...

    def take_idle(self) -> UpstreamConn | None: ...

    async def connect(self) -> UpstreamConn: ...

    def give_back(self, up: UpstreamConn) -> None: ...

    def tunnel(
        self, client: AgentConn, up: UpstreamConn, switch: Head, rest: bytes, path: str
    ) -> None: ...


class AgentConn(Protocol):
    """What an exchange uses of its agent's connection (``relay``'s ``_Client``)."""

    transport: asyncio.Transport
    buf: bytearray
    closed: bool
    session: str | None
    """The session its listener stands for (``Relay.listen``), else None."""
    on_call: Callable[[], None] | None
    """Told as each recorded call of the connection goes out (``Relay.listen``)."""

    @property
    def relay(self) -> RelayHub: ...

    def body_whole(self) -> None: ...

    def flow(self) -> None: ...

    def refuse(self, message: str, *, status: int = 400) -> None: ...

    def upgraded(self) -> None: ...

    def done(self, keep_alive: bool) -> None: ...


class Exchange:
    """One request and its answer, from the agent's request head to the answer's end."""

    def __init__(self, client: AgentConn, head: Head, body: Body) -> None:
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
        path = target.split(b"?", 1)[0].decode("latin-1")
        self.api: Api | None = api_for_path(path) if method == b"POST" else None
        self.record = self.api is not None and relay.sink is not None
        self.path = path
        self.unread = relay.sink is not None and self.api is None and unread_call(method, path)
        """A request with a body to a path that is no API the proxy reads: noted when it ends."""
        self.known = unrecorded_api(path) if self.unread and method == b"POST" else None
        """The known API such a request speaks (embeddings, legacy Completions, Ollama's)."""
        self.answered_bytes = 0
        self.cid = relay.cid() if self.record else 0
        self._parts: deque[bytes] = deque()
        """The body's reads held: until it is whole, or a streamed body's until written."""
        self.request = b""
        """The request's body, once it is whole (never held past ``MAX_HELD_BODY``)."""
        self.request_bytes = 0
        self.streaming = False
        """The body goes upstream as it arrives (it grew past ``MAX_HELD_BODY``)."""
        self.sent = False
        """The body was written upstream to its end."""
        self._offset = 0
        """How much of a held body (``request``) was written upstream."""
        self._draining = False
        """``_drain`` is writing (a pause it causes must not start it again)."""
        self.oversize = False
        """The body is over ``MAX_HELD_BODY``: forwarded, not recorded, counted when it ends."""
        self.up: UpstreamConn | None = None
        self.reused = False
        self.retried = False
        self.answer = AnswerRelay(self)
        self.up_keep = True
        """Whether the upstream connection may serve another request after this one."""
        self.submit_ns = 0
        self.finished = False
        self.begun = False
        self.handed = False
        self.ws_key: bytes | None = None
        """A checked WebSocket upgrade's key (``websocket.check_upgrade``), else None."""
        relay.in_flight += 1

    # -- the request -------------------------------------------------------------------------
    def feed_request(self, data: bytes) -> None:
        try:
            payload = self.body.feed(data)
        except HeadError as exc:
            self.settle()
            self.client.refuse(f"bad request body: {exc}")
            return
        if payload:
            self.request_bytes += len(payload)
            self._parts.append(payload)
        if not self.streaming and self.request_bytes > MAX_HELD_BODY and not self.body.done:
            self._stream()
        if self.body.done:
            self.client.body_whole()
            if self.body.extra:  # the agent's next request, pipelined
                self.client.buf[:0] = self.body.extra
            if not self.streaming:
                self._whole()
        if self.streaming:
            self._drain()

    def _whole(self) -> None:
        """The body is whole (and held): the request goes upstream, or is refused."""
        parts, self._parts = self._parts, deque()
        self.request = parts[0] if len(parts) == 1 else b"".join(parts)
        del parts
        self.submit_ns = time.perf_counter_ns()
        if self.request_bytes > MAX_HELD_BODY:  # whole in its last read: forwarded, not recorded
            self.oversize, self.record = True, False
        refused = self.relay.refusal() if self.record else None
        if refused is not None:  # the trace could not hold it: never forwarded
            self._refused(refused)
            return
        self._go()

    def _stream(self) -> None:
        """The body grew past ``MAX_HELD_BODY`` before its end: from now on it goes upstream as
        it arrives, on a fresh connection (a request sent in part is never sent again), and the
        call is not recorded (``settle`` counts it)."""
        self.streaming, self.oversize, self.record = True, True, False
        self.submit_ns = time.perf_counter_ns()
        self._go()
        self.client.flow()

    @property
    def holding(self) -> bool:
        """A streamed body waits for its upstream (connecting, or its writes paused): the
        agent's connection is not read meanwhile."""
        return self.streaming and not self.body.done and (self.up is None or self.up.full)

    def up_flow(self) -> None:
        """The upstream connection's writes were paused or resumed."""
        if not self.finished:
            self._drain()
            self.client.flow()

    def _drain(self) -> None:
        """Write the body upstream until the connection's writes pause, so that the transport
        never holds a copy of more than a slice of it: a held body a slice at a time, a
        streamed body's reads as they came (each freed once written; one that came chunked goes
        as a chunk of our own), then its end."""
        up = self.up
        if up is None or self.finished or self.sent or self._draining:
            return
        self._draining = True
        try:
            self._write_body(up)
        finally:
            self._draining = False

    def _write_body(self, up: UpstreamConn) -> None:
        """``_drain``'s writes, never run twice at once: a write that fills the connection's
        buffer pauses it at once (``up_flow`` comes back here), and a second run then would
        write the body's end inside the chunk being written."""
        t, parts, chunked = up.transport, self._parts, self.body.chunked
        if not self.streaming:
            view = memoryview(self.request)
            while self._offset < len(view) and not up.full:
                t.write(view[self._offset : self._offset + _SLICE])
                self._offset += _SLICE
            self.sent = self._offset >= len(view)
            return
        while parts and not up.full:
            payload = parts.popleft()
            if chunked:
                t.write(b"%x\r\n" % len(payload))
                t.write(payload)
                t.write(b"\r\n")
            else:
                t.write(payload)
        if self.body.done and not parts and not self.sent:
            self.sent = True
            if chunked:
                t.write(b"0\r\n\r\n")

    def _go(self) -> None:
        up = None if self.retried or self.streaming else self.relay.take_idle()
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

    def _send(self, up: UpstreamConn, *, reused: bool) -> None:
        """Write the whole request on ``up`` (a kept-alive connection if ``reused``)."""
        self.up, self.reused = up, reused
        up.exchange = self
        if not self.streaming:
            length: int | None = len(self.request)
        else:
            length = None if self.body.chunked else self.request_bytes + (self.body.wanted or 0)
        head = request_head(self.relay.upstream, self.head, self.target, self.ws_key, length)
        up.transport.write(head)
        self._offset, self.sent = 0, False
        self._drain()
        if self.streaming:
            self.client.flow()
        self._begin()

    def _begin(self) -> None:
        if self.record and not self.begun:
            self.begun = True
            assert self.relay.sink is not None and self.api is not None
            self.relay.sink.begin(
                self.cid,
                self.api,
                self.request,
                self.head.headers,
                self.submit_ns,
                self.client.session,
                match_path(self.path),
            )
            if self.client.on_call is not None:
                self.client.on_call()

    def _refused(self, message: str) -> None:
        """A 507 in the API's error shape, of the relay's own: the call was not forwarded."""
        body = error_json(self.api, 507, message)
        self.client.transport.write(json_response(b"507 Insufficient Storage", body, close=False))
        self.end(time.perf_counter_ns(), message, keep_client=self.keep_alive)

    def _unreachable(self, message: str) -> None:
        if self.finished:
            return
        body = error_json(self.api, 502, message)
        self._begin()
        now = time.perf_counter_ns()
        self.hand_over(now, message)
        self.client.transport.write(json_response(b"502 Bad Gateway", body, close=False))
        self.end(now, message, keep_client=self.keep_alive)

    # -- the answer --------------------------------------------------------------------------
    def up_data(self, data: bytes) -> None:
        """A read from the upstream: the answer's (``AnswerRelay``)."""
        if not self.body.done:  # an answer before the body's end: the agent's connection ends
            self.keep_alive = False
        self.answer.data(data)

    def to_agent(self, data: bytes) -> None:
        """Write on to the agent (the answer as it comes)."""
        self.answered_bytes += len(data)
        self.client.transport.write(data)

    def switch(self, head: Head, rest: bytes) -> None:
        """The upstream switched to WebSocket (its checked 101 ``head``): the relay joins the two
        connections in a tunnel (``Relay.tunnel``); the exchange is over."""
        up = self.up
        assert up is not None
        self.up = None
        up.exchange = None
        self.settle()
        path = self.target.split(b"?", 1)[0].decode("latin-1")
        self.relay.tunnel(self.client, up, head, rest, path)

    def up_lost(self, exc: Exception | None) -> None:
        if self.finished:
            return
        body = self.answer.body
        if body is None:
            if self.reused and not self.answer.buf and not self.retried:
                self.retried = True  # a kept-alive connection the upstream had closed
                self.up = None
                self._go()
                return
            why = describe(exc, "connection closed before the answer")
            self._unreachable(f"upstream {self.relay.upstream.label} unreachable: {why}")
            return
        if body.to_close and exc is None:
            self.up_keep = False
            self.end(time.perf_counter_ns(), None, keep_client=False)
            return
        self.broken(
            f"upstream broke the stream: "
            f"{describe(exc, 'connection closed before the answer ended')}",
            before_head=False,
        )

    def broken(self, message: str, *, before_head: bool) -> None:
        """The upstream failed this answer: a 502 if nothing was sent on, else the agent's
        connection is closed without the rest (it sees the break, as from the upstream)."""
        self.up_keep = False
        if before_head:
            self._unreachable(message)
            return
        self.end(time.perf_counter_ns(), message, keep_client=False)
        self.client.transport.close()

    def client_lost(self) -> None:
        if self.finished:
            return
        if self.up is None and not self.body.done:  # it left before its request was whole
            self.settle()
            return
        self.up_keep = False
        why = "proxy stopped before the answer ended" if self.relay.stopping else CLIENT_LEFT
        self.end(time.perf_counter_ns(), why, keep_client=False)

    def settle(self) -> None:
        """The exchange is over: it no longer counts as in flight (a request the proxy could
        not read as a call is noted now, with its answer's status and size)."""
        self.finished = True
        self.relay.in_flight -= 1
        too_large = self.oversize and self.api is not None
        if (self.unread or too_large) and self.relay.sink is not None:
            self.unread = self.oversize = False
            why = f"request body over {MAX_HELD_BODY >> 20} MiB: forwarded, not recorded"
            event = unread_event(
                self.method.decode("latin-1"),
                self.path,
                self.known,
                self.answer.status,
                (self.request_bytes, self.answered_bytes),
                self.api,
                why if too_large else None,
            )
            self.relay.sink.note(event, time.perf_counter_ns())

    def hand_over(self, end_ns: int, error: str | None) -> None:
        """A recorded call's answer goes to the sink, once: before its last bytes go to the
        agent, so that an agent which saw its answer whole finds the call recorded even if the
        proxy is killed at once."""
        if self.begun and not self.handed and self.relay.sink is not None:
            self.handed = True
            self.relay.sink.end(self.cid, self.answer.answer(end_ns, error))

    def end(self, end_ns: int, error: str | None, *, keep_client: bool) -> None:
        """The exchange ended (``error``: why, if it failed): the upstream connection is kept
        for reuse or dropped, a recorded call's answer goes to the sink, the agent's connection
        reads its next request or is closed."""
        self.settle()
        self.request = b""
        if not self.body.done:  # answered before its body was whole: the rest is not read
            self.up_keep = keep_client = False
        if not self.sent:  # nor written: that connection is out of step
            self.up_keep = False
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
        self.hand_over(end_ns, error)
        if not self.client.closed:
            self.client.done(keep_client)
