"""Percentiles: the one definition every statistic of agentload uses (trace stats, replay metrics,
live progress).

``percentile(values, q)`` interpolates linearly between the closest ranks, numpy's default method:
rank ``r = (n - 1) * q / 100``, value ``v[floor(r)] + (v[floor(r) + 1] - v[floor(r)]) * (r -
floor(r))`` over the sorted values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["percentile"]


def percentile(values: Sequence[float], q: float, *, presorted: bool = False) -> float:
    """The q-th percentile (0..100) of ``values``; ``presorted=True`` skips the sort (the caller
    promises ascending order). ValueError for no values."""
    if not values:
        raise ValueError("percentile of nothing")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    xs = values if presorted else sorted(values)
    r = (len(xs) - 1) * q / 100.0
    lo = math.floor(r)
    hi = min(lo + 1, len(xs) - 1)
    return float(xs[lo] + (xs[hi] - xs[lo]) * (r - lo))
