"""One request and its answer through the relay (``Exchange``): forwarding and capture.

* The request: its body is read by its framing (``http1.Body``; bytes past its end are the
  agent's next request), then the request goes upstream (``heads.request_head``) on the
  relay's last idle connection or a new one; a reused connection that the upstream closed
  before answering is retried once on a fresh one.
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
from collections.abc import Callable
from typing import Protocol

from agentload.client.http1 import Body, Head, HeadError
from agentload.errortext import clip
from agentload.record.answer import AnswerRelay
from agentload.record.heads import error_json, json_response, request_head
from agentload.record.sink import CLIENT_LEFT, Sink, describe
from agentload.record.upstream import Upstream, UpstreamConn
from agentload.trace.events import Embedding, EventPayload, UnreadRequest
from agentload.wire import (
    UNRECORDED,
    Api,
    Unrecorded,
    api_for_path,
    counts_tokens,
    match_path,
    unrecorded_api,
)

__all__ = ["AgentConn", "Exchange", "RelayHub", "unread_call", "unread_event"]

_WITH_BODY = (b"POST", b"PUT", b"PATCH")


def unread_call(method: bytes, path: str) -> bool:
    """Whether a request the proxy does not read as a call is one it must say it did not read:
    one with a body (a ``GET`` of the models, a health check, carry none) that does not ask
    about a call (``/v1/messages/count_tokens``, Gemini's ``:countTokens``)."""
    return method in _WITH_BODY and not counts_tokens(path)


def unread_event(
    method: str, path: str, known: Unrecorded | None, status: int | None, sizes: tuple[int, int]
) -> EventPayload:
    """The event of a request recorded as no call: an ``Embedding`` for an embeddings request,
    else an ``UnreadRequest`` that says why (``known``: the known API it speaks, if any);
    ``sizes``: the request's and the answer's bytes."""
    path = clip(path, 200)
    if known == "embeddings":
        return Embedding(method=method, path=path, status=status,
                         request_bytes=sizes[0], answer_bytes=sizes[1])  # fmt: skip
    why = UNRECORDED[known] if known else "not a path of an API agentload records"
    return UnreadRequest(
        api=None, request_kind=known, path=path, method=method, status=status,
        request_bytes=sizes[0], answer_bytes=sizes[1], error=clip(f"{method} {path}: {why}", 240),
    )  # fmt: skip


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
        self._parts: list[bytes] = []
        self.request = b""
        """The request's body, once it is whole."""
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
            self._parts.append(payload)
        if self.body.done:
            self.client.body_whole()
            if self.body.extra:  # the agent's next request, pipelined
                self.client.buf[:0] = self.body.extra
            self.request = b"".join(self._parts)
            self._parts = []
            self.submit_ns = time.perf_counter_ns()
            refused = self.relay.refusal() if self.record else None
            if refused is not None:  # the trace could not hold it: never forwarded
                self._refused(refused)
                return
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
                                  self.submit_ns, self.client.session,
                                  match_path(self.path))  # fmt: skip
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
        if self.unread and self.relay.sink is not None:
            self.unread = False
            sizes = (len(self.request), self.answered_bytes)
            event = unread_event(self.method.decode("latin-1"), self.path, self.known,
                                 self.answer.status, sizes)  # fmt: skip
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
