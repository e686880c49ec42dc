"""WebSocket pass-through for the recording proxy (RFC 6455): Codex's Responses over WebSocket.

An agent's ``GET`` with ``Upgrade: websocket`` is checked strictly (``check_upgrade``: HTTP/1.1,
``GET``, exactly one ``Upgrade`` field that is exactly ``websocket``, ``Connection`` naming
``upgrade``, exactly one ``Sec-WebSocket-Key`` of 16 bytes in base64, exactly one
``Sec-WebSocket-Version: 13``, no body) and forwarded upstream; a malformed one is the relay's
400 and never leaves it. The upstream's ``101 Switching Protocols`` is checked too
(``check_switch``: ``Upgrade: websocket``, ``Connection: upgrade``, the ``Sec-WebSocket-Accept``
of the agent's key) and relayed; any other answer (404, 426, ...) is relayed as an ordinary
answer, and the agent falls back to plain HTTP by itself.

After the 101 the two connections become one ``Tunnel``: each side's bytes go to the other as
they come, once their frame heads were read (``Frames``: an incremental reader of frame heads
only, at most 14 bytes held; payloads pass through unread and unbuffered). The heads are
checked as an intermediary must: an agent's frames are masked and the upstream's are not,
reserved opcodes and bits are refused (RSV1 only with ``permessage-deflate`` negotiated),
control frames are whole and at most 125 bytes, continuations follow a first frame. A frame
that breaks these ends the tunnel (both connections closed). A slow side pauses the other's
reads (the transports' flow control), so nothing is buffered without bound. Either side's
close ends both; the proxy's stop sends each side a close frame (1001, going away) where the
stream is between frames, and closes both connections.

The messages are not recorded: each agent message (a Responses ``response.create``) is counted
(``on_message``) and noted as an ``unread_request``, so the trace says what it does not hold;
the tunnel's end is a ``websocket`` event (``open_tunnel``: the tunnel of a relayed switch, its
events to the recorder).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import os
import time
from collections.abc import Callable

from agentload.client.http1 import Head
from agentload.record.sink import Sink
from agentload.trace.events import UnreadRequest, WebSocket
from agentload.wire import api_for_path

__all__ = [
    "FrameError",
    "Frames",
    "Tunnel",
    "accept_key",
    "asks_websocket",
    "check_switch",
    "check_upgrade",
    "open_tunnel",
]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
_DATA = (1, 2)
"""Text and binary: the opcodes that start a message."""
_OPCODES = frozenset({0, 1, 2, 8, 9, 10})
_GOING_AWAY = (1001).to_bytes(2, "big")


class FrameError(Exception):
    """A WebSocket frame head the proxy will not pass on."""


def asks_websocket(head: Head) -> bool:
    """Whether a request asks for a WebSocket (any ``Upgrade`` field naming it)."""
    return any(k == b"upgrade" and b"websocket" in v.lower() for k, v in head.headers)


def _one(head: Head, name: bytes) -> bytes | None:
    """The value of ``name`` when it comes exactly once, else None."""
    got = [v for k, v in head.headers if k == name]
    return got[0] if len(got) == 1 else None


def check_upgrade(head: Head) -> str | None:
    """What is wrong with a WebSocket upgrade request (None: it may be forwarded)."""
    method, _, version = head.start
    if method != b"GET" or version != b"HTTP/1.1":
        return "a websocket upgrade is a GET in HTTP/1.1"
    upgrade = _one(head, b"upgrade")
    if upgrade is None or upgrade.lower() != b"websocket":
        return "a websocket upgrade has exactly one upgrade field: websocket"
    if b"upgrade" not in head.tokens(b"connection"):
        return "a websocket upgrade names upgrade in its connection field"
    if _one(head, b"sec-websocket-version") != b"13":
        return "a websocket upgrade has exactly one sec-websocket-version: 13"
    key = _one(head, b"sec-websocket-key")
    try:
        raw = base64.b64decode(key, validate=True) if key is not None else b""
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != 16:
        return "a websocket upgrade has exactly one sec-websocket-key of 16 bytes in base64"
    if head.get(b"transfer-encoding") is not None or head.values(b"content-length") not in (
        [],
        [b"0"],
    ):
        return "a websocket upgrade has no body"
    return None


def accept_key(key: bytes) -> bytes:
    """The ``Sec-WebSocket-Accept`` that answers ``key``."""
    return base64.b64encode(hashlib.sha1(key + _GUID, usedforsecurity=False).digest())


def check_switch(head: Head, key: bytes) -> str | None:
    """What is wrong with an upstream's 101 to an upgrade with ``key`` (None: relay it)."""
    upgrade = _one(head, b"upgrade")
    if upgrade is None or upgrade.lower() != b"websocket":
        return "a 101 without exactly one upgrade: websocket"
    if b"upgrade" not in head.tokens(b"connection"):
        return "a 101 without connection: upgrade"
    if _one(head, b"sec-websocket-accept") != accept_key(key):
        return "a 101 whose sec-websocket-accept does not answer the key"
    if head.get(b"transfer-encoding") is not None or head.get(b"content-length") is not None:
        return "a 101 with a body's framing"
    return None


