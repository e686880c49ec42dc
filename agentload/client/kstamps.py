"""Kernel receive timestamps converted to ``time.perf_counter_ns`` readings (Linux).

With ``SO_TIMESTAMPNS`` on, every ``recvmsg`` also returns
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

import contextlib
import platform
import socket
import struct
import sys
import time
import weakref
from collections.abc import Callable

__all__ = ["ANC_SIZE", "KERNEL_STAMPS_SUPPORTED", "SO_TIMESTAMPNS", "KernelStamps", "recv_stamped"]

SO_TIMESTAMPNS = 35
"""SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) in the generic Linux ABI; 64-bit ``struct timespec``."""
_TIMESPEC = struct.Struct("@qq")
ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0

KERNEL_STAMPS_SUPPORTED = (
    sys.platform == "linux"
    and sys.maxsize > 2**32
    and ANC_SIZE > 0
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
        keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
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
                rx.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                for _ in range(_WARM_TRIES):
                    tx.sendall(b"x")
                    _data, anc, _flags, _addr = rx.recvmsg(16, ANC_SIZE)
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


def recv_stamped(sock: socket.socket, size: int, stamps: KernelStamps) -> tuple[bytes, int]:
    """Up to ``size`` bytes from ``sock`` (``recvmsg``) and when the kernel received them, in
    the ``perf_counter_ns`` domain (0 when the kernel gave no stamp)."""
    data, anc, _flags, _addr = sock.recvmsg(size, ANC_SIZE)
    ts = 0
    for level, kind, raw in anc:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
            sec, nsec = _TIMESPEC.unpack(raw)
            ts = stamps.to_perf(sec * _NS + nsec)
    return data, ts
