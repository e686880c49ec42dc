"""One load point: run it with its side tasks (scraping, power, progress, the capacity search's
watcher) and turn what it produced into a results point (``make_point``); what runs a replay's
points (``PointExecutor``: this machine's ``local.LocalPoints`` or Ray's ``sharded.RayPoints``)
and what a watcher sees of a point as it runs (``LivePoint``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentload.measure.metrics import SLO, MetricContext, aggregate
from agentload.measure.points import client_load
from agentload.measure.power import NvmlPower, average_watts
from agentload.measure.records import RequestRecord, SessionResult
from agentload.measure.results import (
    Aggregates,
    ClusterRun,
    Point,
    ScrapeSummary,
    Span,
    TimelineSample,
    WorkerPoint,
)
from agentload.options.engines import EnginePreset
from agentload.options.replay import ReplayConfig
from agentload.replay.plan import SessionPlan
from agentload.replay.schedule import PointRun, PointRunner
from agentload.replay.scrape import MetricsScraper
from agentload.replay.shapes import PointView

__all__ = [
    "LivePoint",
    "PointExecutor",
    "ProgressHook",
    "RunInputs",
    "Watcher",
    "make_point",
    "run_point",
]


class LivePoint(Protocol):
    """A point as it runs, as a watcher reads it and ends its window: on this machine the
    ``PointRunner`` itself, on Ray the workers' records merged (``sharded_point.LiveShards``).
    Times are ``clock()`` ns; the records' are ns since ``t0``."""

    @property
    def t0(self) -> int: ...

    @property
    def warm_end(self) -> int:
        """When every lane was past its warm-up (set once ``wait_warm`` returned)."""

    @property
    def records(self) -> Sequence[RequestRecord]: ...

    @property
    def sessions(self) -> Sequence[SessionResult]: ...

    @property
    def clock(self) -> Callable[[], int]: ...

    async def wait_warm(self) -> None: ...

    def mark_drain(self) -> None:
        """The full load ends now: the measured window closes here."""

    def stop(self) -> None:
        """Stop sending; requests in flight complete."""


ProgressHook = Callable[[PointView, int, int], Any]
"""Called as ``hook(view, point index, points)`` while a point runs (``progress.Progress``)."""

Watcher = Callable[[LivePoint], Coroutine[Any, Any, None]]
"""A side task of a point that may end its window (the capacity search's steady-state rule)."""


@dataclass(frozen=True)
class RunInputs:
    """What an executor of a run is given: the options, the plans (their APIs chosen by the
    executor's ``open``), the engine preset and the progress hook."""

    cfg: ReplayConfig
    plans: Sequence[SessionPlan]
    engine: EnginePreset
    progress: ProgressHook | None


class PointExecutor(Protocol):
    """What runs a replay's points, on this machine or on a Ray cluster; ``run.run_replay`` is
    the one orchestration over either (plans, levels, ``--repeat``, ``--capacity``, results)."""

    async def open(self) -> str | None:
        """Probe the target, choose each call's API (``prepare.choose_apis``), set up; the
        simulator profile the target names (``agentload serve``), else None."""

    async def point(self, index: int, level: int, total: int, watcher: Watcher | None) -> Point:
        """Run point ``index`` (of ``total``; 0: not known) at ``level`` lanes, ``watcher``
        beside it."""

    async def aclose(self) -> None: ...

    @property
    def cluster(self) -> ClusterRun | None:
        """The Ray cluster the points ran on (results.json's ``cluster``), else None."""


async def run_point(
    runner: PointRunner,
    cfg: ReplayConfig,
    slo: SLO | None,
    power: NvmlPower | None,
    progress: ProgressHook | None,
    index: int,
    total: int,
    watcher: Watcher | None = None,
) -> Point:
    """Run one point (``total`` points in all, 0: not known) with the side tasks: scraping,
    power, progress and ``watcher`` (the capacity search's steady-state rule)."""
    side: list[asyncio.Task[Any]] = []
    scraper = None
    runner_task = asyncio.ensure_future(runner.run())
    await asyncio.sleep(0)
    if cfg.scrape_metrics:
        scraper = MetricsScraper(cfg.scrape_targets, runner.t0)
        side.append(asyncio.create_task(scraper.run()))
    if power is not None:
        power.samples.clear()
        side.append(asyncio.create_task(power.run()))
    if progress is not None:
        side.append(asyncio.create_task(progress(runner, index, total)))
    if watcher is not None:
        side.append(asyncio.create_task(watcher(runner)))
    interrupted = False
    try:
        run: PointRun = await runner_task
    except asyncio.CancelledError:
        # Ctrl-C (or a cancelled caller): keep what this point measured so far.
        await asyncio.wait([runner_task])
        current = asyncio.current_task()
        if current is not None:
            current.uncancel()
        run = runner.result()
        interrupted = True
    finally:
        for t in side:
            t.cancel()
        await asyncio.gather(*side, return_exceptions=True)
    watts = cfg.power_watts
    if power is not None:
        power.sample()
        watts = average_watts(
            power.samples, run.t0_ns + run.window.start_ns, run.t0_ns + run.window.end_ns
        )
    summary = scraper.summary() if scraper else None
    return make_point(run, cfg, runner.shape.concurrency, slo, watts, summary, interrupted)


def make_point(
    run: PointRun,
    cfg: ReplayConfig,
    level: int,
    slo: SLO | None,
    watts: float | None,
    scrape: dict[str, Any] | None,
    interrupted: bool,
    workers: list[WorkerPoint] | None = None,
) -> Point:
    """A point's results from what it produced: every metric computed once over all of its
    request records (on a cluster: the records of every worker, on one time line)."""
    ctx = MetricContext(run.requests, run.sessions, run.window, cfg.gpus, watts, slo)
    recorded = cfg.schedule == "recorded"
    aggregates = Aggregates.model_validate(aggregate(ctx))
    return Point(
        interrupted=interrupted,
        concurrency=None if cfg.arrival_rate or recorded else level,
        schedule=cfg.schedule,
        arrival_rate=cfg.arrival_rate,
        wall_s=run.wall_s,
        warmup_window=Span(start_ns=0, end_ns=run.warmup_end_ns),
        window=run.window,
        power_watts=watts,
        max_active_sessions=run.stats.max_active_sessions,
        max_inflight_requests=run.stats.max_inflight,
        aggregates=aggregates,
        timeline=[TimelineSample.model_validate(t) for t in run.timeline],
        scrape=ScrapeSummary.model_validate(scrape) if scrape else None,
        sessions=run.sessions,
        requests=run.requests,
        workers=workers,
        client=client_load(run.cpu_s, run.wall_s, aggregates.client_lag_ms),
    )
