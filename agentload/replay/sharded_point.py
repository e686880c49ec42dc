"""One point of a sharded replay (``replay --ray``) as the driver follows it (see ``sharded``).

``WorkerView`` is the driver's view of one worker (its handle, clock offset and what it
reported of the point); ``PointState`` polls the workers every ``POLL_S``, moves their records
onto the driver's time line and merges them, tells them when ``--duration`` ends, accounts for
a worker lost mid-point (its requests in flight failed as ``worker_lost``, its sessions cut),
and makes the merged ``PointRun`` (window, phases, counters) once the point ended.
``ProgressView`` is what live progress reads: the workers' counters summed; ``LiveShards`` is
what the capacity search's steady-state rule reads (the merged records so far) and how it ends
the window (every worker told to stop now).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentload.intervals import peak_overlap
from agentload.measure.errorkinds import ErrorKind
from agentload.measure.pointrun import PointRun
from agentload.measure.records import (
    Phase,
    RequestRecord,
    SessionResult,
    Window,
    label_phases,
    steady_window,
)
from agentload.measure.steady import Pending
from agentload.raycluster import ClockOffset
from agentload.replay.plan import CallPlan, SessionPlan
from agentload.replay.ray_actor import unpack_requests
from agentload.replay.shapes import LiveStats, LoadShape

__all__ = [
    "POLL_S",
    "POLL_TIMEOUT_S",
    "WORKER_LOST",
    "LiveShards",
    "PointState",
    "ProgressView",
    "WorkerView",
    "sum_stats",
]

POLL_S = 0.2
"""How often the driver collects every worker's new records."""
POLL_TIMEOUT_S = 30.0
"""A worker that does not answer a poll within this long is lost."""
WORKER_LOST = ErrorKind.WORKER_LOST


@dataclass
class WorkerView:
    """The driver's view of one worker."""

    index: int
    handle: Any
    node: str
    pid: int
    nice: int | None
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
    cpu_s: float = 0.0
    """CPU seconds its event loop used since the point started (its last poll)."""

    def reset(self) -> None:
        self.active, self.lanes, self.rate, self.shift, self.t0 = False, None, None, None, None
        self.stats = LiveStats()
        self.inflight, self.running = [], []
        self.warm_end = self.drain = None
        self.done = False
        self.started_sessions = self.requests = self.lost_inflight = 0
        self.cpu_s = 0.0

    @property
    def name(self) -> str:
        return f"worker {self.index} ({self.node}, pid {self.pid})"


@dataclass
class ProgressView:
    """What the progress display reads: the workers' counters summed, the point's shape."""

    shape: LoadShape
    stats: LiveStats = field(default_factory=LiveStats)
    note: str = ""


def sum_stats(stats: Sequence[LiveStats]) -> LiveStats:
    """The workers' counters added up (the latest TTFTs of all of them)."""
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


