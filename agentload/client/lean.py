"""A lean HTTP/1.1 connection for one stream at a time (plain-HTTP endpoints).

httpx and httpcore serve many requests over shared pools, and pay for it on every request:
locks that each give the event loop a turn (at 16 busy streams a turn costs milliseconds, so
a send left several milliseconds after its due time) and several layers of objects per
request and per read. The client gives each stream a connection of its own, used by one
request at a time, so none of that is needed: a ``LeanConnection`` is a ``netback`` socket
(kernel receive times kept) read with the project's own strict HTTP/1.1 framing
(``http1``, the recording proxy's): a malformed status line, header, length or chunk ends the
connection, never a guess (a head read well once is known by its bytes after that: a server
writes the same head again and again). A request is built whole, stamped, and written in one
call; the answer's body is handed out one network read at a time (``LeanAnswer.aiter_raw``),
the chunks of a read joined, so each read keeps its one time.

A connection is reused while both sides keep it alive (an HTTP/1.1 answer without
``Connection: close``, read to its end, nothing after it); an answer left unread is not
drained, its connection is closed. A request written into a kept-alive connection that the
server closed as it went out (its idle timeout) fails before any answer byte; it is sent once
more on a new connection (RFC 9112 9.3.1); a fresh connection's failure never is.

Failures raise ``LeanError`` with an ``ErrorKind``: ``connect`` (no connection), ``reset``
(the connection broke, or the server broke the protocol), ``client_error`` (a header that
cannot be written). Timeouts are the caller's: it bounds each request as a whole
(``StreamClient.chat``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from urllib.parse import urlsplit

import httpcore

from agentload.client.gate import Due
from agentload.client.http1 import Body, Head, HeadError, body_for, field_line, split_head
from agentload.client.netback import AsyncioBackend, SocketStream
from agentload.measure.errorkinds import ErrorKind

__all__ = ["LeanAnswer", "LeanConnection", "LeanError", "read_upto"]

_READ = 1 << 14
"""Bytes handed to the answer's parser at a time (a network read may hold more): between two,
the connection's ``tick`` lets a send that fell due leave (``netback``)."""
_HEAD_READ = 1 << 17
"""Bytes taken at a time while an answer's head arrives: a whole network read, so the body's
first bytes behind the head are not split off and copied (a pumped body's reads are handed
whole too)."""


class LeanError(Exception):
    """A request on a lean connection failed: ``kind`` and what happened."""

    def __init__(self, kind: ErrorKind, text: str) -> None:
        super().__init__(text)
        self.kind = kind


def _reset(text: str) -> LeanError:
    return LeanError(ErrorKind.RESET, text)


