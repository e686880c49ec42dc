"""A plain-asyncio network backend for httpcore (plain-HTTP endpoints), with kernel receive
timestamps.

httpcore's default backend goes through anyio and opens a cancel scope around every socket
read; at thousands of streams that bookkeeping is most of the client's CPU. This backend owns
a non-blocking socket directly: one ``loop.add_reader`` callback per connection (registered
once, removed only to pause a full buffer or on close) receives each block with
``sock.recvmsg`` into a small queue, and ``read`` hands blocks out in order. Writes go through
``loop.sock_sendall`` (a direct ``send`` when the socket has room; ``send_now`` is that
direct ``send`` alone, for a scheduled request written at its due time, ``client.gate``). The
backend's ``tick``, when set, is called before each read is handled. Connects, reads and
writes honour the timeout httpcore passes (``ConnectTimeout``, ``ReadTimeout``,
``WriteTimeout``); a read that finds data waiting sets no timer, and replay's streaming
requests pass none (it bounds each request as a whole with ``asyncio.timeout`` in the client,
one timer per request instead of one per read). Errors are mapped to httpcore's exceptions,
which httpx maps to its own as usual. HTTPS endpoints keep httpcore's default backend.

Kernel receive timestamps (Linux): with ``SO_TIMESTAMPNS`` on, every ``recvmsg`` also returns
when the kernel received the data (for TCP: the newest segment in that block), so a busy event
loop that gets to a read late no longer delays the measured arrival. ``SocketStream.rx_ns`` is
that time for the block the last ``read`` returned, already in the ``time.perf_counter_ns``
domain (0 when unknown). The kernel stamps with CLOCK_REALTIME; ``KernelStamps`` converts with
an offset CLOCK_REALTIME − CLOCK_MONOTONIC (``perf_counter_ns`` is CLOCK_MONOTONIC on Linux),
measured once per client and measured again whenever the kernel times it converts have moved
more than a second from the last measurement (NTP slews the offset by < 1 ms/s; a step of the
wall clock is picked up within about a second). This is the one place in agentload that reads
the wall clock, and only to convert kernel timestamps. Elsewhere (not Linux, a 32-bit build,
a kernel that refuses the option, ``perf_counter`` not on CLOCK_MONOTONIC) the stream receives
with plain ``recv`` and ``rx_ns`` stays 0: callers use their own clock readings.

The kernel stamps arriving packets only while some socket wants it, and it switches that on
and off lazily (a deferred work item, milliseconds later): a connection opened while
stamping is off gets its first responses unstamped. So ``KernelStamps`` keeps it on for as
long as it lives: it holds one socket of its own with the option set, and at creation waits
(at most ~0.2 s, usually < 5 ms) until a loopback probe comes back stamped. ``close()`` (or
garbage collection) lets it go. A block that still arrives without a stamp gets ``rx_ns`` 0,
as above.
"""

from __future__ import annotations

import asyncio
import contextlib
import platform
import socket
import ssl
import struct
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

import httpcore
from httpcore._utils import is_socket_readable

__all__ = ["KERNEL_STAMPS_SUPPORTED", "AsyncioBackend", "KernelStamps", "SocketStream"]

_RECV_SIZE = 1 << 16
_READ_LIMIT = 1 << 20
"""Bytes buffered in user space before the stream stops reading (until ``read`` drains it)."""

_SO_TIMESTAMPNS = 35
"""SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) in the generic Linux ABI; 64-bit ``struct timespec``."""
_TIMESPEC = struct.Struct("@qq")
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0

KERNEL_STAMPS_SUPPORTED = (
    sys.platform == "linux"
    and sys.maxsize > 2**32
    and _ANC_SIZE > 0
    # these architectures number SO_TIMESTAMPNS differently
    and not platform.machine().startswith(("alpha", "mips", "parisc", "sparc"))
    and time.get_clock_info("perf_counter").implementation == "clock_gettime(CLOCK_MONOTONIC)"
)
"""Can this platform stamp received data in the ``time.perf_counter_ns`` domain?"""

_NS = 1_000_000_000
_WARM_TRIES = 200
_WARM_PAUSE_S = 0.001


def _realtime_ns() -> int:
    return time.clock_gettime_ns(time.CLOCK_REALTIME)


