"""The kernel timer under the waker (``replay.timerfd``): on Linux it opens, and its descriptor
becomes readable once the armed ``perf_counter_ns`` time has come, never before; re-armed
earlier or later, it follows the new time. Elsewhere ``open`` says None."""

from __future__ import annotations

import select
import sys
import time

import pytest

from agentload.replay.timerfd import TimerFd

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="timerfd is Linux's")


def _readable(timer: TimerFd, wait_s: float) -> bool:
    return bool(select.select([timer.fd], [], [], wait_s)[0])


def test_it_fires_at_the_armed_time_and_not_before() -> None:
    timer = TimerFd.open()
    assert timer is not None
    try:
        for delay_ns in (300_000, 2_000_000, 15_000_000):
            due = time.perf_counter_ns() + delay_ns
            timer.arm(due)
            assert _readable(timer, 5.0)
            assert time.perf_counter_ns() >= due
            timer.clear()
            assert not _readable(timer, 0)  # cleared: quiet until armed again
    finally:
        timer.close()


def test_a_time_past_fires_at_once_and_a_new_time_replaces_the_old() -> None:
    timer = TimerFd.open()
    assert timer is not None
    try:
        timer.arm(time.perf_counter_ns() - 1_000)
        assert _readable(timer, 1.0)
        timer.clear()
        timer.arm(time.perf_counter_ns() + 3_600 * 10**9)  # an hour away...
        later = time.perf_counter_ns() + 1_000_000
        timer.arm(later)  # ...replaced by a millisecond
        assert _readable(timer, 5.0) and time.perf_counter_ns() >= later
        timer.clear()
    finally:
        timer.close()