class LeanConnection:
    """One keep-alive HTTP/1.1 connection to the target, for one request at a time."""

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str],
        backend: AsyncioBackend,
        connect_timeout_s: float,
        keepalive_s: float,
    ) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or ""
        self.port = parts.port or 80
        fixed = {"host": parts.netloc.rpartition("@")[2], "user-agent": "agentload"}  # no userinfo
        fixed.update((k.lower(), v) for k, v in headers.items() if k.lower() != "host")
        self._fixed = _fields(fixed)
        self.backend = backend
        self.connect_timeout_s = connect_timeout_s
        self.keepalive_s = keepalive_s
        self.stream: SocketStream | None = None
        self._idle_since = 0.0
        self.served = False
        """Whether this socket answered a request before (a failure may be its idle close)."""
        self.answering = False
        """An answer is being read (the connection is not reusable until it settled)."""

    @property
    def open(self) -> bool:
        """A socket is connected."""
        return self.stream is not None

    async def connect(self) -> None:
        """Open the socket (one left from before is closed first)."""
        await self.close()
        try:
            stream = await self.backend.connect_tcp(self.host, self.port, self.connect_timeout_s)
        except httpcore.ConnectTimeout as exc:
            raise LeanError(ErrorKind.CONNECT, f"ConnectTimeout: {exc}") from None
        except httpcore.ConnectError as exc:
            raise LeanError(ErrorKind.CONNECT, f"ConnectError: {exc}") from None
        assert isinstance(stream, SocketStream)
        self.stream = stream
        self._idle_since = time.monotonic()
        self.served = False
        self.answering = False

    async def close(self) -> None:
        """Close the socket, if open."""
        self.drop()

    def drop(self) -> None:
        """Close the socket now, if open (nothing to await: safe in a cancelled task)."""
        stream, self.stream = self.stream, None
        self.answering = False
        if stream is not None:
            stream.close()

    async def request(
        self,
        method: str,
        target: str,
        body: bytes,
        headers: Mapping[str, str] | None,
        stamp: Callable[[], None],
        due: Due | None = None,
    ) -> LeanAnswer:
        """Send one request (``target``: path and query) and read its status and headers;
        ``stamp`` is called just before the first bytes go to the socket; with ``due``, the
        gate writes them at the due time (``client.gate``). Once more on a new connection
        when a kept-alive one was closed under it (see the module docstring)."""
        try:
            extra = _fields(headers) if headers else b""
        except HeadError as exc:
            raise LeanError(ErrorKind.CLIENT_ERROR, f"request not sent: {exc}") from None
        length = b"content-length: %d\r\n" % len(body) if body or method == "POST" else b""
        data = b"%s %s HTTP/1.1\r\n%s%s%s\r\n%s" % (
            method.encode(),
            target.encode(),
            self._fixed,
            extra,
            length,
            body,
        )
        if self.stream is not None and time.monotonic() - self._idle_since > self.keepalive_s:
            await self.close()  # idle past the server's keep-alive: it may be closing it
        if self.stream is None:
            await self.connect()
        try:
            return await self._exchange(data, method, stamp, due)
        except LeanError as exc:
            if not self.served or exc.kind != ErrorKind.RESET:
                raise
        await self.connect()
        return await self._exchange(data, method, stamp, due)

    async def _exchange(
        self, data: bytes, method: str, stamp: Callable[[], None], due: Due | None
    ) -> LeanAnswer:
        """Write a whole request (its first bytes by ``due``'s gate) and read the answer's
        head (an informational 1xx answer is skipped); the connection is closed when that
        fails."""
        stream = self.stream
        assert stream is not None
        self.answering = True
        if due is None:
            stamp()
        else:
            data = data[await _send_at(stream, data, stamp, due, self) :]
        buf = b""
        try:
            await stream.write(data)
            while True:
                got = _answer_head(buf, method) if buf else None
                if got is None:
                    chunk = await stream.read(_HEAD_READ)
                    if not chunk:
                        raise _reset("ReadError: the server closed the connection before answering")
                    buf += chunk
                    continue
                known, n = got
                if known is None:
                    buf = buf[n:]
                    continue  # 100 Continue, 103 Early Hints: the real answer follows
                head, framing, alive = known
                framing = framing.again()
                first = framing.feed(buf, n) if len(buf) > n else b""
                return LeanAnswer(self, head, framing, alive, first)
        except HeadError as exc:
            await self.close()
            raise _reset(f"RemoteProtocolError: {exc}") from None
        except LeanError:
            await self.close()
            raise
        except (httpcore.ReadError, httpcore.WriteError) as exc:
            await self.close()
            raise _reset(f"{type(exc).__name__}: {exc}") from None
        except BaseException:
            # cancelled (the request's time ran out) before the answer's head: the connection
            # is mid-exchange, so it can carry nothing else
            self.drop()
            raise

    async def body(self, alive: bool, framing: Body, first: bytes) -> AsyncGenerator[bytes, None]:
        """An answer's body, one network read at a time; the connection is kept for the next
        request when the answer ended and both sides keep it alive, else closed."""
        stream = self.stream
        assert stream is not None
        ended = framing.done
        try:
            if first:
                yield first
            while not framing.done:
                try:
                    chunk = await stream.read(_READ)
                except httpcore.ReadError as exc:
                    raise _reset(f"ReadError: {exc}") from None
                if not chunk:
                    if framing.to_close:
                        ended = True
                        break
                    raise _reset(_CLOSED_MID_ANSWER)
                try:
                    got = framing.feed(chunk)
                except HeadError as exc:
                    raise _reset(f"RemoteProtocolError: {exc}") from None
                if got:
                    yield got
            ended = ended or framing.done
        finally:
            await self.settle(_reusable(alive, framing, ended))

    async def pump(
        self, alive: bool, framing: Body, first: bytes, feed: Callable[[bytes, int], None]
    ) -> None:
        """An answer's body to its end, each network read's payload handed to ``feed(data,
        rx_ns)`` from the socket's callback (``netback.SocketStream.pump``); the connection
        is kept or closed as after ``body``."""
        stream = self.stream
        assert stream is not None
        ended = framing.done

        def sink(data: bytes, rx_ns: int) -> bool:
            got = framing.feed(data)
            if got:
                feed(got, rx_ns)
            return framing.done

        try:
            if first:
                feed(first, stream.rx_ns)
            if not framing.done:
                try:
                    finished = await stream.pump(sink)
                except httpcore.ReadError as exc:
                    raise _reset(f"ReadError: {exc}") from None
                except HeadError as exc:
                    raise _reset(f"RemoteProtocolError: {exc}") from None
                if not finished and not framing.to_close:
                    raise _reset(_CLOSED_MID_ANSWER)
                ended = True
        finally:
            await self.settle(_reusable(alive, framing, ended))

    async def settle(self, keep: bool) -> None:
        """After an answer: keep the connection for the next request, or close it."""
        self.answering = False
        if keep and self.stream is not None:
            self.served = True
            self._idle_since = time.monotonic()
        else:
            await self.close()


