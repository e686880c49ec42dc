"""The upstream's answer in an exchange (``AnswerRelay``): read and relayed to the agent as it comes.

* The head: read until whole; interim answers (1xx but 101) are skipped, never forwarded; a 101
  is checked against the upgrade the agent asked for (``websocket.check_switch``) and handed
  back to the exchange, which turns both connections into a tunnel; any other head settles
  both sides' keep-alive and is rebuilt for the agent (``heads.answer_head``).
* The body: each read is parsed by its framing (``http1.Body``) and written on as framed (its
  payload to an HTTP/1.0 agent, which cannot read chunks) before anything else is done with it;
  bytes past the body's end, or a read whose framing is broken, never reach the agent. A
  recorded call keeps the payload with each read's arrival time: the ``Answer`` the sink gets.

An answer sees its exchange (``exchange.Exchange``) only through what it uses of it
(``AnswerOwner``): the agent's side of the request, and how the exchange ends.
"""

from __future__ import annotations

import time
from typing import Protocol

from agentload.client.http1 import Body, Head, HeadError, body_for, split_head
from agentload.record.heads import answer_head
from agentload.record.sink import Answer
from agentload.record.websocket import check_switch

__all__ = ["AnswerOwner", "AnswerRelay"]


class AnswerOwner(Protocol):
    """What an answer uses of its exchange (``exchange.Exchange``)."""

    method: bytes
    ws_key: bytes | None
    http10: bool
    keep_alive: bool
    up_keep: bool
    record: bool

    def to_agent(self, data: bytes) -> None: ...

    def switch(self, head: Head, rest: bytes) -> None: ...

    def broken(self, message: str, *, before_head: bool) -> None: ...

    def hand_over(self, end_ns: int, error: str | None) -> None: ...

    def end(self, end_ns: int, error: str | None, *, keep_client: bool) -> None: ...


class AnswerRelay:
    """The upstream's answer to one exchange (see the module docstring)."""

    def __init__(self, owner: AnswerOwner) -> None:
        self.owner = owner
        self.buf = b""
        """The answer's bytes until its head is whole."""
        self.body: Body | None = None
        """The body's framing, once the head is read."""
        self.unchunk = False
        """Chunks from the upstream go to an HTTP/1.0 agent as their payload."""
        self.status: int | None = None
        self.content_type = ""
        self.content_encoding = ""
        self.pieces: list[tuple[int, bytes]] = []

    def data(self, data: bytes) -> None:
        """A read from the upstream: the answer's head until it is whole, then its body."""
        if self.body is not None:
            self._take(data, time.perf_counter_ns())
            return
        self.buf += data
        got = self._head()
        if got is None:
            return
        head, n, status = got
        if status == 101:  # a checked switch to the WebSocket the agent asked for
            self.owner.switch(head, self.buf[n:])
            return
        self._starts(head, n, status)

    def _head(self) -> tuple[Head, int, int] | None:
        """The answer's head, its length and status, once whole (interim answers skipped, a 101
        checked, else its body's framing read); None until then, or when it is unreadable (the
        answer is then broken: a 502)."""
        owner = self.owner
        while True:
            try:
                got = split_head(self.buf, request=False)
            except HeadError as exc:
                owner.broken(f"upstream sent an unreadable answer: {exc}", before_head=True)
                return None
            if got is None:
                return None
            head, n = got
            try:
                status = int(head.start[1])
                if 100 <= status < 200 and status != 101:  # an interim answer: not forwarded
                    self.buf = self.buf[n:]
                    continue
                if status == 101:
                    problem = (
                        check_switch(head, owner.ws_key)
                        if owner.ws_key is not None
                        else "a 101 to a request that asked for no upgrade"
                    )
                    if problem is not None:
                        raise HeadError(problem)
                    return head, n, status
                no_body = owner.method == b"HEAD" or status in (204, 304)
                self.body = body_for(head, request=False, no_body=no_body)
            except (ValueError, HeadError) as exc:
                owner.broken(f"upstream sent an unreadable answer: {exc}", before_head=True)
                return None
            return head, n, status

    def _starts(self, head: Head, n: int, status: int) -> None:
        """The answer's head (``n`` bytes of the buffer) is whole: keep what tells how to read
        it, settle both sides' keep-alive, and send it on with the body's first bytes."""
        body, owner = self.body, self.owner
        assert body is not None
        self.status = status
        self.content_type = (head.get(b"content-type") or b"").decode("latin-1")
        self.content_encoding = (head.get(b"content-encoding") or b"").decode("latin-1")
        conn = head.tokens(b"connection")
        owner.up_keep = not (
            b"close" in conn
            or body.to_close
            or (head.start[0] == b"HTTP/1.0" and b"keep-alive" not in conn)
        )
        # An HTTP/1.0 agent cannot read chunks: it gets the payload, ended by the close.
        self.unchunk = owner.http10 and body.chunked
        if body.to_close or self.unchunk:
            owner.keep_alive = False
        head_out = answer_head(head, unchunk=self.unchunk, keep_alive=owner.keep_alive)
        rest = self.buf[n:]
        self.buf = b""
        self._take(rest, time.perf_counter_ns(), head_out)

    def _take(self, data: bytes, t: int, head_out: bytes = b"") -> None:
        """Parse one read of the answer's body, then forward what was parsed: as framed
        (``head_out`` first, once), or its payload to an HTTP/1.0 agent. Bytes past the body's
        end, or a read whose framing is broken, never reach the agent."""
        body, owner = self.body, self.owner
        assert body is not None
        try:
            payload = body.feed(data)
        except HeadError as exc:  # before the head went out: nothing was sent, so a 502
            owner.broken(f"upstream broke the stream: {exc}", before_head=bool(head_out))
            return
        if payload and owner.record:
            self.pieces.append((t, payload))
        if body.done:  # recorded before the agent can see the end (a kill then loses nothing)
            owner.hand_over(t, None)
        if self.unchunk:
            owner.to_agent(head_out + payload if head_out else payload)
        else:
            framed = data[: len(data) - len(body.extra)] if body.extra else data
            owner.to_agent(head_out + framed if head_out else framed)
        if body.done:
            if body.extra:
                owner.up_keep = False
            owner.end(t, None, keep_client=owner.keep_alive)

    def answer(self, end_ns: int, error: str | None) -> Answer:
        """What the recorder is handed of a recorded call's answer, ended at ``end_ns``."""
        return Answer(
            self.status, self.content_type, self.content_encoding, self.pieces, end_ns, error
        )
