"""One load point: run it with its side tasks (scraping, power, progress, the capacity search's
watcher) and turn what it produced into a results point (``measure.pointrun.build_point``); what runs a replay's
points (``PointExecutor``: this machine's ``local.LocalPoints`` or Ray's ``sharded.RayPoints``)
and what a watcher is (it reads a ``measure.steady.LivePoint``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentload.measure.capacity_stages import StageDriver, StageMark, split_stages
from agentload.measure.metrics import SLO
from agentload.measure.pointrun import PointRun, build_point, window_watts
from agentload.measure.power import NvmlPower
from agentload.measure.results import (
    ClusterRun,
    Point,
)
from agentload.measure.steady import LivePoint
from agentload.options.engines import EnginePreset
from agentload.options.replay import ReplayConfig
from agentload.replay.plan import SessionPlan
from agentload.replay.prepare import point_load
from agentload.replay.schedule import PointRunner
from agentload.replay.scrape import MetricsScraper
from agentload.replay.shapes import PointView

__all__ = [
    "PointExecutor",
    "ProgressHook",
    "RunInputs",
    "Watcher",
    "run_point",
    "run_staged",
]


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

    async def staged(
        self, index: int, level: int, search: StageDriver, marks: list[StageMark]
    ) -> list[Point]:
        """Run point ``index`` from ``level`` lanes with ``search`` moving them (a staged
        capacity search, which appends its stages to ``marks``); a point per stage. Only this
        machine's executor moves lanes (``ReplayConfig.search_method``)."""

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
    ran = await _run(runner, cfg, power, progress, index, total, watcher)
    load = point_load(cfg, runner.shape.concurrency)
    watts = ran.watts(cfg, ran.run)
    summary = ran.scraper.summary() if ran.scraper else None
    return build_point(
        ran.run, load, cfg.gpus, slo, watts, scrape=summary, interrupted=ran.interrupted
    )


async def run_staged(
    runner: PointRunner,
    cfg: ReplayConfig,
    slo: SLO | None,
    power: NvmlPower | None,
    progress: ProgressHook | None,
    index: int,
    search: StageDriver,
    marks: Sequence[StageMark],
) -> list[Point]:
    """Run a staged capacity search's one point (``search`` moves its lanes and appends its
    stages to ``marks``); one results point per stage (``capacity_stages.split_stages``), the
    scraped metrics (over the whole run) on none of them."""
    ran = await _run(runner, cfg, power, progress, index, 0, lambda _: search(runner))
    parts = split_stages(ran.run, marks)
    return [
        build_point(
            part,
            point_load(cfg, mark.level),
            cfg.gpus,
            slo,
            ran.watts(cfg, part),
            interrupted=ran.interrupted and mark.end_ns is None,
        )
        for part, mark in zip(parts, marks, strict=True)
    ]


@dataclass
class _Ran:
    """What running a point gave: its run, whether Ctrl-C cut it, its scraper and power."""

    run: PointRun
    interrupted: bool
    scraper: MetricsScraper | None
    power: NvmlPower | None

    def watts(self, cfg: ReplayConfig, part: PointRun) -> float | None:
        """The average power over ``part``'s window (measured, else --power-watts)."""
        if self.power is None:
            return cfg.power_watts
        return window_watts(self.power.samples, part)


async def _run(
    runner: PointRunner,
    cfg: ReplayConfig,
    power: NvmlPower | None,
    progress: ProgressHook | None,
    index: int,
    total: int,
    watcher: Watcher | None,
) -> _Ran:
    """Run the point with its side tasks; Ctrl-C keeps what it measured so far."""
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
    if power is not None:
        power.sample()
    return _Ran(run, interrupted, scraper, power)
