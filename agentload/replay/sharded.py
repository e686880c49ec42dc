"""Replay on a Ray cluster (``replay --ray [ADDRESS] [--workers N]``): ``RayPoints``, the
executor ``run.run_replay`` runs its points on (the levels, ``--repeat``, the ``--capacity``
probes: the orchestration is the one of a single machine).

* **Workers.** N Ray actors (``ray_actor.ReplayWorker``, spread over the nodes), each with its
  own event loop and stream client; the driver probes the target, chooses the APIs, and ships
  the plans once (Ray's object store). Every worker probes the target too, so a node that
  cannot reach it is one line before any load.
* **Shards.** A point means what it means on one machine, in total: ``--concurrency C`` is C
  lanes split over the workers (a worker with no lane sits the point out), ``--arrival-rate R``
  is R/N per worker (independent Poisson processes add up to one of rate R), the recorded
  schedule gives each worker every N-th session. Session instance ``i`` (its plan, salt and
  join point) is the same on whichever worker runs it (``shapes.Shard``), so a run with
  ``--sessions`` sends the same set of requests (digests) with 1 or N workers.
* **Clocks.** Each worker stamps with its own monotonic clock; at start the driver measures each
  worker's offset from round trips (``raycluster.measure_offset``), starts every point at one
  common instant (each worker told it in its own clock), and moves every record onto its own
  time line. The largest offset uncertainty is ``results.json``'s ``cluster.residual_skew_ns``;
  each worker's offset, uncertainty and start skew are in ``points[].workers``.
* **Window.** Warm-up ends when the last worker's lanes are warm; ``--duration`` then runs on
  the common time line (the driver tells every worker when to stop); the window ends at the
  first drain of any worker (its first idle lane, the deadline, or the last arrival), as on
  one machine. A capacity probe's steady-state rule reads the merged records
  (``sharded_point.LiveShards``) and, once settled, has every worker stop at once.
* **Exact merge.** Workers stream their request and session records to the driver every
  ``POLL_S``; every metric (percentiles, goodput, SLO attainment, per GPU and per MW, KV
  survival by gap and by context band) is computed once over the union, by the code that
  computes them on one machine (``measure.pointrun.build_point``). Live progress sums the workers' counters.
* **Faults.** A worker that dies mid-point (its process killed, its node gone, no answer within
  ``POLL_TIMEOUT_S``): the requests it had in flight at its last poll count as failed
  (``error_kind`` ``worker_lost``, the cause in ``error``), its running sessions as cut; what
  it reported before is kept; the window ends when the loss was seen; the other workers finish
  the point; ``points[].workers[].lost`` and the report say so. Records a worker completed
  after its last poll (at most ``POLL_S`` of them) are lost with it. Ctrl-C interrupts every
  worker, keeps what each measured and writes partial results, as on one machine.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import time
from collections.abc import Sequence
from typing import Any

from agentload.auth import api_key_from_env
from agentload.client.stream import StreamClient
from agentload.errors import ReplayError
from agentload.measure.capacity_stages import StageDriver, StageMark
from agentload.measure.metrics import SLO
from agentload.measure.pointrun import PointRun, build_point
from agentload.measure.results import ClusterRun, Point, WorkerPoint
from agentload.options.engines import EnginePreset
from agentload.options.replay import ReplayConfig
from agentload.raycluster import Cluster, connect, measure_offset, require_ray
from agentload.replay.plan import SessionPlan
from agentload.replay.points import RunInputs, Watcher
from agentload.replay.prepare import (
    choose_apis,
    connections,
    point_load,
    point_shape,
    recorded_warm,
    top_level,
)
from agentload.replay.ray_actor import ReplayWorker
from agentload.replay.salt import new_nonce, new_run_id
from agentload.replay.scrape import MetricsScraper
from agentload.replay.shapes import LoadShape, Shard
from agentload.replay.sharded_point import (
    POLL_S,
    POLL_TIMEOUT_S,
    LiveShards,
    PointState,
    ProgressView,
    WorkerView,
)

__all__ = ["POLL_S", "POLL_TIMEOUT_S", "RayPoints"]

START_TIMEOUT_S = 120.0
"""The longest the workers may take to start and set up (import, plans, probe)."""
LEAD_NS = 300_000_000
"""The common start of a point is this far after the driver tells the workers (plus the
slowest round trip), so every worker is sleeping towards it when it comes."""


def _split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal shares, larger first."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


class RayPoints:
    """Runs each point of a replay as shards on Ray workers (a ``points.PointExecutor``; see the
    module docstring)."""

    def __init__(self, run: RunInputs) -> None:
        self.ray = require_ray()
        cfg = run.cfg
        self.cfg, self.plans, self.engine, self.progress = cfg, run.plans, run.engine, run.progress
        self.slo = SLO.of(cfg.slo)
        self.run_nonce = new_run_id()
        self.workers: list[WorkerView] = []
        self._cluster: ClusterRun | None = None
        self._exit = contextlib.ExitStack()

    @property
    def cluster(self) -> ClusterRun | None:
        return self._cluster

    async def open(self) -> str | None:
        """Probe the target from here and choose the APIs, then join the cluster and start
        the workers (each probes the target too)."""
        cfg, key = self.cfg, api_key_from_env()
        probe = StreamClient(cfg.endpoint, api_key=key, timeout_s=cfg.timeout_s, max_connections=8)
        try:
            await probe.probe(cfg.model)
            simulator = await probe.simulator_profile(cfg.model)
            await choose_apis(probe, self.plans, cfg)
        finally:
            await probe.aclose()
        cluster = self._exit.enter_context(connect(cfg.ray))
        self._exit.callback(self._kill_workers)
        n = _worker_count(cfg, cluster, self.plans)
        self.workers = await _start_workers(self.ray, cfg, cluster, self.plans, key, n)
        self._cluster = ClusterRun(
            address=cluster.address,
            nodes=cluster.nodes,
            cpus=cluster.cpus,
            workers=len(self.workers),
            residual_skew_ns=max(w.offset.uncertainty_ns for w in self.workers),
        )
        return simulator

    def _kill_workers(self) -> None:
        for w in self.workers:
            with contextlib.suppress(Exception):
                self.ray.kill(w.handle)

    async def aclose(self) -> None:
        self._exit.close()

    async def staged(
        self, index: int, level: int, search: StageDriver, marks: list[StageMark]
    ) -> list[Point]:
        """Not on a cluster: its capacity search runs a point per probe."""
        raise TypeError("a sharded point's lanes are not moved: --capacity-search probes")

    async def point(self, index: int, level: int, total: int, watcher: Watcher | None) -> Point:
        """One point on every taking part worker: started together, followed, merged."""
        cfg = self.cfg
        shape, state = await self._start_point(level, index)
        view = ProgressView(shape)
        interrupted, scraper = await self._follow_point(state, view, index, total, watcher)
        if not interrupted:
            await state.collect(self.ray, "finish")
        run = state.point_run()
        shares = _worker_points(state, run)
        scrape = scraper.summary() if scraper else None
        return build_point(
            run,
            point_load(cfg, level),
            cfg.gpus,
            self.slo,
            cfg.power_watts,
            scrape=scrape,
            interrupted=interrupted,
            workers=shares,
        )

    async def _start_point(self, level: int, index: int) -> tuple[LoadShape, PointState]:
        """Each worker prepared with its share of the point, then started at one common
        instant (each told it in its own clock); the point's shape and its state."""
        cfg, plans = self.cfg, self.plans
        for w in self.workers:
            w.reset()
        shape, parts = _shapes(cfg, level, plans, self.workers, self.engine)
        nonce = new_nonce(self.run_nonce, index)
        calls = {c.key: (p, c) for p in plans for c in p.calls.values()}
        recorded = cfg.schedule == "recorded"
        share = -(-recorded_warm(plans) // len(parts)) if recorded else 0
        await asyncio.gather(
            *(
                w.handle.prepare.remote(mine, nonce, shard, share if recorded else warm)
                for w, mine, shard, warm in parts
            )
        )
        for w, *_ in parts:
            w.active = True
        slowest = max(w.offset.uncertainty_ns for w, *_ in parts) * 2
        t0 = time.perf_counter_ns() + LEAD_NS + slowest
        await asyncio.gather(*(w.handle.start.remote(t0 + w.offset.offset_ns) for w, *_ in parts))
        lanes = cfg.arrival_rate is None and not recorded
        return shape, PointState(t0, [w for w, *_ in parts], calls, lanes)

    async def _follow_point(
        self,
        state: PointState,
        view: ProgressView,
        index: int,
        total: int,
        watcher: Watcher | None,
    ) -> tuple[bool, MetricsScraper | None]:
        """Follow the point until every worker is done (with the scraper, live progress and
        ``watcher`` beside it); Ctrl-C interrupts every worker. Whether it was interrupted,
        and the scraper."""
        cfg, ray = self.cfg, self.ray
        side: list[asyncio.Task[Any]] = []
        scraper = None
        if cfg.scrape_metrics:
            scraper = MetricsScraper(cfg.scrape_targets, state.t0)
            side.append(asyncio.create_task(scraper.run()))
        if self.progress is not None:
            side.append(asyncio.create_task(self.progress(view, index, total)))
        if watcher is not None:
            side.append(asyncio.create_task(watcher(LiveShards(state))))
        interrupted = False
        try:
            await state.follow(ray, cfg.duration_s, view)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            interrupted = True
            await state.collect(ray, "interrupt")
        finally:
            for t in side:
                t.cancel()
            await asyncio.gather(*side, return_exceptions=True)
        return interrupted, scraper


def _worker_count(cfg: ReplayConfig, cluster: Cluster, plans: Sequence[SessionPlan]) -> int:
    n = cluster.workers(cfg.workers)
    if cfg.workers is None and cfg.arrival_rate is None and cfg.schedule == "closed":
        lanes = top_level(cfg)
        if cfg.sessions is not None:
            lanes = min(lanes, cfg.sessions)
        n = min(n, max(1, lanes))  # a worker without a lane would sit every point out
    if cfg.schedule == "recorded":
        n = min(n, len(plans))
    return n


def _spawn(ray: Any, cluster: Cluster, n: int) -> list[Any]:
    """N replay actors spread over the nodes, at the normal scheduling priority: Ray starts its
    workers at niceness 15, below every normal process of the node, and a sender the kernel
    sets aside for any of them leaves late. Ray's own job drivers run at 0 (this variable in
    their runtime environment), and so do the replay workers."""
    cpus = min(1.0, cluster.cpus / n)  # more workers than CPUs share them rather than wait
    actor = ray.remote(num_cpus=cpus, max_restarts=0, max_concurrency=1000)(ReplayWorker)
    normal = {"env_vars": {"RAY_worker_niceness": "0"}}
    return [
        actor.options(scheduling_strategy="SPREAD", runtime_env=normal).remote(k) for k in range(n)
    ]


async def _start_workers(
    ray: Any,
    cfg: ReplayConfig,
    cluster: Cluster,
    plans: Sequence[SessionPlan],
    key: str | None,
    n: int,
) -> list[WorkerView]:
    """N actors spread over the nodes, set up, their clocks measured; one line each."""
    handles = _spawn(ray, cluster, n)
    conns = connections(cfg, plans, n)
    plans_ref = ray.put(list(plans))
    try:
        wheres = await asyncio.wait_for(
            asyncio.gather(*(h.where.remote() for h in handles)), START_TIMEOUT_S
        )
        await asyncio.wait_for(
            asyncio.gather(*(h.setup.remote(cfg, plans_ref, key, conns) for h in handles)),
            START_TIMEOUT_S,
        )
    except TimeoutError:
        raise ReplayError(
            f"--ray {cluster.address}: {n} replay workers did not start within "
            f"{START_TIMEOUT_S:g}s ({cluster.describe()})"
        ) from None
    except ray.exceptions.RayTaskError as exc:
        cause = exc.cause if isinstance(exc.cause, BaseException) else exc
        raise ReplayError(
            f"--ray {cluster.address}: a replay worker could not set up: "
            f"{str(cause).strip().splitlines()[-1] if str(cause).strip() else type(cause).__name__}"
        ) from None
    out: list[WorkerView] = []
    for k, (h, where) in enumerate(zip(handles, wheres, strict=True)):

        def remote_clock(h: Any = h) -> int:
            return int(ray.get(h.clock.remote(), timeout=10))

        off = await asyncio.to_thread(measure_offset, remote_clock)
        w = WorkerView(
            index=k,
            handle=h,
            node=str(where["node"]),
            pid=int(where["pid"]),
            nice=where["nice"],
            offset=off,
        )
        print(
            f"ray: {w.name}: clock offset {off.offset_ns / 1e6:+.3f} ms "
            f"± {off.uncertainty_ns / 1e6:.3f} ms",
            file=sys.stderr,
            flush=True,
        )
        out.append(w)
    print(f"ray: {cluster.describe()}, {n} replay worker(s)", file=sys.stderr, flush=True)
    return out


def _shapes(
    cfg: ReplayConfig,
    level: int,
    plans: Sequence[SessionPlan],
    workers: list[WorkerView],
    engine: EnginePreset,
) -> tuple[LoadShape, list[tuple[WorkerView, LoadShape, Shard, int]]]:
    """The point's shape (as on one machine) and each taking part worker's share of it."""
    recorded = cfg.schedule == "recorded"
    shape = point_shape(cfg, level, len(plans), engine)
    alive = [w for w in workers if w.lost is None]
    parts: list[tuple[WorkerView, LoadShape, Shard, int]] = []
    if cfg.arrival_rate is not None or recorded:
        for k, w in enumerate(alive):
            rate = cfg.arrival_rate / len(alive) if cfg.arrival_rate is not None else None
            own = {"arrival_rate": rate, "duration_s": None, "seed": cfg.seed * 1_000_003 + k}
            mine = dataclasses.replace(shape, load=shape.load.model_copy(update=own))
            w.rate = rate
            parts.append((w, mine, Shard(k, len(alive)), 0))
        return shape, parts
    lanes = level if shape.sessions is None else max(1, min(level, shape.sessions))
    lo = 0
    for k, (w, share) in enumerate(zip(alive, _split(lanes, len(alive)), strict=True)):
        if share == 0:
            continue
        untimed = shape.load.model_copy(update={"duration_s": None})
        mine = dataclasses.replace(shape, load=untimed, concurrency=share)
        w.lanes = share
        parts.append((w, mine, Shard(k, len(alive), (lo, lo + share, lanes)), share))
        lo += share
    return shape, parts


def _worker_points(state: PointState, run: PointRun) -> list[WorkerPoint]:
    """What each worker took part with in the point (``points[].workers``)."""
    return [
        WorkerPoint(
            worker=w.index,
            node=w.node,
            pid=w.pid,
            nice=w.nice,
            lanes=w.lanes,
            arrival_rate=w.rate,
            sessions=sum(1 for s in run.sessions if state.owner.get(s.session) == w.index),
            requests=w.requests,
            clock_offset_ns=w.offset.offset_ns,
            clock_uncertainty_ns=w.offset.uncertainty_ns,
            start_skew_ns=(w.shift or 0),
            lost=w.lost,
            lost_inflight=w.lost_inflight,
            cpu_share=round(w.cpu_s / max(run.wall_s, 1e-9), 4),
        )
        for w in state.workers
    ]
