"""One load point of results.json: its load, spans and window, the 1 Hz timeline, the
server's scraped metrics, each worker's share of a sharded run, how hard the client worked
(``ClientLoad``: whether it, not the target, was the bottleneck), and its records."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentload.measure.aggregates import Aggregates, Distribution, ResultsModel
from agentload.measure.records import RequestRecord, SessionResult, Window

__all__ = [
    "MIN_LAG_REQUESTS",
    "MIN_WALL_S",
    "SATURATED_CPU",
    "SATURATED_LAG_MS",
    "ClientLoad",
    "Point",
    "ScrapeSample",
    "ScrapeSummary",
    "Span",
    "TimelineSample",
    "WorkerPoint",
    "client_load",
]

SATURATED_CPU = 0.9
"""An event loop busy this share of its point's wall time (or more) had no idle time left: it
sent late and read late."""
SATURATED_LAG_MS = 5.0
"""A p99 client lag above this many ms: sends left late, so the offered load was not the one
asked for."""
MIN_WALL_S = 1.0
"""The CPU rule judges a point that ran at least this long (a shorter one is all start-up)."""
MIN_LAG_REQUESTS = 100
"""The lag rule judges a point with at least this many measured requests (over fewer, the p99
is the one latest wake-up, which a shared machine decides)."""


class Span(ResultsModel):
    """A time span of a point, ns since its start."""

    start_ns: int = Field(description="start")
    end_ns: int = Field(description="end")


class TimelineSample(ResultsModel):
    """The point's counters, sampled at 1 Hz."""

    t_ns: int = Field(description="when, ns since the point's start")
    active_sessions: int = Field(description="sessions in flight")
    inflight: int = Field(description="requests in flight")
    requests: int = Field(description="requests completed so far")
    errors: int = Field(description="failed requests so far")
    output_tokens: int = Field(description="output tokens received so far")


class ScrapeSample(ResultsModel):
    """One scrape of the server's Prometheus metrics."""

    t_ns: int = Field(description="when, ns since the point's start")
    values: dict[str, float] = Field(description="the kept series: name{labels} → value")


class ScrapeSummary(ResultsModel):
    """What ``--scrape-metrics`` collected during a point."""

    url: str = Field(description="the scraped URL")
    samples: list[ScrapeSample] = Field(description="the samples, in time order")
    failures: int = Field(description="scrapes that failed")
    last_error: str | None = Field(description="the last failure, in words")


class WorkerPoint(ResultsModel):
    """What one worker of a sharded run (``replay --ray``) did at a point."""

    worker: int = Field(description="worker number (0-based)")
    node: str = Field(description="host name of the node it ran on")
    pid: int = Field(description="its process id")
    nice: int | None = Field(
        default=None,
        description="its scheduling niceness (0, the normal priority: Ray's default for a "
        "worker, 15, would let any busy process of the node delay its sends); None where the "
        "platform has none",
    )
    lanes: int | None = Field(description="its share of the lanes (None: arrivals, recorded)")
    arrival_rate: float | None = Field(description="its share of the arrival rate, or None")
    sessions: int = Field(description="session instances it started")
    requests: int = Field(description="requests it sent (or that were in flight when lost)")
    clock_offset_ns: int = Field(
        description="its monotonic clock minus the driver's, measured at start from round trips"
    )
    clock_uncertainty_ns: int = Field(
        description="how far that offset may be off (half the fastest round trip)"
    )
    start_skew_ns: int = Field(
        description="when it actually started the point minus the common start, on the "
        "driver's time line"
    )
    lost: str | None = Field(
        default=None,
        description="None, or why the worker was lost mid-point (its process died): its "
        "requests in flight are counted as failed (error_kind worker_lost), its running "
        "sessions as cut, and the measured window ends when the loss was seen",
    )
    lost_inflight: int = Field(default=0, description="requests in flight when it was lost")
    cpu_share: float | None = Field(
        default=None,
        description="its event loop's CPU seconds over the point's wall seconds",
    )


