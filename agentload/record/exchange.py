"""One request and its answer through the relay (``Exchange``): forwarding and capture.

* The request: its body is read by its framing (``http1.Body``; bytes past its end are the
  agent's next request), then the request goes upstream (``heads.request_head``) on the
  relay's last idle connection or a new one; a reused connection that the upstream closed
  before answering is retried once on a fresh one.
* The answer: its head is read (interim answers skipped, a WebSocket 101 checked against the
  upgrade asked for) and rebuilt for the agent (``heads.answer_head``), then each read of the
  body is written on as framed before anything else is done with it; a recorded call keeps the
  payload with each read's arrival time and hands the ``Answer`` to the relay's sink at the end.
* Failures: an upstream that cannot be reached, or that fails before anything went to the
  agent, is a 502 in the API's error shape; one that breaks the answer after that closes the
  agent's connection without the rest. The upstream's checked 101 turns both connections into
  a ``websocket.Tunnel`` and ends the exchange.

The exchange sees the relay (``relay.Relay``) and its agent connection only through what it
uses of them (``RelayHub``, ``AgentConn``).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import Protocol

from agentload.record.heads import (
    answer_head,
    error_json,
    json_response,
    request_head,
    switch_head,
)
from agentload.record.http1 import Body, Head, HeadError, body_for, split_head
from agentload.record.sink import CLIENT_LEFT, Answer, Sink, describe
from agentload.record.upstream import Upstream, UpstreamConn
from agentload.record.websocket import Tunnel, check_switch, deflate_negotiated
from agentload.wire import Api, api_for_path

__all__ = ["AgentConn", "Exchange", "RelayHub"]


class RelayHub(Protocol):
    """What an exchange uses of the relay (``relay.Relay``)."""

    upstream: Upstream
    sink: Sink | None
    in_flight: int
    last_activity_ns: int
    stopping: bool
    tunnels: set[Tunnel]

    def cid(self) -> int: ...

    def take_idle(self) -> UpstreamConn | None: ...

    async def connect(self) -> UpstreamConn: ...

    def give_back(self, up: UpstreamConn) -> None: ...


class AgentConn(Protocol):
    """What an exchange uses of its agent's connection (``relay``'s ``_Client``)."""

    transport: asyncio.Transport
    buf: bytearray
    closed: bool

    @property
    def relay(self) -> RelayHub: ...

    def body_whole(self) -> None: ...

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
        self.unchunk = False
        """Chunks from the upstream go to an HTTP/1.0 agent as their payload."""
        path = target.split(b"?", 1)[0].decode("latin-1")
        self.api: Api | None = api_for_path(path) if method == b"POST" else None
        self.record = self.api is not None and relay.sink is not None
        self.cid = relay.cid() if self.record else 0
        self._parts: list[bytes] = []
        self.request = b""
        """The request's body, once it is whole."""
        self.up: UpstreamConn | None = None
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
            self.settle()
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

    def _send(self, up: UpstreamConn, *, reused: bool) -> None:
        """Write the whole request on ``up`` (a kept-alive connection if ``reused``)."""
        self.up, self.reused = up, reused
        up.exchange = self
        head = request_head(self.relay.upstream, self.head, self.target, self.ws_key, self.request)
        up.transport.write(head + self.request)
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
        self.client.transport.write(json_response(b"502 Bad Gateway", body, close=False))
        self._begin()
        self._end(time.perf_counter_ns(), message, keep_client=self.keep_alive)

    # -- the answer --------------------------------------------------------------------------
    def up_data(self, data: bytes) -> None:
        """A read from the upstream: the answer's head until it is whole, then its body."""
        if self.resp_body is not None:
            self._take(data, time.perf_counter_ns())
            return
        self.resp_buf += data
        got = self._answer_head()
        if got is None:
            return
        head, n, status = got
        if status == 101:  # a checked switch to the WebSocket the agent asked for
            self._switch(head, self.resp_buf[n:])
            return
        self._answer_starts(head, n, status)

    def _answer_head(self) -> tuple[Head, int, int] | None:
        """The answer's head, its length and status, once whole (interim answers skipped, a 101
        checked, else its body's framing read); None until then, or when it is unreadable (the
        answer is then broken: a 502)."""
        while True:
            try:
                got = split_head(self.resp_buf, request=False)
            except HeadError as exc:
                self._broken(f"upstream sent an unreadable answer: {exc}", before_head=True)
                return None
            if got is None:
                return None
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
                    return head, n, status
                no_body = self.method == b"HEAD" or status in (204, 304)
                self.resp_body = body_for(head, request=False, no_body=no_body)
            except (ValueError, HeadError) as exc:
                self._broken(f"upstream sent an unreadable answer: {exc}", before_head=True)
                return None
            return head, n, status

    def _answer_starts(self, head: Head, n: int, status: int) -> None:
        """The answer's head (``n`` bytes of the buffer) is whole: keep what tells how to read
        it, settle both sides' keep-alive, and send it on with the body's first bytes."""
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
        head_out = answer_head(head, unchunk=self.unchunk, keep_alive=self.keep_alive)
        rest = self.resp_buf[n:]
        self.resp_buf = b""
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
        self.settle()
        relay.last_activity_ns = time.perf_counter_ns()
        client.transport.write(switch_head(head))
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
            relay.tunnels.discard(t)
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
        relay.tunnels.add(tunnel)
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
            self.settle()
            return
        self.up_keep = False
        why = "proxy stopped before the answer ended" if self.relay.stopping else CLIENT_LEFT
        self._end(time.perf_counter_ns(), why, keep_client=False)

    def settle(self) -> None:
        """The exchange is over: it no longer counts as in flight."""
        self.finished = True
        self.relay.in_flight -= 1

    def _end(self, end_ns: int, error: str | None, *, keep_client: bool) -> None:
        """The exchange ended (``error``: why, if it failed): the upstream connection is kept
        for reuse or dropped, a recorded call's answer goes to the sink, the agent's connection
        reads its next request or is closed."""
        self.settle()
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
