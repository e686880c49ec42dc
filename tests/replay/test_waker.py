"""The waker of scheduled sends: every sleeper wakes at (never before) its due time, in order,
and a cancelled one leaves nothing behind."""

from __future__ import annotations

import asyncio
import random
import time

from agentload.replay.waker import Waker


async def test_sleepers_wake_in_order_at_or_after_their_due_time() -> None:
    waker = Waker()
    rng = random.Random(7)
    t0 = time.perf_counter_ns()
    dues = [t0 + rng.randrange(1_000_000, 30_000_000) for _ in range(40)]
    woke: list[tuple[int, int]] = []

    async def sleeper(t: int) -> None:
        await waker.sleep_until(t)
        woke.append((t, time.perf_counter_ns()))

    await asyncio.gather(*(sleeper(t) for t in dues))
    assert len(woke) == len(dues)
    assert all(at >= due for due, at in woke)
    assert [due for due, _ in woke] == sorted(dues)
    assert waker._driver is None  # nothing left to wake: the driver ended


async def test_a_due_time_passed_returns_at_once() -> None:
    waker = Waker()
    await waker.sleep_until(time.perf_counter_ns() - 1)
    assert waker._driver is None


async def test_a_cancelled_sleeper_does_not_hold_the_driver() -> None:
    waker = Waker()
    far = asyncio.create_task(waker.sleep_until(time.perf_counter_ns() + 60_000_000_000))
    near = asyncio.create_task(waker.sleep_until(time.perf_counter_ns() + 5_000_000))
    await asyncio.sleep(0.001)
    far.cancel()
    await near
    for _ in range(100):  # the driver forgets the cancelled one and ends
        if waker._driver is None:
            break
        await asyncio.sleep(0.01)
    assert far.cancelled() and waker._driver is None
    await waker.aclose()


async def test_aclose_cancels_whoever_still_waits() -> None:
    waker = Waker()
    task = asyncio.create_task(waker.sleep_until(time.perf_counter_ns() + 60_000_000_000))
    await asyncio.sleep(0.001)
    await waker.aclose()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and waker._driver is None
