"""The waker of scheduled sends: every sleeper wakes at (never before) its due time, in order,
and a cancelled one leaves nothing behind; a function handed to ``fire_at`` runs at its due
time (from the timer, or from a ``poll`` between two reads) and never when cancelled before.
Each test runs on both ways of waking: the kernel timer (Linux, ``perf_counter_ns``) and the
portable driver task (an injected clock)."""

from __future__ import annotations

import asyncio
import random
import sys
import time
from collections.abc import Callable

import pytest

from agentload.replay.waker import Waker

CLOCKS = {
    "kernel timer": time.perf_counter_ns,
    "driver task": lambda: time.perf_counter_ns(),  # not the process clock: no kernel timer
}


@pytest.fixture(params=list(CLOCKS))
def make_waker(request: pytest.FixtureRequest) -> Callable[[], Waker]:
    return lambda: Waker(CLOCKS[request.param])


async def test_sleepers_wake_in_order_at_or_after_their_due_time(
    make_waker: Callable[[], Waker],
) -> None:
    waker = make_waker()
    rng = random.Random(7)
    t0 = time.perf_counter_ns()
    dues = [t0 + rng.randrange(20_000_000, 50_000_000) for _ in range(40)]
    woke: list[tuple[int, int]] = []
    ahead: set[int] = set()

    async def sleeper(t: int) -> None:
        if time.perf_counter_ns() < t:
            ahead.add(t)
        await waker.sleep_until(t)
        woke.append((t, time.perf_counter_ns()))

    await asyncio.gather(*(sleeper(t) for t in dues))
    assert len(woke) == len(dues)
    assert all(at >= due for due, at in woke)
    # in due order: those still ahead when they went to sleep (a loaded machine can start a
    # sleeper after its due time, which then returns at once, in the order the tasks ran)
    assert len(ahead) >= 2
    order = [due for due, _ in woke if due in ahead]
    assert order == sorted(ahead)
    assert waker._driver is None  # nothing left to wake: the driver ended


async def test_a_due_time_passed_returns_at_once(make_waker: Callable[[], Waker]) -> None:
    waker = make_waker()
    await waker.sleep_until(time.perf_counter_ns() - 1)
    assert waker._driver is None


async def test_a_cancelled_sleeper_does_not_hold_the_driver(
    make_waker: Callable[[], Waker],
) -> None:
    waker = make_waker()
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


async def test_aclose_cancels_whoever_still_waits(make_waker: Callable[[], Waker]) -> None:
    waker = make_waker()
    task = asyncio.create_task(waker.sleep_until(time.perf_counter_ns() + 60_000_000_000))
    await asyncio.sleep(0.001)
    await waker.aclose()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled() and waker._driver is None and waker._timer is None


async def test_fire_at_runs_the_function_at_its_due_time_and_returns_its_result(
    make_waker: Callable[[], Waker],
) -> None:
    waker = make_waker()
    t0 = time.perf_counter_ns()
    dues = [t0 + d * 1_000_000 for d in (12, 3, 7, 3, 20)]
    ran: list[tuple[int, int]] = []

    def at(due: int) -> Callable[[], int]:
        def fn() -> int:
            ran.append((due, time.perf_counter_ns()))
            return due % 1000

        return fn

    got = await asyncio.gather(*(waker.fire_at(due, at(due)) for due in dues))
    assert got == [due % 1000 for due in dues]
    assert [due for due, _ in ran] == sorted(dues)
    assert all(when >= due for due, when in ran)
    # and at once when the due time has passed, in the caller's own step
    assert await waker.fire_at(t0, lambda: 42) == 42
    await waker.aclose()


async def test_the_kernel_timer_serves_the_process_clock_on_linux() -> None:
    waker = Waker()
    await waker.sleep_until(time.perf_counter_ns() + 2_000_000)
    assert (waker._timer is not None) == (sys.platform == "linux")
    assert waker._driver is None or sys.platform != "linux"
    await waker.aclose()


async def test_a_cancelled_fire_at_never_runs_its_function(
    make_waker: Callable[[], Waker],
) -> None:
    waker = make_waker()
    ran: list[str] = []
    soon = time.perf_counter_ns() + 20_000_000
    cut = asyncio.create_task(waker.fire_at(soon, lambda: ran.append("cut") or 0))
    kept = asyncio.create_task(waker.fire_at(soon, lambda: ran.append("kept") or 1))
    await asyncio.sleep(0.002)
    cut.cancel()
    assert await kept == 1
    await asyncio.gather(cut, return_exceptions=True)
    assert cut.cancelled() and ran == ["kept"]
    await waker.aclose()


async def test_poll_runs_what_fell_due_before_the_loop_gets_a_turn(
    make_waker: Callable[[], Waker],
) -> None:
    waker = make_waker()
    ran: list[int] = []
    due = time.perf_counter_ns() + 3_000_000
    task = asyncio.create_task(waker.fire_at(due, lambda: ran.append(1) or 7))
    await asyncio.sleep(0)  # the task is in the heap now
    waker.poll()
    assert ran == []  # not due yet
    while time.perf_counter_ns() < due:  # this step holds the loop past the due time
        pass
    waker.poll()
    assert ran == [1]  # run by the poll, inside this step
    assert await task == 7
    await waker.aclose()


async def test_an_error_in_the_function_reaches_its_caller(
    make_waker: Callable[[], Waker],
) -> None:
    waker = make_waker()

    def boom() -> int:
        raise OSError("socket gone")

    with pytest.raises(OSError, match="socket gone"):
        await waker.fire_at(time.perf_counter_ns() + 2_000_000, boom)
    assert await waker.fire_at(time.perf_counter_ns() + 1_000_000, lambda: 5) == 5
    await waker.aclose()