class PointState:
    """The merged records of one point as the workers report them."""

    def __init__(
        self,
        t0: int,
        workers: list[WorkerView],
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
    async def follow(self, ray: Any, duration_s: float | None, view: ProgressView) -> None:
        next_sample = 0
        while True:
            await self.poll(ray, "poll")
            view.stats = sum_stats([w.stats for w in self.workers])
            if self.now() >= next_sample:
                self.sample(view.stats)
                next_sample += 1_000_000_000
            live = [w for w in self.workers if w.lost is None]
            if duration_s is not None and not self.stop_sent and live:
                await self._stop_after(live, duration_s)
            if all(w.done for w in live):
                return
            await asyncio.sleep(POLL_S)

    async def _stop_after(self, live: list[WorkerView], duration_s: float) -> None:
        """Once every live worker is warm, tell each to stop ``duration_s`` after the last."""
        warm = [w.warm_end for w in live]
        if all(x is not None for x in warm):
            stop = max(x for x in warm if x is not None) + int(duration_s * 1e9)
            await asyncio.gather(
                *(w.handle.stop_at.remote(self.t0 + stop + w.offset.offset_ns) for w in live),
                return_exceptions=True,
            )
            self.stop_sent = True

    async def stop_now(self) -> None:
        """Tell every live worker to stop sending now (its clock's now): the window ends at the
        first worker's drain, as at the end of ``--duration``."""
        live = [w for w in self.workers if w.lost is None and not w.done]
        self.stop_sent = True
        now = time.perf_counter_ns()
        await asyncio.gather(
            *(w.handle.stop_at.remote(now + w.offset.offset_ns) for w in live),
            return_exceptions=True,
        )

    async def poll(self, ray: Any, method: str) -> None:
        live = [w for w in self.workers if w.lost is None and not (w.done and method == "poll")]

        async def one(w: WorkerView) -> None:
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
        self.sample(sum_stats([w.stats for w in self.workers]))

    def merge(self, w: WorkerView, got: dict[str, Any]) -> None:
        """Take a worker's poll: its new records moved onto the driver's time line, its
        counters, requests and sessions in flight, warm-up end, drain and whether it is done."""
        if got["started"] and w.shift is None:
            w.t0 = int(got["t0"])
            w.shift = w.t0 - w.offset.offset_ns - self.t0
        shift = w.shift or 0
        self._merge_records(w, unpack_requests(got["requests"]), got["sessions"], shift)
        w.stats = got["stats"]
        w.inflight = [tuple(x) for x in got["inflight"]]
        w.running = [tuple(x) for x in got["active"]]
        w.started_sessions = int(got["started_sessions"])
        for i, *_ in w.running:
            self.owner[i] = w.index
        w.warm_end = None if got["warm_end"] is None else got["warm_end"] + shift
        w.drain = None if got["drain"] is None else got["drain"] + shift
        w.done = bool(got["done"])
        w.cpu_s = float(got.get("cpu_s", 0.0))

    def _merge_records(
        self,
        w: WorkerView,
        requests: list[RequestRecord],
        sessions: list[SessionResult],
        shift: int,
    ) -> None:
        """Add a worker's new request and session records, ``shift`` ns later."""
        for r in requests:
            r.scheduled_ns += shift
            r.send_ns += shift
            r.end_ns += shift
            if r.first_ns is not None:
                r.first_ns += shift
            self.requests.append(r)
            w.requests += 1
        for s in sessions:
            s.start_ns += shift
            s.end_ns += shift
            self.sessions.append(s)
            self.owner[s.session] = w.index

    def lose(self, w: WorkerView, cause: str) -> None:
        """Account for a worker lost mid-point (see ``sharded``'s module docstring)."""
        at = self.now()
        shift = w.shift or 0
        w.lost = f"{w.name} lost {at / 1e9:.1f}s into the point: {cause}"
        w.lost_inflight = len(w.inflight)
        w.done = True
        w.drain = at if w.drain is None else min(w.drain, at)
        w.stats.inflight = 0
        w.stats.active_sessions = 0
        for inflight in w.inflight:
            plan, call = self.calls[inflight[1]]
            self.requests.append(_lost_request(plan, call, inflight, shift, at, w.lost))
            w.requests += 1
        for inst, key, lane, start in w.running:
            mine = [r for r in self.requests if r.session == inst]
            self.sessions.append(_cut_session(inst, key, lane, (start + shift, at), mine))
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
    def _window(self, end: int) -> tuple[int, Window]:
        """The end of warm-up and the measured window over every worker (ns since ``t0``)."""
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
            "from the end of warm-up (every lane of every worker past its warm-up, and every "
            "request the worker sent before then past its first token) to the "
            "moment the run stopped sending at full load (duration deadline, first idle lane "
            "of any worker, last arrival, or a lost worker)",
        )
        return warm_end, window

    def point_run(self) -> PointRun:
        """The merged point: records sorted and labelled, counters summed."""
        end = self.end - self.t0
        warm_end, window = self._window(end)
        self.requests.sort(key=lambda r: (r.send_ns, r.session, r.call))
        label_phases(self.requests, window)
        self.sessions.sort(key=lambda s: s.session)
        return PointRun(
            t0_ns=self.t0,
            requests=self.requests,
            sessions=self.sessions,
            window=window,
            warmup_end_ns=warm_end,
            timeline=self.timeline,
            wall_s=end / 1e9,
            max_active_sessions=peak_overlap([(s.start_ns, s.end_ns) for s in self.sessions]),
            max_inflight=peak_overlap([(r.send_ns, r.end_ns) for r in self.requests]),
            cpu_s=max((w.cpu_s for w in self.workers), default=0.0),
        )


