"""Replay on a Ray cluster (``replay --ray [ADDRESS] [--workers N]``): the driver.

* **Workers.** N Ray actors (``worker.ReplayWorker``, spread over the nodes), each with its own
  event loop and stream client; the driver reads and plans the traces, probes the target,
  chooses the APIs, and ships the plans once (Ray's object store). Every worker probes the
  target too, so a node that cannot reach it is one line before any load.
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
  one machine.
* **Exact merge.** Workers stream their request and session records to the driver every
  ``POLL_S``; every metric (percentiles, goodput, SLO attainment, per GPU and per MW, KV
  survival by gap and by context band) is computed once over the union, by the code that
  computes them on one machine (``run.make_point``). Live progress sums the workers' counters.
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
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agentload.auth import api_key_from_env
from agentload.intervals import peak_overlap
from agentload.raycluster import ClockOffset, Cluster, connect, measure_offset, require_ray
from agentload.replay.client import StreamClient
from agentload.replay.config import ReplayConfig
from agentload.replay.engines import get_engine
from agentload.replay.metrics import SLO
from agentload.replay.plan import CallPlan, SessionPlan
from agentload.replay.records import (
    RequestRecord,
    SessionResult,
    label_phases,
    steady_window,
)
from agentload.replay.results import ClusterRun, Point, ResultsDocument, WorkerPoint
from agentload.replay.run import (
    ProgressHook,
    build_document,
    choose_apis,
    digest_manifest,
    load_plans,
    make_point,
    point_shape,
    recorded_width,
)
from agentload.replay.salt import new_nonce, new_run_id
from agentload.replay.scrape import MetricsScraper
from agentload.replay.shapes import LiveStats, LoadShape, PointRun, Shard
from agentload.replay.worker import ReplayWorker

__all__ = ["POLL_S", "POLL_TIMEOUT_S", "run_sharded"]

POLL_S = 0.2
"""How often the driver collects every worker's new records."""
POLL_TIMEOUT_S = 30.0
"""A worker that does not answer a poll within this long is lost."""
START_TIMEOUT_S = 120.0
"""The longest the workers may take to start and set up (import, plans, probe)."""
LEAD_NS = 300_000_000
"""The common start of a point is this far after the driver tells the workers (plus the
slowest round trip), so every worker is sleeping towards it when it comes."""
WORKER_LOST = "worker_lost"


@dataclass
class _Worker:
    """The driver's view of one worker."""

    index: int
    handle: Any
    node: str
    pid: int
    offset: ClockOffset
    lost: str | None = None
    # ---- per point
    active: bool = False
    lanes: int | None = None
    rate: float | None = None
    shift: int | None = None
    """ns to add to the worker's point-relative times to put them on the driver's line."""
    t0: int | None = None
    stats: LiveStats = field(default_factory=LiveStats)
    inflight: list[tuple[int, str, str, int, int, int]] = field(default_factory=list)
    running: list[tuple[int, str, int, int]] = field(default_factory=list)
    warm_end: int | None = None
    drain: int | None = None
    done: bool = False
    started_sessions: int = 0
    requests: int = 0
    lost_inflight: int = 0

    def reset(self) -> None:
        self.active, self.lanes, self.rate, self.shift, self.t0 = False, None, None, None, None
        self.stats = LiveStats()
        self.inflight, self.running = [], []
        self.warm_end = self.drain = None
        self.done = False
        self.started_sessions = self.requests = self.lost_inflight = 0

    @property
    def name(self) -> str:
        return f"worker {self.index} ({self.node}, pid {self.pid})"


@dataclass
class _View:
    """What the progress display reads: the workers' counters summed, the point's shape."""

    shape: LoadShape
    stats: LiveStats = field(default_factory=LiveStats)


def _sum_stats(stats: Sequence[LiveStats]) -> LiveStats:
    out = LiveStats()
    for s in stats:
        for f in dataclasses.fields(LiveStats):
            if f.name != "ttfts":
                setattr(out, f.name, getattr(out, f.name) + getattr(s, f.name))
    ttfts: deque[int] = deque(maxlen=256)
    for s in stats:
        ttfts.extend(s.ttfts)
    out.ttfts = ttfts
    return out


