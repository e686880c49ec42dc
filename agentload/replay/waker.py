"""Sending on time: a scheduled send wakes at its due clock time, not when asyncio's timer fires.

``asyncio.sleep`` wakes late: the selector's timeout is rounded up to the next millisecond,
then the loop runs the ready callbacks in turn, so a send due at ``t`` left up to a few
milliseconds after it even on an idle core (``client_lag`` in results.json). A ``Waker`` keeps
every sleeper's due time in one heap, and wakes every sleeper that is due, in order:

* on Linux, from one kernel timer (``timerfd``) armed at the earliest due time: the loop's
  select wakes on it to within tens of microseconds, and nothing spins;
* elsewhere (or with an injected clock), from one driver task: the loop's timer brings it to
  ``SPIN_NS`` before the earliest due time, and from there it yields to the loop
  (``asyncio.sleep(0)``: reads and writes go on meanwhile) until the clock reaches it.

A loop turn of many busy streams lasts up to milliseconds, so a wake-up that waits for its
place in the turn, and a woken task that runs one turn later, still leave late. Hence two
more ways in: ``fire_at`` runs a function (a request's stamp and write, ``client.gate``) at the
due time itself, not in the woken task; and ``poll`` (the connections' ``tick``, called
before each socket read is handled) wakes whatever fell due between two reads of a turn.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from typing import Any

from agentload.replay.timerfd import TimerFd

__all__ = ["SPIN_NS", "OneSend", "Waker"]

SPIN_NS = 1_200_000
"""How long before a due time the driver stops trusting the loop's timer and spins: more
than the timer's own lateness (its millisecond rounding, and a loop turn)."""


class Waker:
    """Wakes each ``sleep_until(t)`` at clock ``t`` (see the module docstring)."""

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns, spin_ns: int = SPIN_NS):
        self.clock = clock
        self.spin_ns = spin_ns
        self._heap: list[tuple[int, int, asyncio.Future[Any], Callable[[], Any] | None]] = []
        self._seq = itertools.count()
        self._kick = asyncio.Event()
        self._driver: asyncio.Task[None] | None = None
        self._timer: TimerFd | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._kernel = clock is time.perf_counter_ns
        """May a kernel timer serve the heap (its clock is CLOCK_MONOTONIC, ours too)?"""

    async def sleep_until(self, t: int) -> None:
        """Return at clock ``t`` (at once when it has passed); cancellable like any sleep."""
        if t > self.clock():
            await self._wait(t, None)

    async def fire_at(self, t: int, fn: Callable[[], int]) -> int:
        """Run ``fn`` at clock ``t`` (at once when it has passed) and return its result; not
        run when cancelled before (``client.gate.Gate``)."""
        if t <= self.clock():
            return fn()
        return int(await self._wait(t, fn))

    def poll(self) -> None:
        """Wake what is due now (cheap when nothing is: one clock read)."""
        heap = self._heap
        if heap:
            now = self.clock()
            if heap[0][0] <= now:
                self._wake_due(now)

    async def _wait(self, t: int, fn: Callable[[], Any] | None) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        heapq.heappush(self._heap, (t, next(self._seq), fut, fn))
        if self._kernel and self._timer is None:
            self._start_timer(loop)
        if self._timer is not None:
            if self._heap[0][2] is fut:
                self._timer.arm(t)
        else:
            if self._heap[0][2] is fut:
                self._kick.set()  # an earlier due time than the driver sleeps towards
            if self._driver is None:
                self._driver = loop.create_task(self._drive())
        try:
            return await fut
        finally:
            if not fut.done():
                fut.cancel()
                self._kick.set()  # let the driver forget it now, not at its due time

    def _start_timer(self, loop: asyncio.AbstractEventLoop) -> None:
        """Serve the heap from a kernel timer, where there is one (else the driver does)."""
        self._kernel = False  # tried once
        timer = TimerFd.open()
        if timer is not None:
            loop.add_reader(timer.fd, self._on_timer)
            self._timer, self._loop = timer, loop

    def _on_timer(self) -> None:
        assert self._timer is not None
        self._timer.clear()
        self._wake_due(self.clock())
        if self._forget_cancelled():
            self._timer.arm(self._heap[0][0])

    def _wake_due(self, now: int) -> None:
        """Wake every sleeper due by ``now``, in order (running its function, if any)."""
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, _, fut, fn = heapq.heappop(heap)
            if fut.done():
                continue
            if fn is None:
                fut.set_result(None)
                continue
            try:
                fut.set_result(fn())
            except Exception as exc:  # the caller's to handle, in its task
                fut.set_exception(exc)

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
                if left > 0:
                    await asyncio.sleep(0)  # reads and writes go on; a poll may wake it
                    continue
                self._wake_due(self.clock())
        finally:
            self._driver = None

    def _forget_cancelled(self) -> bool:
        """Drop the cancelled sleepers at the top of the heap; whether any sleeper is left."""
        heap = self._heap
        while heap and heap[0][2].done():
            heapq.heappop(heap)
        return bool(heap)

    async def aclose(self) -> None:
        """Stop the driver or the timer (sleepers still waiting are cancelled)."""
        for _, _, fut, _ in self._heap:
            fut.cancel()
        self._heap.clear()
        if self._timer is not None and self._loop is not None:
            self._loop.remove_reader(self._timer.fd)
            self._timer.close()
            self._timer = None
        if self._driver is not None:
            self._driver.cancel()
            await asyncio.gather(self._driver, return_exceptions=True)


class OneSend:
    """The waker as one request's gate (``client.gate.Gate``) that tells ``on_send`` as the
    request goes, and remembers that it went (``fired``)."""

    def __init__(self, waker: Waker, on_send: Callable[[], object]) -> None:
        self.waker = waker
        self.on_send = on_send
        self.fired = False

    async def fire_at(self, t: int, fn: Callable[[], int]) -> int:
        def go() -> int:
            self.fired = True
            self.on_send()
            return fn()

        return await self.waker.fire_at(t, go)
