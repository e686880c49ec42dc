"""Request time limits kept per tick (``client.deadline``): a limit that runs out cancels its
request and says so, within a tick of its time; a cancellation from elsewhere stays one; a
request that ended is never cancelled; requests whose limits fall in one tick share one timer.
A stalling server over real HTTP is ``tests/replay/test_client.py``'s ``timeout``."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from agentload.client.deadline import TICK_S, Deadlines, Limit


async def _bounded(
    limits: Deadlines, limit_s: float, work: Any, seen: list[Limit] | None = None
) -> str:
    """``work`` within a limit of ``limit_s`` (told to ``seen``), as the client bounds a
    request."""
    bound = limits.enter(limit_s)
    if seen is not None:
        seen.append(bound)
    try:
        await work
    except asyncio.CancelledError:
        if not bound.timed_out():
            raise
        return "timed out"
    finally:
        limits.leave(bound)
    return "done"


def test_a_limit_that_runs_out_cancels_its_request_within_a_tick() -> None:
    async def main() -> tuple[str, float]:
        limits = Deadlines(asyncio.get_running_loop())
        t0 = time.monotonic()
        got = await _bounded(limits, 0.05, asyncio.sleep(5))
        return got, time.monotonic() - t0

    got, took = asyncio.run(main())
    assert got == "timed out"
    assert 0.05 <= took < 0.05 + TICK_S + 0.5


def test_work_done_in_time_is_left_alone() -> None:
    async def main() -> tuple[str, bool]:
        limits = Deadlines(asyncio.get_running_loop())
        got = await _bounded(limits, 0.02, asyncio.sleep(0))
        await asyncio.sleep(0.05)  # past the limit's tick: its timer fired on nothing
        task = asyncio.current_task()
        assert task is not None
        return got, task.cancelling() == 0

    assert asyncio.run(main()) == ("done", True)


def test_a_cancellation_from_elsewhere_is_not_a_timeout() -> None:
    async def main() -> None:
        limits = Deadlines(asyncio.get_running_loop())
        task = asyncio.create_task(_bounded(limits, 10.0, asyncio.sleep(5)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


def test_a_cancellation_in_the_same_turn_as_the_limit_stays_a_cancellation() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        limits = Deadlines(loop)
        seen: list[Limit] = []
        task = asyncio.create_task(_bounded(limits, 0.02, asyncio.sleep(5), seen))
        await asyncio.sleep(0)
        # an outer cancellation due at the very time the limit's timer fires
        loop.call_at(seen[0].tick * TICK_S, task.cancel)
        with pytest.raises(asyncio.CancelledError):
            await task
        assert seen[0].expired

    asyncio.run(main())


def test_requests_whose_limits_fall_in_one_tick_share_one_timer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> tuple[int, list[str]]:
        loop = asyncio.get_running_loop()
        armed: list[float] = []
        real = loop.call_at

        def call_at(when: float, *args: Any) -> asyncio.TimerHandle:
            armed.append(when)
            return real(when, *args)

        monkeypatch.setattr(loop, "call_at", call_at)
        limits = Deadlines(loop)
        gate = asyncio.Event()
        tasks = [asyncio.create_task(_bounded(limits, 0.05, gate.wait())) for _ in range(500)]
        await asyncio.sleep(0)
        timers = len(armed)
        gate.set()
        return timers, await asyncio.gather(*tasks)

    timers, got = asyncio.run(main())
    assert got == ["done"] * 500
    assert 1 <= timers <= 2  # the 500 limits began within a tick or two of each other


def test_a_limit_needs_a_task() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(RuntimeError, match="needs a task"):
            Deadlines(loop).enter(1.0)
    finally:
        loop.close()


def test_no_time_left_ends_at_the_next_turn_and_no_limit_never_ends() -> None:
    async def main() -> tuple[str, str]:
        limits = Deadlines(asyncio.get_running_loop())
        gone = await _bounded(limits, 0.0, asyncio.sleep(1))
        endless = await _bounded(limits, math.inf, asyncio.sleep(0.05))
        return gone, endless

    t0 = time.monotonic()
    assert asyncio.run(main()) == ("timed out", "done")
    assert time.monotonic() - t0 < 0.5
