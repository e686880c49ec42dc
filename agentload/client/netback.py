"""A plain-asyncio network backend for httpcore (plain-HTTP endpoints), with kernel receive
timestamps.

httpcore's default backend goes through anyio and opens a cancel scope around every socket
read; at thousands of streams that bookkeeping is most of the client's CPU. This backend owns
a non-blocking socket directly: one ``loop.add_reader`` callback per connection (registered
once, removed only to pause a full buffer or on close) receives each block with
``sock.recvmsg`` into a small queue, and ``read`` hands blocks out in order; or, while a
``pump`` runs, hands each block straight to its sink from that callback (an answer's body read
with no task step per read: ``lean.LeanAnswer.pump``). Writes go through
``loop.sock_sendall`` (a direct ``send`` when the socket has room; ``send_now`` is that
direct ``send`` alone, for a scheduled request written at its due time, ``client.gate``). The
backend's ``tick``, when set, is called before each read is handled. Connects, reads and
writes honour the timeout httpcore passes (``ConnectTimeout``, ``ReadTimeout``,
``WriteTimeout``); a read that finds data waiting sets no timer, and replay's streaming
requests pass none (the client bounds each request as a whole: ``deadline.Deadlines``, one
timer per tick instead of one per read). Errors are mapped to httpcore's exceptions,
which httpx maps to its own as usual. HTTPS endpoints keep httpcore's default backend.

Kernel receive timestamps (``kstamps``): with ``SO_TIMESTAMPNS`` on, every ``recvmsg`` also
returns when the kernel received the data; ``SocketStream.rx_ns`` is that time for the block the
last ``read`` returned (or the block handed to a ``pump``'s sink), in the ``time.perf_counter_ns``
domain (0 when unknown).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
from httpcore._utils import is_socket_readable

from agentload.client.kstamps import (
    KERNEL_STAMPS_SUPPORTED,
    SO_TIMESTAMPNS,
    KernelStamps,
    recv_stamped,
)

__all__ = ["AsyncioBackend", "SocketStream"]

_RECV_SIZE = 1 << 16
_READ_LIMIT = 1 << 20
"""Bytes buffered in user space before the stream stops reading (until ``read`` drains it)."""


class SocketStream(httpcore.AsyncNetworkStream):
    """One connection: a socket read by a loop reader callback (see the module docstring)."""

    def __init__(
        self,
        sock: socket.socket,
        loop: asyncio.AbstractEventLoop,
        stamps: KernelStamps | None,
        backend: AsyncioBackend | None = None,
    ) -> None:
        self._sock = sock
        self._backend = backend
        self._fd = sock.fileno()
        self._loop = loop
        self._stamps = stamps
        self.stamped = stamps is not None
        """Does ``rx_ns`` carry kernel receive times on this connection?"""
        self.rx_ns = 0
        """Kernel arrival (``perf_counter_ns`` domain) of the block the last ``read`` returned;
        0 when unknown."""
        self._blocks: deque[tuple[bytes, int]] = deque()
        self._buffered = 0
        self._waiter: asyncio.Future[None] | None = None
        self._eof = False
        self._exc: OSError | None = None
        self._reading = False
        self._closed = False
        self._sink: Callable[[bytes, int], bool] | None = None
        self._pumped: asyncio.Future[bool] | None = None
        self._resume()

    def _resume(self) -> None:
        if not self._reading and not self._eof and not self._closed:
            self._reading = True
            self._loop.add_reader(self._fd, self._on_readable)

    def _pause(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self._fd)

    def _on_readable(self) -> None:
        backend = self._backend
        if backend is not None and backend.tick is not None:
            backend.tick()
        stamps = self._stamps
        ts = 0
        try:
            if stamps is not None:
                data, ts = recv_stamped(self._sock, _RECV_SIZE, stamps)
            else:
                data = self._sock.recv(_RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._exc = exc
            self._pause()
        else:
            if data and self._sink is not None:
                self.rx_ns = ts
                try:
                    if self._sink(data, ts):
                        self._end_pump(True)
                except Exception as exc:  # the sink's own failure ends the pump with it
                    self._end_pump(exc)
                return
            if data:
                self._blocks.append((data, ts))
                self._buffered += len(data)
                if self._buffered > _READ_LIMIT:
                    self._pause()
            else:
                self._pause()
                self._eof = True
        if self._sink is not None:  # ended or failed while pumping
            self._end_pump(httpcore.ReadError(str(self._exc)) if self._exc else False)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _end_pump(self, result: bool | Exception) -> None:
        pumped = self._pumped
        self._sink = self._pumped = None
        if pumped is not None and not pumped.done():
            if isinstance(result, Exception):
                pumped.set_exception(result)
            else:
                pumped.set_result(result)

    async def pump(self, sink: Callable[[bytes, int], bool]) -> bool:
        """Hand each block to ``sink(data, rx_ns)`` as it arrives, from the socket's reader
        callback (no task step per read; ``rx_ns`` as ``rx_ns`` says), until ``sink`` answers
        True (then True) or the peer ended the connection or it was closed (False); a failed
        socket raises ``httpcore.ReadError``, and the sink's own exception is raised here."""
        blocks = self._blocks
        while blocks:
            data, ts = blocks.popleft()
            self._buffered -= len(data)
            self.rx_ns = ts
            if sink(data, ts):
                self._refill()
                return True
        if self._exc is not None:
            raise httpcore.ReadError(str(self._exc))
        if self._eof or self._closed:
            return False
        pumped: asyncio.Future[bool] = self._loop.create_future()
        self._sink, self._pumped = sink, pumped
        self._refill()
        try:
            return await pumped
        finally:
            self._sink = self._pumped = None

    def _refill(self) -> None:
        """Read from the socket again once the buffer was drained below half its limit."""
        if not self._reading and self._buffered <= _READ_LIMIT // 2 and self._exc is None:
            self._resume()

    async def _wait_readable(self) -> None:
        """Until a block is buffered, or the connection failed, ended or was closed."""
        while not (self._blocks or self._exc is not None or self._eof or self._closed):
            waiter = self._loop.create_future()
            self._waiter = waiter
            try:
                await waiter
            finally:
                self._waiter = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        backend = self._backend
        if backend is not None and backend.tick is not None:
            backend.tick()
        blocks = self._blocks
        if not blocks:
            if timeout is None:
                await self._wait_readable()
            else:
                try:
                    async with asyncio.timeout(timeout):
                        await self._wait_readable()
                except TimeoutError:
                    raise httpcore.ReadTimeout(f"no data within {timeout:g}s") from None
            if not blocks:
                if self._exc is not None:
                    raise httpcore.ReadError(str(self._exc))
                return b""
        data, ts = blocks.popleft()
        if len(data) > max_bytes:
            blocks.appendleft((data[max_bytes:], ts))
            data = data[:max_bytes]
        self.rx_ns = ts
        self._buffered -= len(data)
        self._refill()
        return data

    def send_now(self, buffer: bytes) -> int:
        """Write what the socket takes now, without waiting; how many bytes went (0 also when
        the socket failed: the ``write`` of the rest raises it)."""
        try:
            return self._sock.send(buffer)
        except OSError:
            return 0

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        try:
            async with asyncio.timeout(timeout):
                await self._loop.sock_sendall(self._sock, buffer)
        except TimeoutError:
            raise httpcore.WriteTimeout(f"could not write within {timeout:g}s") from None
        except OSError as exc:
            raise httpcore.WriteError(str(exc)) from exc

    async def aclose(self) -> None:
        self.close()

    def close(self) -> None:
        """Close the socket now (also from a cancelled task, with nothing to await)."""
        if self._closed:
            return
        self._pause()
        self._closed = True
        if self._sink is not None:
            self._end_pump(False)
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)
        self._sock.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("TLS is handled by httpcore's default backend")

    def get_extra_info(self, info: str) -> Any:
        sock = self._sock
        if info == "is_readable":
            if self._closed:
                return True
            return bool(self._blocks or self._eof or self._exc) or is_socket_readable(sock)
        if info == "socket":
            return sock
        try:
            if info == "client_addr":
                return sock.getsockname()
            if info == "server_addr":
                return sock.getpeername()
        except OSError:
            return None
        return None


