"""Time limits for many requests at once, with one loop timer per tick instead of one each.

``asyncio.timeout`` arms a timer for every request and cancels it when the request is over:
a ``TimerHandle`` pushed into the loop's heap (its comparisons are Python calls, about
fourteen a push at 10,000 requests in flight) and left there cancelled until the loop sweeps
it out. That cost several microseconds a request. ``Deadlines`` files each limit under the
tick (``TICK_S``) it falls in, with one timer per tick in use, and a request only adds itself
to a set and takes itself out. When a tick's timer fires, every request still filed under it
is cancelled, and ``Limit.timed_out`` then tells the request that its limit ran out (as
``asyncio.timeout`` turns that cancellation into ``TimeoutError``); a cancellation from
elsewhere stays a cancellation. A limit ends at most one tick late.
"""

from __future__ import annotations

import asyncio
import math

__all__ = ["TICK_S", "Deadlines", "Limit"]

TICK_S = 0.01
"""How finely limits are kept: a request's limit ends up to this much after its time."""


class Limit:
    """One request's time limit, filed in its ``Deadlines`` until ``Deadlines.leave``."""

    __slots__ = ("cancelling", "expired", "task", "tick")

    def __init__(self, task: asyncio.Task[object], tick: int) -> None:
        self.task = task
        self.tick = tick
        self.cancelling = task.cancelling()
        """The task's pending cancellations when the limit began (as ``asyncio.timeout``)."""
        self.expired = False

    def timed_out(self) -> bool:
        """Called on ``CancelledError``: whether it was this limit that ran out (and no other
        cancellation is pending); the task is then no longer cancelled."""
        return self.expired and self.task.uncancel() <= self.cancelling


class Deadlines:
    """The time limits of one event loop's requests (see the module docstring)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._ticks: dict[int, set[Limit]] = {}

    def enter(self, limit_s: float) -> Limit:
        """Start a limit of ``limit_s`` seconds from now for the current task."""
        task = asyncio.current_task(self.loop)
        if task is None:
            raise RuntimeError("a time limit needs a task")
        if not math.isfinite(limit_s):
            return Limit(task, -1)  # no limit: filed nowhere
        at = (self.loop.time() + limit_s) / TICK_S
        # a limit already over (none left: 0 s) ends at the loop's next turn, as a timer due now
        tick = math.ceil(at) if limit_s > 0 else math.floor(at)
        limit = Limit(task, tick)
        filed = self._ticks.get(tick)
        if filed is None:
            filed = self._ticks[tick] = set()
            self.loop.call_at(tick * TICK_S, self._expire, tick)
        filed.add(limit)
        return limit

    def leave(self, limit: Limit) -> None:
        """The request is over: its limit no longer applies."""
        filed = self._ticks.get(limit.tick)
        if filed is not None:
            filed.discard(limit)

    def _expire(self, tick: int) -> None:
        for limit in self._ticks.pop(tick, ()):
            if not limit.task.done():
                limit.expired = True
                limit.task.cancel()
