"""The one clock every sleep of the simulator goes through (integer nanoseconds).

``RealClock`` reads ``time.perf_counter_ns`` and sleeps with asyncio. ``VirtualClock`` never
waits: a sleep parks the caller until a test calls ``advance`` (or ``run_until_idle``), so the
timing model runs on virtual time, exactly and instantly.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol

__all__ = ["Clock", "RealClock", "VirtualClock"]


class Clock(Protocol):
    """Monotonic time in ns and a sleep that honours it."""

    def now_ns(self) -> int: ...

    async def sleep_until(self, t_ns: int) -> None: ...


class RealClock:
    """Wall time: ``time.perf_counter_ns`` and ``asyncio.sleep``."""

    def now_ns(self) -> int:
        return time.perf_counter_ns()

    async def sleep_until(self, t_ns: int) -> None:
        delay = t_ns - time.perf_counter_ns()
        if delay > 0:
            await asyncio.sleep(delay / 1e9)


class VirtualClock:
    """Virtual time for tests: sleepers wake only when ``advance`` moves time past them."""

    def __init__(self, start_ns: int = 0) -> None:
        self._now = start_ns
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now_ns(self) -> int:
        return self._now

    async def sleep_until(self, t_ns: int) -> None:
        if t_ns <= self._now:
            await asyncio.sleep(0)
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (t_ns, next(self._seq), fut))
        await fut

    @property
    def pending(self) -> int:
        """Number of parked sleepers."""
        return len(self._heap)

    def advance_to(self, t_ns: int) -> None:
        """Move time to ``t_ns`` and wake every sleeper due by then."""
        self._now = max(self._now, t_ns)
        while self._heap and self._heap[0][0] <= self._now:
            _, _, fut = heapq.heappop(self._heap)
            if not fut.done():
                fut.set_result(None)

    async def run_until_idle(self, max_steps: int = 1_000_000) -> None:
        """Repeatedly let tasks run, then jump to the next wake-up, until nobody sleeps."""
        for _ in range(max_steps):
            for _ in range(20):
                await asyncio.sleep(0)
            if not self._heap:
                return
            self.advance_to(self._heap[0][0])
        raise RuntimeError("virtual clock: still busy after max_steps")