def _addresses(host: str, port: int) -> list[tuple[int, Any]] | None:
    """Numeric hosts need no resolver (asyncio's would run getaddrinfo in a thread)."""
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, host)
        except (OSError, ValueError):
            continue
        return [(family, (host, port) if family == socket.AF_INET else (host, port, 0, 0))]
    return None


async def _connect(
    loop: asyncio.AbstractEventLoop, host: str, port: int, local_address: str | None
) -> socket.socket:
    addrs = _addresses(host, port)
    if addrs is None:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addrs = [(info[0], info[4]) for info in infos]
    last: OSError = OSError(f"{host}: no address")
    for family, addr in addrs:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if local_address:
                sock.bind((local_address, 0))
            await loop.sock_connect(sock, addr)
        except OSError as exc:
            sock.close()
            last = exc
            continue
        except BaseException:
            sock.close()
            raise
        return sock
    raise last


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """``httpcore.AsyncConnectionPool(network_backend=AsyncioBackend(stamps=...))``; with
    ``stamps`` (and ``KERNEL_STAMPS_SUPPORTED``) each connection asks the kernel for receive
    timestamps and falls back to plain reads when the kernel refuses."""

    def __init__(self, stamps: KernelStamps | None = None) -> None:
        self.stamps = stamps if KERNEL_STAMPS_SUPPORTED else None
        self.tick: Callable[[], None] | None = None
        """Called before each socket read is handled, on every connection of this backend
        (replay's ``Waker.poll``: a send due between two reads of a loop turn leaves then)."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                sock = await _connect(loop, host, port, local_address)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"connect to {host}:{port} timed out") from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        try:
            for option in socket_options or ():
                sock.setsockopt(*option)
        except OSError as exc:
            sock.close()
            raise httpcore.ConnectError(str(exc)) from exc
        stamps = self.stamps
        if stamps is not None:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
            except OSError:
                stamps = None
        return SocketStream(sock, loop, stamps, self)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
