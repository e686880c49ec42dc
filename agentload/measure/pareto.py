"""The Pareto frontier of a sweep and the headline: throughput at X tokens/s per user; the
job-level frontier's points (jobs per hour per GPU against jobs per hour per user).

Each point is ``(x, y)`` = (median output tokens/s per user, output tokens/s per GPU — or per
MW when power is known, or plain output tokens/s without --gpus). The frontier keeps the
points no other point beats on both axes, sorted by x. The throughput sustained at a target
X is the frontier's y linearly interpolated at X between the two frontier points around it;
when X is below every frontier x, the best y among points with x ≥ X (no extrapolation);
when no point reaches X, there is no answer and the report says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentload.measure.metrics import Metric
from agentload.measure.metrics.throughput import (
    OutputThroughput,
    OutputThroughputPerGPU,
    OutputThroughputPerMW,
)
from agentload.measure.results import Point, ResultsDocument

__all__ = [
    "Headline",
    "axis_label",
    "axis_of",
    "frontier",
    "headline",
    "job_label",
    "job_points",
    "job_xy",
    "point_xy",
    "points_xy",
]


@dataclass(frozen=True)
class Headline:
    """The answer for one target X."""

    target: float
    value: float | None
    unit: str
    text: str


def axis_of(results: ResultsDocument) -> type[Metric]:
    """The metric of the y axis: output throughput per MW when known, else per GPU, else
    plain output throughput."""
    for m in (OutputThroughputPerMW, OutputThroughputPerGPU):
        if any(p.aggregates.value(m.tag) is not None for p in results.points):
            return m
    return OutputThroughput


def axis_label(metric: type[Metric]) -> str:
    """The y axis label of ``metric`` (from its metadata)."""
    hint = "; give --gpus for per GPU" if metric is OutputThroughput else ""
    return metric.label() + hint


def point_xy(p: Point, ytag: str) -> tuple[float, float] | None:
    """A point's (median tokens/s per user, its ``ytag`` figure); None without both."""
    tps = p.aggregates.tps_user
    y = p.aggregates.value(ytag)
    return (tps.p50, float(y)) if tps is not None and y is not None else None


def points_xy(results: ResultsDocument, ytag: str) -> list[tuple[float, float, Any]]:
    """``(x, y, label)`` of every point having both values (x: median tokens/s per user)."""
    out = []
    for p in results.points:
        xy = point_xy(p, ytag)
        if xy is not None:
            out.append((*xy, p.concurrency or p.arrival_rate or p.load))
    return out


def job_xy(p: Point, gpus: int | None) -> tuple[float, float] | None:
    """A point's (jobs per hour per user: 3600 / the median session latency in s, one
    user's jobs back to back; jobs per hour per GPU, or plain without ``gpus``); None without
    complete sessions."""
    lat, jobs = p.aggregates.session_latency_s, p.aggregates.jobs_per_hour
    if lat is None or not jobs or lat.p50 <= 0:
        return None
    return 3600 / lat.p50, jobs / gpus if gpus else jobs


def job_label(gpus: int | None) -> str:
    return "jobs per hour per GPU" if gpus else "jobs per hour (give --gpus for per GPU)"


def job_points(results: ResultsDocument) -> tuple[list[tuple[float, float, Any]], str]:
    """The job-level Pareto's points ``(x, y, label)`` (``job_xy``) and its y label."""
    gpus = results.config.gpus
    out = []
    for p in results.points:
        xy = job_xy(p, gpus)
        if xy is not None:
            out.append((*xy, p.concurrency or p.arrival_rate or p.load))
    return out, job_label(gpus)


def frontier(points: Sequence[tuple[float, float, Any]]) -> list[tuple[float, float, Any]]:
    """The non-dominated points, by increasing x (so decreasing y)."""
    best: list[tuple[float, float, Any]] = []
    for p in sorted(points, key=lambda p: (-p[0], -p[1])):
        if not best or p[1] > best[-1][1]:
            best.append(p)
    return sorted(best, key=lambda p: p[0])


def headline(points: Sequence[tuple[float, float, Any]], target: float, unit: str) -> Headline:
    """Throughput sustained while each user still sees ``target`` tok/s (module docstring)."""
    f = frontier(points)
    if not f or f[-1][0] < target:
        best = max((p[0] for p in points), default=None)
        reached = "no point" if best is None else f"the best point gave {best:.1f} tok/s/user"
        return Headline(
            target, None, unit, f"No point reached {target:g} tok/s per user ({reached})."
        )
    if f[0][0] >= target:
        v = f[0][1]
    else:
        v = f[-1][1]
        for (x0, y0, _), (x1, y1, _) in itertools.pairwise(f):
            if x0 <= target <= x1:
                v = y0 + (y1 - y0) * (target - x0) / (x1 - x0) if x1 > x0 else max(y0, y1)
                break
    return Headline(
        target, v, unit, f"At {target:g} tok/s per user the endpoint sustains {v:,.1f} {unit}."
    )
