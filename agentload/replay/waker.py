"""Sending on time: a scheduled send wakes at its due clock time, not when asyncio's timer fires.

``asyncio.sleep`` wakes late: the selector's timeout is rounded up to the next millisecond,
then the loop runs the ready callbacks in turn, so a send due at ``t`` left up to a few
milliseconds after it even on an idle core (``client_lag`` in results.json). A ``Waker`` keeps
every sleeper's due time in one heap, served by one driver task: the loop's timer brings the
driver to ``SPIN_NS`` before the earliest due time, and from there it yields to the loop
(``asyncio.sleep(0)``: reads and writes go on meanwhile) until the clock reaches it, then wakes
every sleeper that is due, in order. One task spins however many sleepers wait, and only
while a due time is less than ``SPIN_NS`` away.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable

__all__ = ["SPIN_NS", "Waker"]

SPIN_NS = 2_000_000
"""How long before a due time the driver stops trusting the loop's timer and spins: more
than the timer's own lateness (its millisecond rounding, and a loop turn)."""


class Waker:
    """Wakes each ``sleep_until(t)`` at clock ``t`` (see the module docstring)."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns, spin_ns: int = SPIN_NS):
        self.clock = clock
        self.spin_ns = spin_ns
        self._heap: list[tuple[int, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self._kick = asyncio.Event()
        self._driver: asyncio.Task[None] | None = None

    async def sleep_until(self, t: int) -> None:
        """Return at clock ``t`` (at once when it has passed); cancellable like any sleep."""
        if t <= self.clock():
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._heap, (t, next(self._seq), fut))
        if self._heap[0][2] is fut:
            self._kick.set()  # an earlier due time than the driver sleeps towards
        if self._driver is None:
            self._driver = asyncio.get_running_loop().create_task(self._drive())
        try:
            await fut
        finally:
            if not fut.done():
                fut.cancel()
                self._kick.set()  # let the driver forget it now, not at its due time

    async def _drive(self) -> None:
        """Wake the sleepers as they fall due; end when none is left."""
        heap = self._heap
        try:
            while self._forget_cancelled():
                left = heap[0][0] - self.clock()
                if left > self.spin_ns:
                    self._kick.clear()
                    try:
                        async with asyncio.timeout((left - self.spin_ns) / 1e9):
                            await self._kick.wait()
                    except TimeoutError:
                        pass
                    continue
                while heap and self.clock() < heap[0][0]:
                    await asyncio.sleep(0)
                now = self.clock()
                while heap and heap[0][0] <= now:
                    fut = heapq.heappop(heap)[2]
                    if not fut.done():
                        fut.set_result(None)
        finally:
            self._driver = None

    def _forget_cancelled(self) -> bool:
        """Drop the cancelled sleepers at the top of the heap; whether any sleeper is left."""
        heap = self._heap
        while heap and heap[0][2].done():
            heapq.heappop(heap)
        return bool(heap)

    async def aclose(self) -> None:
        """Stop the driver (sleepers still waiting are cancelled)."""
        for _, _, fut in self._heap:
            fut.cancel()
        self._heap.clear()
        if self._driver is not None:
            self._driver.cancel()
            await asyncio.gather(self._driver, return_exceptions=True)