class ClientLoad(ResultsModel):
    """How hard the load generator itself worked at a point, and whether it kept up."""

    cpu_share: float = Field(
        description="CPU seconds of the client's event-loop thread over the point's wall "
        "seconds (1.0: busy throughout); with --ray, the busiest worker's"
    )
    lag_p99_ms: float | None = Field(
        description="p99 client lag (actual minus scheduled send) over the measured requests"
    )
    saturated: bool = Field(
        description=f"the client was the bottleneck: cpu_share >= {SATURATED_CPU} over a "
        f"point of {MIN_WALL_S:g}s or more (no idle time in its event loop), or lag_p99_ms > "
        f"{SATURATED_LAG_MS:g} over {MIN_LAG_REQUESTS} or more measured requests; the point's "
        "figures then measure the client as much as the target"
    )
    why: str | None = Field(description="what says it was saturated, in words; None if it kept up")


def client_load(cpu_s: float, wall_s: float, lag: Distribution | None) -> ClientLoad:
    """The client's load at a point (its loop's CPU seconds ``cpu_s`` over ``wall_s``, the
    lag of its measured requests), saturated or not by the rule of ``ClientLoad.saturated``."""
    share = cpu_s / wall_s if wall_s > 0 else 0.0
    said = []
    if share >= SATURATED_CPU and wall_s >= MIN_WALL_S:
        said.append(f"its event loop was busy {share:.0%} of the time")
    if lag is not None and lag.p99 > SATURATED_LAG_MS and lag.n >= MIN_LAG_REQUESTS:
        said.append(f"its sends left {lag.p99:.1f} ms late at p99")
    return ClientLoad(
        cpu_share=round(share, 4),
        lag_p99_ms=lag.p99 if lag is not None else None,
        saturated=bool(said),
        why=" and ".join(said) or None,
    )


class Point(ResultsModel):
    """One load point (a concurrency level, or the arrival rate)."""

    interrupted: bool = Field(description="the run was interrupted during this point")
    concurrency: int | None = Field(
        description="lanes; None with an arrival rate or the recorded schedule"
    )
    arrival_rate: float | None = Field(description="Poisson sessions/s, or None")
    schedule: Literal["closed", "recorded"] = Field(
        default="closed",
        description="closed: lanes or arrivals; recorded: every call at its recorded offset "
        "(open loop, config.time_scale)",
    )
    repeat: int | None = Field(
        default=None, description="which repetition of its load this is (--repeat; from 0)"
    )
    wall_s: float = Field(description="wall-clock seconds the point ran")
    warmup_window: Span = Field(description="from the start until every lane warmed up")
    window: Window = Field(description="the measured (steady-state) window")
    power_watts: float | None = Field(description="average power over the window, W")
    max_active_sessions: int = Field(description="peak sessions in flight")
    max_inflight_requests: int = Field(description="peak requests in flight")
    aggregates: Aggregates = Field(description="every metric of the point")
    timeline: list[TimelineSample] = Field(description="counters at 1 Hz")
    scrape: ScrapeSummary | None = Field(description="server metrics, with --scrape-metrics")
    sessions: list[SessionResult] = Field(description="every session instance")
    requests: list[RequestRecord] = Field(description="every request")
    workers: list[WorkerPoint] | None = Field(
        default=None,
        description="a sharded run (replay --ray): each worker's share, clock and fate; None "
        "on one machine",
    )
    client: ClientLoad | None = Field(
        default=None,
        description="how hard the client worked and whether it was saturated (None in files "
        "written before it was measured, and for the live benchmark)",
    )

    @property
    def load(self) -> str:
        """``c=4``, ``rate=2.0/s`` or ``recorded``."""
        if self.schedule == "recorded":
            return "recorded"
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        return f"rate={self.arrival_rate}/s"