def deflate_negotiated(head: Head) -> bool:
    """Whether a 101 agreed on ``permessage-deflate`` (frames may then set RSV1)."""
    return any(
        v.startswith(b"permessage-deflate") for v in head.values(b"sec-websocket-extensions")
    )


class Frames:
    """The frame heads of one direction, read as the bytes pass (see the module docstring).
    ``masked``: the agent's direction; ``rsv1``: ``permessage-deflate`` was negotiated;
    ``on_message(opcode)`` for the first frame of each text or binary message."""

    def __init__(
        self, *, masked: bool, rsv1: bool, on_message: Callable[[int], None] | None = None
    ) -> None:
        self.masked = masked
        self.rsv1 = rsv1
        self.on_message = on_message
        self.messages = 0
        self.closed = False
        """A close frame came."""
        self._head = bytearray()
        self._left = 0
        """Payload bytes of the current frame still to pass."""
        self._in_message = False

    @property
    def between_frames(self) -> bool:
        return not self._left and not self._head

    def feed(self, data: bytes) -> bytes:
        """The bytes of ``data`` (and of a head held from before) that may go on: all but a
        frame head not yet whole. Raises ``FrameError`` for a head that may not."""
        held = bytes(self._head)
        head = self._head
        i, n = 0, len(data)
        while True:
            if self._left:
                if i >= n:
                    break
                take = min(self._left, n - i)
                i += take
                self._left -= take
                continue
            need = 2
            if len(head) >= 2:
                size = head[1] & 0x7F
                need += (2 if size == 126 else 8 if size == 127 else 0) + (
                    4 if head[1] & 0x80 else 0
                )
            if len(head) >= need:
                self._frame(head)
                head.clear()
                continue
            if i >= n:
                break
            take = min(need - len(head), n - i)
            head += data[i : i + take]
            i += take
        keep = len(head)
        if held:
            data = held + data
        return data[: len(data) - keep] if keep else data

    def _frame(self, head: bytearray) -> None:
        b0, b1 = head[0], head[1]
        opcode = b0 & 0x0F
        if self.closed:
            raise FrameError("a frame after the close frame")
        if bool(b1 & 0x80) != self.masked:
            side = "an agent's frame must be masked" if self.masked else "a server's must not"
            raise FrameError(f"masking: {side}")
        if b0 & 0x30 or (b0 & 0x40 and not self.rsv1):
            raise FrameError("a reserved bit set without an extension that defines it")
        if opcode not in _OPCODES:
            raise FrameError(f"reserved opcode {opcode}")
        size = b1 & 0x7F
        if size == 126:
            size = int.from_bytes(head[2:4], "big")
        elif size == 127:
            size = int.from_bytes(head[2:10], "big")
            if size >> 63:
                raise FrameError("a payload length over 2^63")
        fin = bool(b0 & 0x80)
        if opcode >= 8:
            if not fin or size > 125:
                raise FrameError("a control frame fragmented or over 125 bytes")
            if opcode == 8:
                self.closed = True
        elif opcode == 0:
            if not self._in_message:
                raise FrameError("a continuation frame outside a message")
            self._in_message = not fin
        else:
            if self._in_message:
                raise FrameError("a new message before the last one ended")
            self._in_message = not fin
            self.messages += 1
            if self.on_message is not None:
                self.on_message(opcode)
        self._left = size


class _End(asyncio.Protocol):
    """One side of a tunnel (the transport's protocol once the 101 went out)."""

    def __init__(self, tunnel: Tunnel, client: bool) -> None:
        self.tunnel = tunnel
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.tunnel.pipe(self.client, data)

    def eof_received(self) -> bool | None:
        self.tunnel.shut(None)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.tunnel.shut(None)

    def pause_writing(self) -> None:
        self.tunnel.pause(self.client, True)

    def resume_writing(self) -> None:
        self.tunnel.pause(self.client, False)


