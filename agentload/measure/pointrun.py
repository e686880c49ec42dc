"""The one measurement core: every results ``Point`` is built here (``build_point``), from what a
point produced (``PointRun``), the load it ran at (``PointLoad``) and the measurement options.

A ``PointRun`` comes from replay's runner on one machine, from the merge of a sharded point's
workers (``replay --ray``), or from a live run's trace (``generate``/``eval``): whoever made it,
the point's metrics are computed once over its request and session records, in its window
(``measure.metrics``), and its power is the average over that window (``window_watts``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from agentload.measure.aggregates import Aggregates
from agentload.measure.metrics import SLO, MetricContext, aggregate
from agentload.measure.points import (
    Point,
    ScrapeSummary,
    Span,
    TimelineSample,
    WorkerPoint,
    client_load,
)
from agentload.measure.power import average_watts
from agentload.measure.records import RequestRecord, SessionResult, Window

__all__ = ["PointLoad", "PointRun", "build_point", "window_watts"]


@dataclass
class PointRun:
    """Everything one point produced (times in ns since ``t0_ns``, a clock time)."""

    t0_ns: int
    requests: list[RequestRecord]
    sessions: list[SessionResult]
    window: Window
    warmup_end_ns: int
    timeline: list[dict[str, Any]]
    wall_s: float
    max_active_sessions: int
    max_inflight: int
    cpu_s: float | None = 0.0
    """CPU seconds the client's event-loop thread used while the point ran (with --ray: the
    busiest worker's); None when no client of ours sent the requests (a live run's agents)."""
    warmup_start_ns: int = 0
    """Where its warm-up began (a capacity stage's: when its lanes were set)."""


@dataclass(frozen=True)
class PointLoad:
    """The load a point ran at: ``concurrency`` lanes (None with arrivals or the recorded
    schedule), a Poisson ``arrival_rate``, or every call at its recorded offset."""

    concurrency: int | None
    arrival_rate: float | None = None
    schedule: Literal["closed", "recorded"] = "closed"


def window_watts(samples: list[tuple[int, float]], run: PointRun) -> float | None:
    """The average power over the point's measured window, from ``(clock ns, energy mJ)``
    samples (``power.NvmlPower``); None without two samples around it."""
    w = run.window
    return average_watts(samples, run.t0_ns + w.start_ns, run.t0_ns + w.end_ns)


def build_point(
    run: PointRun,
    load: PointLoad,
    gpus: int | None,
    slo: SLO | None,
    watts: float | None,
    *,
    scrape: dict[str, Any] | None = None,
    interrupted: bool = False,
    workers: list[WorkerPoint] | None = None,
) -> Point:
    """A point's results: every metric computed once over all of its request records (on a
    cluster: every worker's, on one time line), per GPU with ``gpus``, per watt with ``watts``,
    SLO attainment and goodput against ``slo``."""
    ctx = MetricContext(run.requests, run.sessions, run.window, gpus, watts, slo)
    aggregates = Aggregates.model_validate(aggregate(ctx))
    client = None
    if run.cpu_s is not None:
        client = client_load(run.cpu_s, run.wall_s, aggregates.client_lag_ms)
    return Point(
        interrupted=interrupted,
        concurrency=load.concurrency,
        schedule=load.schedule,
        arrival_rate=load.arrival_rate,
        wall_s=run.wall_s,
        warmup_window=Span(start_ns=run.warmup_start_ns, end_ns=run.warmup_end_ns),
        window=run.window,
        power_watts=watts,
        max_active_sessions=run.max_active_sessions,
        max_inflight_requests=run.max_inflight,
        aggregates=aggregates,
        timeline=[TimelineSample.model_validate(t) for t in run.timeline],
        scrape=ScrapeSummary.model_validate(scrape) if scrape else None,
        sessions=run.sessions,
        requests=run.requests,
        workers=workers,
        client=client,
    )