def _lost_request(
    plan: SessionPlan,
    call: CallPlan,
    inflight: tuple[int, str, str, int, int, int],
    shift: int,
    at: int,
    cause: str,
) -> RequestRecord:
    """The failed record (``worker_lost``) of a request a lost worker had in flight."""
    inst, key, phase, sched, sent_at, expected = inflight
    return RequestRecord(
        session=inst,
        source=plan.key,
        agent=call.agent_id,
        call=key,
        seq=call.seq,
        turn_depth=call.seq,
        phase=Phase(phase),
        digest=call.digest,
        scheduled_ns=sched + shift,
        send_ns=sent_at + shift,
        end_ns=max(at, sent_at + shift),
        error_kind=WORKER_LOST,
        error=cause,
        expected_tokens=expected,
        recorded_prompt_tokens=call.prompt_tokens,
        prompt_tokens_ours=call.ours(),
        ceiling_tokens=call.ceiling(),
        within_ceiling_tokens=call.within(),
        recorded_gap_ns=call.recorded_gap_ns,
    )


def _cut_session(
    inst: int, key: str, lane: int, span: tuple[int, int], mine: list[RequestRecord]
) -> SessionResult:
    """The cut record of a session a lost worker was running over ``span`` (its ``mine``
    requests so far)."""
    start, end = span
    return SessionResult(
        session=inst,
        source=key,
        lane=lane,
        start_ns=start,
        end_ns=end,
        joined_at_ns=None,
        complete=False,
        requests=len(mine),
        warmup_requests=sum(1 for r in mine if r.phase == Phase.WARMUP),
    )


class LiveShards:
    """A sharded point as it runs, as the capacity search's steady-state rule reads it and ends
    it (a ``points.LivePoint``): the records the workers reported so far, on the driver's time
    line; warm once every live worker's lanes are; ``stop`` tells every worker to stop now."""

    def __init__(self, state: PointState) -> None:
        self.state = state
        self.t0 = state.t0
        self.warm_end = 0
        self.clock: Callable[[], int] = time.perf_counter_ns
        self._stopping: asyncio.Task[None] | None = None

    @property
    def records(self) -> list[RequestRecord]:
        return self.state.requests

    @property
    def sessions(self) -> list[SessionResult]:
        return self.state.sessions

    async def wait_warm(self) -> None:
        """Until every live worker's lanes are past their warm-up (or every worker is done)."""
        while True:
            live = [w for w in self.state.workers if w.lost is None]
            warm = [w.warm_end for w in live if w.warm_end is not None]
            if live and len(warm) == len(live):
                self.warm_end = self.t0 + max(warm)
                return
            if all(w.done for w in live):
                self.warm_end = self.clock()
                return
            await asyncio.sleep(POLL_S)

    def mark_drain(self) -> None:
        """The workers mark their own drain when told to stop (``stop``)."""

    def pending(self, since_ns: int) -> Pending:
        """The requests (not warm-up) and sessions in flight that the workers' last polls
        reported, sent (started) at ``since_ns`` or later on the driver's time line."""
        sends: list[int] = []
        starts: list[int] = []
        for w in self.state.workers:
            if w.lost is not None or w.shift is None:
                continue
            base = w.shift  # their times are ns since the worker's t0
            sends += [f[4] + base for f in w.inflight if f[2] != Phase.WARMUP]
            starts += [r[3] + base for r in w.running]
        sends = [t for t in sends if t >= since_ns]
        starts = [t for t in starts if t >= since_ns]
        return Pending(len(sends), len(starts), min(sends, default=None), min(starts, default=None))

    def stop(self) -> None:
        if self._stopping is None:
            self._stopping = asyncio.ensure_future(self.state.stop_now())
