"""A one-shot kernel timer the event loop can wait on: Linux ``timerfd`` on CLOCK_MONOTONIC.

asyncio's own timers wake through the selector's timeout, which epoll takes in whole
milliseconds (rounded up), so a timer wakes up to a millisecond late, and a short spin before
each due time closes that gap at the cost of a busy core. A timerfd armed at an absolute
CLOCK_MONOTONIC time (``time.perf_counter_ns``'s clock on Linux) becomes readable at that
time to within the kernel's timer slack (~50 µs), so the loop's select wakes on time and
nothing spins. Python 3.11 has no ``os.timerfd_create`` (3.13 has), so this reaches libc
through ctypes; ``TimerFd.open()`` is None where that is not possible (not Linux, no libc
symbol, ``perf_counter`` on another clock), and the caller keeps its portable path.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import time
from collections.abc import Callable

__all__ = ["TimerFd"]

_CLOCK_MONOTONIC = 1
_TFD_NONBLOCK = os.O_NONBLOCK if sys.platform == "linux" else 0
_TFD_CLOEXEC = os.O_CLOEXEC if sys.platform == "linux" else 0
_TFD_TIMER_ABSTIME = 1
_NS = 1_000_000_000


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _Itimerspec(ctypes.Structure):
    _fields_ = [("it_interval", _Timespec), ("it_value", _Timespec)]


class TimerFd:
    """A timerfd (see the module docstring): ``fd`` for ``loop.add_reader``, ``arm(t)`` at a
    ``perf_counter_ns`` time, ``clear()`` once it fired, ``close()``."""

    def __init__(self, fd: int, settime: Callable[..., int]) -> None:
        self.fd = fd
        self._settime = settime
        self._spec = _Itimerspec()
        self._ref = ctypes.byref(self._spec)

    @classmethod
    def open(cls) -> TimerFd | None:
        """A new timer, or None where this platform cannot give one."""
        if (
            sys.platform != "linux"
            or time.get_clock_info("perf_counter").implementation
            != "clock_gettime(CLOCK_MONOTONIC)"
        ):
            return None
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            create, settime = libc.timerfd_create, libc.timerfd_settime
        except (OSError, AttributeError):
            return None
        create.argtypes = [ctypes.c_int, ctypes.c_int]
        create.restype = ctypes.c_int
        settime.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        settime.restype = ctypes.c_int
        fd = create(_CLOCK_MONOTONIC, _TFD_NONBLOCK | _TFD_CLOEXEC)
        if fd < 0:
            return None
        return cls(fd, settime)

    def arm(self, t_ns: int) -> None:
        """Fire once at ``t_ns`` (``perf_counter_ns``; at once when it has passed), replacing
        any earlier setting."""
        value = self._spec.it_value
        t_ns = max(t_ns, 1)  # 0 would disarm it
        value.tv_sec, value.tv_nsec = divmod(t_ns, _NS)
        if self._settime(self.fd, _TFD_TIMER_ABSTIME, self._ref, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err))

    def clear(self) -> None:
        """Take the expiry count, so the descriptor is not readable until it fires again."""
        with contextlib.suppress(BlockingIOError):
            os.read(self.fd, 8)

    def close(self) -> None:
        os.close(self.fd)