async def _send_at(
    stream: SocketStream, data: bytes, stamp: Callable[[], None], due: Due, conn: LeanConnection
) -> int:
    """Stamp and write ``data`` at ``due``'s time, from the gate; how many bytes went. A wait
    cancelled before the write leaves the connection as it was; after it, mid-exchange."""
    sent = -1

    def now() -> int:
        nonlocal sent
        stamp()
        sent = stream.send_now(data)
        return sent

    gate, t = due
    try:
        return await gate.fire_at(t, now)
    except BaseException:
        if sent < 0:
            conn.answering = False
        else:
            conn.drop()
        raise


async def read_upto(parts: AsyncIterator[bytes], limit: int | None) -> bytes:
    """A body's reads joined: all of them, or (``limit``) those up to the one that reaches
    ``limit`` bytes (the rest is left unread)."""
    got: list[bytes] = []
    size = 0
    async for part in parts:
        got.append(part)
        size += len(part)
        if limit is not None and size >= limit:
            break
    return b"".join(got)


_CLOSED_MID_ANSWER = "RemoteProtocolError: the server closed the connection mid-answer"


def _reusable(alive: bool, framing: Body, ended: bool) -> bool:
    """Whether a connection can carry the next request after this answer: it was read to its
    end, nothing came after it, and both sides keep the connection alive (``alive``: the
    answer's head does)."""
    return ended and alive and not framing.to_close and not framing.extra


_Known = tuple[Head, Body, bool]
"""An answer head as read: the head, its body's framing (never fed: ``Body.again``), and
whether it keeps the connection alive."""
_KNOWN: dict[tuple[bytes, bool], _Known] = {}
"""Answer heads read before, by their bytes and whether they answered a HEAD request: a
server writes the same head again and again (its ``date`` changes once a second), and a head
is read in one look-up instead of a parse. Only heads that read well are kept."""
_KNOWN_MAX = 256
_KNOWN_BYTES = 4096
"""Longer heads are parsed each time (the look-up table stays under a megabyte)."""


def _answer_head(buf: bytes, method: str) -> tuple[_Known | None, int] | None:
    """The answer head at the start of ``buf`` (as ``_Known``: None for an informational 1xx
    answer, which another follows) and its length; None until all of it is there."""
    no_body = method == "HEAD"
    end = buf.find(b"\r\n\r\n")
    if end >= 0 and (known := _KNOWN.get((buf[: end + 4], no_body))) is not None:
        return known, end + 4
    got = split_head(buf, request=False)
    if got is None:
        return None
    head, n = got
    status = int(head.start[1])
    if 100 <= status < 200 and status != 101:
        return None, n
    if status == 101:
        raise _reset("RemoteProtocolError: the server switched protocols")
    framing = body_for(head, request=False, no_body=no_body or status in (204, 304))
    alive = head.start[0] == b"HTTP/1.1" and b"close" not in head.tokens(b"connection")
    known = (head, framing, alive)
    if n <= _KNOWN_BYTES:
        if len(_KNOWN) >= _KNOWN_MAX:
            _KNOWN.clear()
        _KNOWN[buf[:n], no_body] = known
    return known, n


def _fields(headers: Mapping[str, str]) -> bytes:
    """Header lines (each checked: a token name, a value without control bytes)."""
    return b"".join(
        field_line(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()
    )


class LeanAnswer:
    """An answer's status and headers; its body read once, by ``aiter_raw``, ``pump`` or
    ``aread``."""

    def __init__(
        self, conn: LeanConnection, head: Head, framing: Body, alive: bool, first: bytes
    ) -> None:
        self.status_code = int(head.start[1])
        self._head = head
        self._alive = alive
        self.network_stream: object = conn.stream
        self._conn = conn
        self._framing = framing
        self._first = first
        self._body: AsyncGenerator[bytes, None] | None = None

    def header(self, name: str) -> str | None:
        """The first value of header ``name``, or None."""
        v = self._head.get(name.lower().encode())
        return None if v is None else v.decode("latin-1")

    def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body, one network read at a time."""
        if self._body is None:
            self._body = self._conn.body(self._alive, self._framing, self._first)
        return self._body

    async def pump(self, feed: Callable[[bytes, int], None]) -> None:
        """The body to its end: ``feed(data, rx_ns)`` for each network read, called from the
        socket's callback (``LeanConnection.pump``)."""
        await self._conn.pump(self._alive, self._framing, self._first, feed)

    async def aread(self, limit: int | None = None) -> bytes:
        """The whole body, or (``limit``) its first ``limit`` bytes or a little more (the rest
        is left unread, and the connection closed)."""
        got = await read_upto(self.aiter_raw(), limit)
        await self.aclose()
        return got

    async def aclose(self) -> None:
        """Done with the answer: an unread rest closes its connection."""
        if self._body is not None:
            await self._body.aclose()
        if self._conn.answering:  # its body was never started, or not read to its end
            await self._conn.settle(False)