def _split(total: int, parts: int) -> list[int]:
    """``total`` as ``parts`` near-equal shares, larger first."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


async def run_sharded(cfg: ReplayConfig, progress: ProgressHook | None = None) -> ResultsDocument:
    """Every point of ``cfg`` on the Ray cluster ``cfg.ray`` (see the module docstring)."""
    ray = require_ray()
    engine = get_engine(cfg.engine)
    if not cfg.extras:
        engine = engine.without_extras()
    plans, exclusion = load_plans(
        cfg.traces, cfg.max_context, cfg.salt_at, cfg.fit, cfg.tokenizer, cfg.seed
    )
    key = api_key_from_env()
    probe = StreamClient(cfg.endpoint, api_key=key, timeout_s=cfg.timeout_s, max_connections=8)
    try:
        await probe.probe(cfg.model)
        await choose_apis(probe, plans, cfg)
    finally:
        await probe.aclose()
    manifest = digest_manifest(plans)
    slo = SLO(**cfg.slo) if cfg.slo else None
    with connect(cfg.ray) as cluster:
        n = _worker_count(cfg, cluster, plans)
        workers = await _start_workers(ray, cfg, cluster, plans, key, n)
        points: list[Point] = []
        interrupted = False
        run_nonce = new_run_id()
        try:
            for i, level in enumerate(cfg.levels):
                point = await _run_point(
                    ray, workers, plans, cfg, level, i, run_nonce, slo, progress
                )
                points.append(point)
                if point.interrupted:
                    interrupted = True
                    break
        finally:
            for w in workers:
                with contextlib.suppress(Exception):
                    ray.kill(w.handle)
        skew = max(w.offset.uncertainty_ns for w in workers)
        info = ClusterRun(
            address=cluster.address,
            nodes=cluster.nodes,
            cpus=cluster.cpus,
            workers=len(workers),
            residual_skew_ns=skew,
        )
    return build_document(cfg, engine, plans, exclusion, manifest, interrupted, points, info)


def _worker_count(cfg: ReplayConfig, cluster: Cluster, plans: Sequence[SessionPlan]) -> int:
    n = cluster.workers(cfg.workers)
    if cfg.workers is None and cfg.arrival_rate is None and cfg.schedule == "closed":
        lanes = max(cfg.levels)
        if cfg.sessions is not None:
            lanes = min(lanes, cfg.sessions)
        n = min(n, max(1, lanes))  # a worker without a lane would sit every point out
    if cfg.schedule == "recorded":
        n = min(n, len(plans))
    return n


async def _start_workers(
    ray: Any,
    cfg: ReplayConfig,
    cluster: Cluster,
    plans: Sequence[SessionPlan],
    key: str | None,
    n: int,
) -> list[_Worker]:
    """N actors spread over the nodes, set up, their clocks measured; one line each."""
    from agentload.errors import ReplayError

    cpus = min(1.0, cluster.cpus / n)  # more workers than CPUs share them rather than wait
    actor = ray.remote(num_cpus=cpus, max_restarts=0, max_concurrency=1000)(ReplayWorker)
    handles = [actor.options(scheduling_strategy="SPREAD").remote(k) for k in range(n)]
    width = max(pl.max_width for pl in plans)
    top = max(cfg.levels) if not cfg.arrival_rate else 256
    conns = max(8, -(-top // n) * width + 8)
    if cfg.schedule == "recorded":
        conns = min(4096, sum(len(p.calls) for p in plans) + 8)
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
    out: list[_Worker] = []
    for k, (h, where) in enumerate(zip(handles, wheres, strict=True)):

        def remote_clock(h: Any = h) -> int:
            return int(ray.get(h.clock.remote(), timeout=10))

        off = await asyncio.to_thread(measure_offset, remote_clock)
        w = _Worker(index=k, handle=h, node=str(where["node"]), pid=int(where["pid"]), offset=off)
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
    cfg: ReplayConfig, level: int, recorded_sessions: int, workers: list[_Worker]
) -> tuple[LoadShape, list[tuple[_Worker, LoadShape, Shard, int]]]:
    """The point's shape (as on one machine) and each taking part worker's share of it."""
    recorded = cfg.schedule == "recorded"
    shape = point_shape(cfg, level, recorded_sessions, get_engine(cfg.engine))
    alive = [w for w in workers if w.lost is None]
    parts: list[tuple[_Worker, LoadShape, Shard, int]] = []
    if cfg.arrival_rate is not None or recorded:
        for k, w in enumerate(alive):
            rate = cfg.arrival_rate / len(alive) if cfg.arrival_rate is not None else None
            mine = dataclasses.replace(
                shape, arrival_rate=rate, duration_s=None, seed=cfg.seed * 1_000_003 + k
            )
            w.rate = rate
            parts.append((w, mine, Shard(k, len(alive)), 0))
        return shape, parts
    lanes = level if shape.sessions is None else max(1, min(level, shape.sessions))
    lo = 0
    for k, (w, share) in enumerate(zip(alive, _split(lanes, len(alive)), strict=True)):
        if share == 0:
            continue
        mine = dataclasses.replace(shape, concurrency=share, duration_s=None)
        w.lanes = share
        parts.append((w, mine, Shard(k, len(alive), (lo, lo + share, lanes)), share))
        lo += share
    return shape, parts


async def _run_point(
    ray: Any,
    workers: list[_Worker],
    plans: Sequence[SessionPlan],
    cfg: ReplayConfig,
    level: int,
    index: int,
    run_nonce: str,
    slo: SLO | None,
    progress: ProgressHook | None,
) -> Point:
    for w in workers:
        w.reset()
    shape, parts = _shapes(cfg, level, len(plans), workers)
    nonce = new_nonce(run_nonce, index)
    calls = {c.key: (p, c) for p in plans for c in p.calls.values()}
    recorded = cfg.schedule == "recorded"
    warm_rec = max(2 * recorded_width(plans), min(64, sum(len(p.calls) for p in plans)))
    await asyncio.gather(
        *(
            w.handle.prepare.remote(
                mine, nonce, shard, -(-warm_rec // len(parts)) if recorded else warm
            )
            for w, mine, shard, warm in parts
        )
    )
    for w, *_ in parts:
        w.active = True
    slowest = max(w.offset.uncertainty_ns for w, *_ in parts) * 2
    t0 = time.perf_counter_ns() + LEAD_NS + slowest
    await asyncio.gather(*(w.handle.start.remote(t0 + w.offset.offset_ns) for w, *_ in parts))
    lanes = cfg.arrival_rate is None and not recorded
    state = _PointState(t0, [w for w, *_ in parts], calls, lanes)
    view = _View(shape)
    side: list[asyncio.Task[Any]] = []
    scraper = None
    if cfg.scrape_metrics:
        scraper = MetricsScraper(cfg.scrape_metrics, t0)
        side.append(asyncio.create_task(scraper.run()))
    if progress is not None:
        side.append(asyncio.create_task(progress(view, index, len(cfg.levels))))
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
    if not interrupted:
        await state.collect(ray, "finish")
    run = state.point_run()
    shares = [
        WorkerPoint(
            worker=w.index,
            node=w.node,
            pid=w.pid,
            lanes=w.lanes,
            arrival_rate=w.rate,
            sessions=sum(1 for s in run.sessions if state.owner.get(s.session) == w.index),
            requests=w.requests,
            clock_offset_ns=w.offset.offset_ns,
            clock_uncertainty_ns=w.offset.uncertainty_ns,
            start_skew_ns=(w.shift or 0),
            lost=w.lost,
            lost_inflight=w.lost_inflight,
        )
        for w in state.workers
    ]
    scrape = scraper.summary() if scraper else None
    return make_point(run, cfg, level, slo, cfg.power_watts, scrape, interrupted, shares)


class _PointState:
    """The merged records of one point as the workers report them."""

    def __init__(
        self,
        t0: int,
        workers: list[_Worker],
        calls: dict[str, tuple[SessionPlan, CallPlan]],
        lanes: bool,
    ) -> None:
        self.t0 = t0
        self.lanes = lanes
        self.workers = workers
        self.calls = calls
        self.requests: list[RequestRecord] = []
        self.sessions: list[SessionResult] = []
        self.owner: dict[int, int] = {}
        self.timeline: list[dict[str, Any]] = []
        self.stop_sent = False
        self.end = t0

    def now(self) -> int:
        return time.perf_counter_ns() - self.t0

    # ---- following the point --------------------------------------------------------------
    async def follow(self, ray: Any, duration_s: float | None, view: _View) -> None:
        next_sample = 0
        while True:
            await self.poll(ray, "poll")
            view.stats = _sum_stats([w.stats for w in self.workers])
            if self.now() >= next_sample:
                self.sample(view.stats)
                next_sample += 1_000_000_000
            live = [w for w in self.workers if w.lost is None]
            if duration_s is not None and not self.stop_sent and live:
                warm = [w.warm_end for w in live]
                if all(x is not None for x in warm):
                    stop = max(x for x in warm if x is not None) + int(duration_s * 1e9)
                    await asyncio.gather(
                        *(
                            w.handle.stop_at.remote(self.t0 + stop + w.offset.offset_ns)
                            for w in live
                        ),
                        return_exceptions=True,
                    )
                    self.stop_sent = True
            if all(w.done for w in live):
                return
            await asyncio.sleep(POLL_S)

    async def poll(self, ray: Any, method: str) -> None:
        live = [w for w in self.workers if w.lost is None and not (w.done and method == "poll")]

        async def one(w: _Worker) -> None:
            timeout = POLL_TIMEOUT_S  # finish comes after every worker said done: quick too
            try:
                got = await asyncio.wait_for(getattr(w.handle, method).remote(), timeout)
            except TimeoutError:
                with contextlib.suppress(Exception):
                    ray.kill(w.handle)
                self.lose(w, f"no answer within {timeout:g}s")
                return
            except ray.exceptions.RayError as exc:
                text = str(exc).strip().splitlines()
                self.lose(w, f"{type(exc).__name__}: {text[0] if text else 'no detail'}")
                return
            self.merge(w, got)

        await asyncio.gather(*(one(w) for w in live))

    async def collect(self, ray: Any, method: str) -> None:
        """The last records of every live worker (``finish``: after its point ended;
        ``interrupt``: cancelling it first)."""
        await self.poll(ray, method)
        self.end = time.perf_counter_ns()
        self.sample(_sum_stats([w.stats for w in self.workers]))

    def merge(self, w: _Worker, got: dict[str, Any]) -> None:
        if got["started"] and w.shift is None:
            w.t0 = int(got["t0"])
            w.shift = w.t0 - w.offset.offset_ns - self.t0
        shift = w.shift or 0
        for r in got["requests"]:
            r.scheduled_ns += shift
            r.send_ns += shift
            r.end_ns += shift
            if r.first_ns is not None:
                r.first_ns += shift
            self.requests.append(r)
            w.requests += 1
        for s in got["sessions"]:
            s.start_ns += shift
            s.end_ns += shift
            self.sessions.append(s)
            self.owner[s.session] = w.index
        w.stats = got["stats"]
        w.inflight = [tuple(x) for x in got["inflight"]]
        w.running = [tuple(x) for x in got["active"]]
        w.started_sessions = int(got["started_sessions"])
        for i, *_ in w.running:
            self.owner[i] = w.index
        w.warm_end = None if got["warm_end"] is None else got["warm_end"] + shift
        w.drain = None if got["drain"] is None else got["drain"] + shift
        w.done = bool(got["done"])

    def lose(self, w: _Worker, cause: str) -> None:
        """Account for a worker lost mid-point (see the module docstring)."""
        at = self.now()
        shift = w.shift or 0
        w.lost = f"{w.name} lost {at / 1e9:.1f}s into the point: {cause}"
        w.lost_inflight = len(w.inflight)
        w.done = True
        w.drain = at if w.drain is None else min(w.drain, at)
        w.stats.inflight = 0
        w.stats.active_sessions = 0
        for inst, key, phase, sched, sent_at, expected in w.inflight:
            plan, call = self.calls[key]
            self.requests.append(
                RequestRecord(
                    session=inst,
                    source=plan.key,
                    agent=call.agent_id,
                    call=key,
                    seq=call.seq,
                    turn_depth=call.seq,
                    phase=phase,
                    digest=call.digest,
                    scheduled_ns=sched + shift,
                    send_ns=sent_at + shift,
                    end_ns=max(at, sent_at + shift),
                    error_kind=WORKER_LOST,
                    error=w.lost,
                    expected_tokens=expected,
                    recorded_prompt_tokens=call.prompt_tokens,
                    prompt_tokens_ours=call.ours(),
                    ceiling_tokens=call.ceiling(),
                    within_ceiling_tokens=call.within(),
                    recorded_gap_ns=call.recorded_gap_ns,
                )
            )
            w.requests += 1
        for inst, key, lane, start in w.running:
            mine = [r for r in self.requests if r.session == inst]
            self.sessions.append(
                SessionResult(
                    session=inst,
                    source=key,
                    lane=lane,
                    start_ns=start + shift,
                    end_ns=at,
                    joined_at_ns=None,
                    complete=False,
                    requests=len(mine),
                    warmup_requests=sum(1 for r in mine if r.phase == "warmup"),
                )
            )
        w.inflight, w.running = [], []
        print(
            f"ray: {w.lost}; its {w.lost_inflight} request(s) in flight count as failed "
            f"({WORKER_LOST}), the other workers finish the point",
            file=sys.stderr,
            flush=True,
        )

    def sample(self, st: LiveStats) -> None:
        self.timeline.append(
            {
                "t_ns": max(0, self.now()),
                "active_sessions": st.active_sessions,
                "inflight": st.inflight,
                "requests": st.requests,
                "errors": st.errors,
                "output_tokens": st.output_tokens,
            }
        )

    # ---- the merged point ------------------------------------------------------------------
    def point_run(self) -> PointRun:
        end = self.end - self.t0
        warm = [w.warm_end for w in self.workers if w.warm_end is not None]
        # lanes: warm when the last worker's lanes are; arrivals and the recorded schedule have
        # no warm-up: the first worker to start opens the window (a later one's start skew
        # must not push another's first requests into the ramp)
        warm_end = (max(warm) if self.lanes else min(warm)) if warm else end
        # lanes: the first idle lane of any worker ends the full load; arrivals and the
        # recorded schedule: the last worker to stop sending (each sent its share of them)
        drains = [w.drain for w in self.workers if w.drain is not None and w.lost is None]
        drain = (min(drains) if self.lanes else max(drains)) if drains else end
        lost = [w.drain for w in self.workers if w.drain is not None and w.lost is not None]
        if lost:
            drain = min([drain, *lost])
        window = steady_window(
            warm_end,
            drain,
            self.requests,
            "from the end of warm-up (every lane of every worker past its warm-up) to the "
            "moment the run stopped sending at full load (duration deadline, first idle lane "
            "of any worker, last arrival, or a lost worker)",
        )
        self.requests.sort(key=lambda r: (r.send_ns, r.session, r.call))
        label_phases(self.requests, window)
        self.sessions.sort(key=lambda s: s.session)
        stats = _sum_stats([w.stats for w in self.workers])
        stats.max_inflight = peak_overlap([(r.send_ns, r.end_ns) for r in self.requests])
        stats.max_active_sessions = peak_overlap([(s.start_ns, s.end_ns) for s in self.sessions])
        return PointRun(
            t0_ns=self.t0,
            requests=self.requests,
            sessions=self.sessions,
            window=window,
            warmup_end_ns=warm_end,
            timeline=self.timeline,
            stats=stats,
            wall_s=end / 1e9,
        )