def _hold_rx_stamps() -> socket.socket | None:
    """A socket with ``SO_TIMESTAMPNS`` on (keeps the kernel's receive stamping on while it is
    open), returned once a loopback probe comes back stamped or the bounded wait is over;
    None where the kernel refuses."""
    keeper = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        keeper.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
    except OSError:
        keeper.close()
        return None
    # no loopback to probe with: stamps may be missing for the first milliseconds
    with contextlib.suppress(OSError):
        _wait_until_stamped()
    return keeper


def _wait_until_stamped() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        listener.settimeout(1.0)
        with socket.create_connection(listener.getsockname(), timeout=1.0) as rx:
            tx, _ = listener.accept()
            with tx:
                tx.settimeout(1.0)
                rx.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                for _ in range(_WARM_TRIES):
                    tx.sendall(b"x")
                    _data, anc, _flags, _addr = rx.recvmsg(16, _ANC_SIZE)
                    if anc:
                        return
                    time.sleep(_WARM_PAUSE_S)


class KernelStamps:
    """Converts kernel receive times (CLOCK_REALTIME ns) to ``time.perf_counter_ns`` readings,
    and keeps the kernel stamping received packets while it lives (see the module docstring;
    ``hold=False`` for a converter only).

    ``offset_ns`` = CLOCK_REALTIME − CLOCK_MONOTONIC, read as the wall clock between two
    monotonic readings (the narrowest of three brackets, midpoint); ``to_perf(t) = t −
    offset_ns``. It is measured again when a converted time lies more than ``recheck_ns``
    (1 s) after or before the wall time of the last measurement: about once a second under
    load, never when idle, and soon after the wall clock is stepped. The clocks are injectable
    for tests.
    """

    __slots__ = (
        "__weakref__",
        "_mono",
        "_real",
        "_real_at",
        "_release",
        "measurements",
        "offset_ns",
        "recheck_ns",
    )

    def __init__(
        self,
        *,
        realtime: Callable[[], int] = _realtime_ns,
        monotonic: Callable[[], int] = time.perf_counter_ns,
        recheck_ns: int = _NS,
        hold: bool = True,
    ) -> None:
        self._real = realtime
        self._mono = monotonic
        self.recheck_ns = recheck_ns
        self.offset_ns = 0
        self._real_at = 0
        self.measurements = 0
        """How many times the offset was measured."""
        self.measure()
        keeper = _hold_rx_stamps() if hold and KERNEL_STAMPS_SUPPORTED else None
        self._release = weakref.finalize(self, keeper.close) if keeper is not None else None

    @property
    def holding(self) -> bool:
        """Is this converter keeping the kernel's receive stamping on?"""
        return self._release is not None and self._release.alive

    def close(self) -> None:
        """Stop keeping the kernel's receive stamping on (idempotent)."""
        if self._release is not None:
            self._release()

    def measure(self) -> None:
        real, mono = self._real, self._mono
        best = None
        for _ in range(3):
            m0 = mono()
            r = real()
            m1 = mono()
            if best is None or m1 - m0 < best[0]:
                best = (m1 - m0, r, (m0 + m1) // 2)
        assert best is not None
        self.offset_ns = best[1] - best[2]
        self._real_at = best[1]
        self.measurements += 1

    def to_perf(self, real_ns: int) -> int:
        if not -self.recheck_ns < real_ns - self._real_at < self.recheck_ns:
            self.measure()
        return real_ns - self.offset_ns


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
                data, anc, _flags, _addr = self._sock.recvmsg(_RECV_SIZE, _ANC_SIZE)
                for level, kind, raw in anc:
                    if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
                        sec, nsec = _TIMESPEC.unpack(raw)
                        ts = stamps.to_perf(sec * _NS + nsec)
            else:
                data = self._sock.recv(_RECV_SIZE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._exc = exc
            self._pause()
        else:
            if data:
                self._blocks.append((data, ts))
                self._buffered += len(data)
                if self._buffered > _READ_LIMIT:
                    self._pause()
            else:
                self._pause()
                self._eof = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

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
        if not self._reading and self._buffered <= _READ_LIMIT // 2 and self._exc is None:
            self._resume()
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
                sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
            except OSError:
                stamps = None
        return SocketStream(sock, loop, stamps, self)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)
