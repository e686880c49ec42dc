"""One load point of results.json: its load, spans and window, the 1 Hz timeline, the
server's scraped metrics, each worker's share of a sharded run, and its records."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agentload.measure.aggregates import Aggregates, ResultsModel
from agentload.measure.records import RequestRecord, SessionResult, Window

__all__ = ["Point", "ScrapeSample", "ScrapeSummary", "Span", "TimelineSample", "WorkerPoint"]


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

    @property
    def load(self) -> str:
        """``c=4``, ``rate=2.0/s`` or ``recorded``."""
        if self.schedule == "recorded":
            return "recorded"
        if self.concurrency is not None:
            return f"c={self.concurrency}"
        return f"rate={self.arrival_rate}/s"
