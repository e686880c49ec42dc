"""``--repeat R``: every point run R times; per load, each headline metric's mean and 95%
interval over the repetitions, and whether two such intervals are apart.

The interval is Student's t: ``mean ± t(0.975, R − 1) · s / √R`` with ``s`` the sample
standard deviation of the R values (one value per repetition: each is a whole point's figure,
so the repetitions are independent runs). Two intervals are **apart** when one ends below the
other's start: the difference is larger than the run-to-run spread (a conservative test: two
overlapping intervals can still differ at 95%).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from pydantic import Field

from agentload.measure.aggregates import ResultsModel

__all__ = ["REPEAT_KEYS", "Interval", "RepeatGroup", "apart", "mean_interval", "repeat_groups"]

REPEAT_KEYS = (
    "output_tps",
    "output_tps_per_gpu",
    "output_tps_per_mw",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "e2e_p50_ms",
    "tps_user_p50",
    "jobs_per_hour",
    "goodput",
)
"""The summary.csv columns given with an interval."""

# t(0.975, df) for df = 1..30; above, the normal 1.96 is within 2%.
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


class Interval(ResultsModel):
    """A metric over the repetitions of one load."""

    n: int = Field(description="repetitions with a value")
    mean: float = Field(description="mean of the values")
    low: float = Field(description="95% interval, lower end (the mean when n = 1)")
    high: float = Field(description="95% interval, upper end (the mean when n = 1)")
    values: list[float] = Field(description="each repetition's value, in run order")

    @property
    def half(self) -> float:
        return (self.high - self.low) / 2


class RepeatGroup(ResultsModel):
    """The repetitions of one load: which points, and each metric's interval."""

    load: str = Field(description="c=4, rate=2.0/s or recorded")
    points: list[int] = Field(description="indexes into points, in run order")
    metrics: dict[str, Interval] = Field(description="summary.csv column → its interval")


def mean_interval(values: Sequence[float]) -> Interval | None:
    """The mean and 95% t interval of ``values`` (None when there are none)."""
    vals = [float(v) for v in values]
    if not vals:
        return None
    mean = statistics.fmean(vals)
    if len(vals) < 2:
        return Interval(n=1, mean=mean, low=mean, high=mean, values=vals)
    df = len(vals) - 1
    t = _T975[df - 1] if df <= len(_T975) else 1.96
    half = t * statistics.stdev(vals) / math.sqrt(len(vals))
    return Interval(n=len(vals), mean=mean, low=mean - half, high=mean + half, values=vals)


def apart(a: Interval, b: Interval) -> bool:
    """One interval ends below the other's start."""
    return a.high < b.low or b.high < a.low


def repeat_groups(rows: Sequence[dict[str, Any]], loads: Sequence[str]) -> list[RepeatGroup]:
    """Groups of the points run more than once at the same load (``rows``: summary rows, and
    ``loads``: each point's load label, both in point order)."""
    by: dict[str, list[int]] = {}
    for i, load in enumerate(loads):
        by.setdefault(load, []).append(i)
    out = []
    for load, idx in by.items():
        if len(idx) < 2:
            continue
        metrics = {}
        for key in REPEAT_KEYS:
            vals = [rows[i][key] for i in idx if isinstance(rows[i].get(key), int | float)]
            iv = mean_interval(vals)
            if iv is not None:
                metrics[key] = iv
        out.append(RepeatGroup(load=load, points=idx, metrics=metrics))
    return out
