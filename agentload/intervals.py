"""Interval arithmetic on integer-ns timelines, shared by trace stats, generate and replay."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["peak_overlap", "union_ns"]


def union_ns(intervals: Iterable[tuple[int, int]]) -> int:
    """Length of the union of ``[start, end]`` intervals: time covered by at least one."""
    total = 0
    cur_s: int | None = None
    cur_e: int | None = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_s is not None and cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_s is not None and cur_e is not None:
        total += cur_e - cur_s
    return total


def peak_overlap(intervals: Iterable[tuple[int, int]]) -> int:
    """Most ``[start, end]`` intervals open at once (an interval ending when another starts
    does not overlap it)."""
    events = sorted(e for s, t in intervals for e in ((s, 1), (t, -1)))
    now = best = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best