class Tunnel:
    """An agent's WebSocket and its upstream's, joined (see the module docstring).
    ``on_message(opcode)`` for each agent message; ``on_close(tunnel, reason)`` once, when it
    ended; ``on_activity()`` for each read, either side."""

    def __init__(
        self,
        client: asyncio.Transport,
        up: asyncio.Transport,
        *,
        deflate: bool,
        on_message: Callable[[int], None],
        on_close: Callable[[Tunnel, str], None],
        on_activity: Callable[[], None],
    ) -> None:
        self.client = client
        self.up = up
        self.from_client = Frames(masked=True, rsv1=deflate, on_message=on_message)
        self.from_up = Frames(masked=False, rsv1=deflate)
        self.on_close = on_close
        self.on_activity = on_activity
        self.done = False
        self.bytes_in = 0
        self.bytes_out = 0
        client.set_protocol(_End(self, True))
        up.set_protocol(_End(self, False))

    def start(self, from_client: bytes, from_up: bytes) -> None:
        """Pass on what each side sent before the tunnel was joined."""
        if from_up:
            self.pipe(False, from_up)
        if from_client and not self.done:
            self.pipe(True, from_client)

    def pipe(self, from_client: bool, data: bytes) -> None:
        if self.done:
            return
        self.on_activity()
        frames, dest = (self.from_client, self.up) if from_client else (self.from_up, self.client)
        try:
            out = frames.feed(data)
        except FrameError as exc:
            side = "agent" if from_client else "upstream"
            self.shut(f"{side} sent a bad websocket frame: {exc}", abort=True)
            return
        if from_client:
            self.bytes_in += len(out)
        else:
            self.bytes_out += len(out)
        if out:
            dest.write(out)

    def pause(self, writer_is_client: bool, paused: bool) -> None:
        """A side that cannot take more pauses the reads of the other."""
        src = self.up if writer_is_client else self.client
        if self.done or src.is_closing():
            return
        if paused:
            src.pause_reading()
        else:
            src.resume_reading()

    def stop(self) -> None:
        """The proxy stops: a close frame (1001) to each side that is between frames, then
        both connections close."""
        if self.done:
            return
        if self.from_up.between_frames and not self.from_up.closed:
            self.client.write(b"\x88\x02" + _GOING_AWAY)
        if self.from_client.between_frames and not self.from_client.closed:
            mask = os.urandom(4)
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(_GOING_AWAY))
            self.up.write(b"\x88\x82" + mask + payload)
        self.shut("proxy stopped")

    def shut(self, reason: str | None, *, abort: bool = False) -> None:
        """End the tunnel (``reason``: why, None when a side closed)."""
        if self.done:
            return
        self.done = True
        for t in (self.client, self.up):
            if abort:
                t.abort()
            else:
                t.close()
        self.on_close(self, reason or "closed")


def open_tunnel(
    agent: asyncio.Transport,
    up: asyncio.Transport,
    switch: Head,
    path: str,
    sink: Sink | None,
    *,
    on_close: Callable[[Tunnel], None],
    on_activity: Callable[[], None],
) -> Tunnel:
    """The ``Tunnel`` of a relayed switch (the upstream's 101 ``switch`` to a request for
    ``path``): each agent message noted to ``sink`` (the recorder, when recording) as an
    ``unread_request``, its end as a ``websocket`` event after ``on_close``."""
    api = api_for_path(path)
    opened = time.perf_counter_ns()

    def message(opcode: int) -> None:
        if sink is not None:
            unread = UnreadRequest(
                api=api,
                path=path[:200],
                transport="websocket",
                error="a message over a WebSocket is relayed, not recorded",
            )
            sink.note(unread, time.perf_counter_ns())

    def closed(t: Tunnel, reason: str) -> None:
        on_close(t)
        if sink is not None:
            ended = WebSocket(
                path=path[:200],
                api=api,
                open_ns=opened,
                agent_messages=t.from_client.messages,
                upstream_messages=t.from_up.messages,
                agent_bytes=t.bytes_in,
                upstream_bytes=t.bytes_out,
                end=reason,
            )
            sink.note(ended, time.perf_counter_ns())

    deflate = deflate_negotiated(switch)
    return Tunnel(
        agent, up, deflate=deflate, on_message=message, on_close=closed, on_activity=on_activity
    )
