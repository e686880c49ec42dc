"""The three schedules of a load point as strategies behind one interface (``Schedule``):
closed-loop lanes (``LaneSchedule``), Poisson arrivals (``ArrivalSchedule``) and the recorded
open-loop schedule (``RecordedSchedule``); ``schedule_for`` picks one from a ``LoadShape``.

A schedule decides which session instances run and when their calls are sent; it drives the
point's runner (``schedule.PointRunner``) through ``Host``, which keeps what every schedule
shares: sending and recording requests, session accounting, warm-up, drain and the stop.
The timing rules of each schedule are in ``schedule``'s module docstring.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from functools import partial
from typing import Protocol

from agentload.measure.records import Phase
from agentload.replay.plan import CallPlan
from agentload.replay.shapes import LoadShape, SessionInstance, SessionSource

LEAD_NS = 5_000_000
"""Each scheduled call's task wakes this long before its due time (on the recorded schedule:
starts, and builds its request) and takes its connection, so none of it is part of its lag;
the request itself is written at the due time by the waker (``PointRunner.send_at``)."""

__all__ = [
    "ArrivalSchedule",
    "Host",
    "LaneSchedule",
    "RecordedSchedule",
    "Schedule",
    "schedule_for",
]


class Host(Protocol):
    """What a schedule uses of the point runner (``schedule.PointRunner``)."""

    @property
    def shape(self) -> LoadShape: ...

    @property
    def source(self) -> SessionSource: ...

    @property
    def clock(self) -> Callable[[], int]: ...

    @property
    def stopped(self) -> bool: ...

    def expect_warm(self, lanes: int) -> None: ...

    def warm_done(self) -> None: ...

    def mark_drain(self) -> None: ...

    async def sleep_until(self, t: int) -> bool: ...

    def session_started(self, inst: SessionInstance, lane: int, start: int) -> None: ...

    def session_ended(
        self,
        inst: SessionInstance,
        lane: int,
        span: tuple[int, int],
        sent: int,
        planned: int,
        warm_sent: int,
    ) -> None: ...

    async def send(
        self,
        inst: SessionInstance,
        call: CallPlan,
        scheduled: int,
        phase: Phase,
        prev_end: int | None,
        body: bytes | None = None,
    ) -> int: ...

    async def send_at(
        self,
        inst: SessionInstance,
        call: CallPlan,
        t: int,
        prev_end: Callable[[], int | None],
        body: bytes,
    ) -> int | None: ...

    def body(self, inst: SessionInstance, call: CallPlan, phase: Phase) -> bytes: ...


class Schedule(Protocol):
    """How a point offers its sessions to the target."""

    async def run(self, host: Host) -> None:
        """Start sessions and send their calls until the source is exhausted or the run
        stopped; returns when every call it sent completed."""
        ...


def schedule_for(shape: LoadShape) -> Schedule:
    """The schedule ``shape`` asks for: recorded, else arrivals at a rate, else lanes."""
    if shape.load.schedule == "recorded":
        return RecordedSchedule()
    if shape.load.arrival_rate:
        return ArrivalSchedule(shape.load.arrival_rate)
    return LaneSchedule()


# ---- closed loop --------------------------------------------------------------------------
class LaneSchedule:
    """Closed loop: ``concurrency`` lanes, each running one session after another; a capacity
    search's staged run moves the number of lanes while it runs (``set_lanes``)."""

    def __init__(self) -> None:
        self._host: Host | None = None
        self._tg: asyncio.TaskGroup | None = None
        self._tasks: dict[int, asyncio.Task[None]] = {}
        """Every lane started (numbered from 0); those in ``_halted`` were taken away."""
        self._halted: set[int] = set()
        self._warming: set[int] = set()

    @property
    def lanes(self) -> int:
        """The lanes running (not taken away)."""
        return len(self._tasks) - len(self._halted)

    @property
    def warming(self) -> int:
        """Lanes added by ``set_lanes`` still in their warm-up."""
        return len(self._warming)

    async def run(self, host: Host) -> None:
        """Every lane until the source is exhausted or the run stopped."""
        n = host.shape.concurrency
        if host.shape.sessions is not None:
            n = max(1, min(n, host.shape.sessions))
        host.expect_warm(n)
        self._host = host
        async with asyncio.TaskGroup() as tg:
            self._tg = tg
            for _ in range(n):
                self._start(host.warm_done)
        self._tg = None

    def _start(self, warm_done: Callable[[], None] | None) -> None:
        """Start the next lane; ``warm_done``: what its warm-up's end calls (None: a lane
        added while the point runs, counted in ``warming`` until then)."""
        assert self._tg is not None and self._host is not None
        lane = len(self._tasks)
        if warm_done is None:
            self._warming.add(lane)
            warm_done = partial(self._warming.discard, lane)
        self._tasks[lane] = self._tg.create_task(self._lane(self._host, lane, warm_done))

    def set_lanes(self, n: int) -> None:
        """Run ``n`` lanes from now: new ones join their sessions mid-flight after a warm-up;
        those taken away (the last started first) are cancelled, calls in flight and all: what
        they sent and had not completed is not recorded."""
        if self._tg is None:
            return
        for lane in sorted(set(self._tasks) - self._halted, reverse=True):
            if self.lanes <= n:
                break
            self._halted.add(lane)
            self._warming.discard(lane)
            self._tasks[lane].cancel()
        while self.lanes < n:
            self._start(None)

    async def _lane(self, host: Host, lane: int, warm_done: Callable[[], None]) -> None:
        """One lane: its first session may join mid-flight, the next ones start from zero."""
        first = True
        try:
            while not host.stopped:
                inst = host.source.next(first and host.shape.load.start_at == "random")
                if inst is None:
                    break
                await run_session(host, inst, lane, warm_done if first else None)
                first = False
        finally:
            if first:
                warm_done()
            if lane not in self._halted:
                host.mark_drain()


class ArrivalSchedule:
    """Closed-loop sessions started as a Poisson process of ``rate`` sessions per second."""

    def __init__(self, rate: float) -> None:
        self.rate = rate

    async def run(self, host: Host) -> None:
        """Start sessions at exponential intervals until the source is exhausted or the run
        stopped (no warm-up)."""
        rng = random.Random(host.shape.load.seed)
        host.expect_warm(0)
        host.warm_done()
        async with asyncio.TaskGroup() as tg:
            t = host.clock()
            while not host.stopped:
                inst = host.source.next(False)
                if inst is None:
                    break
                tg.create_task(run_session(host, inst, -1, None))
                t += int(rng.expovariate(self.rate) * 1e9)
                if not await host.sleep_until(t):
                    break
                if t <= host.clock():
                    # Behind schedule (a rate the loop cannot keep up with): let the sessions
                    # and the deadline run, or this loop would never give them a turn.
                    await asyncio.sleep(0)
            host.mark_drain()


async def run_session(
    host: Host, inst: SessionInstance, lane: int, warm_done: Callable[[], None] | None
) -> None:
    """Run one session instance's call graph (its warm-up first); ``warm_done``: called once
    its warm-up is over (a lane's first session: its warm-up ends the lane's)."""
    start = host.clock()
    host.session_started(inst, lane, start)
    run = _SessionRun(host, inst)
    try:
        await run.warmup()
        if warm_done is not None:
            warm_done()
            warm_done = None
        await run.main()
    finally:
        if warm_done is not None:
            warm_done()
        span = (start, host.clock())
        host.session_ended(inst, lane, span, run.sent, run.planned, run.warm_sent)


class _SessionRun:
    """The call graph of one session instance being executed."""

    def __init__(self, host: Host, inst: SessionInstance) -> None:
        self.r = host
        self.inst = inst
        plan = inst.plan
        self.calls = plan.calls
        join = inst.join_ns
        if join is None:
            self.future = list(plan.order)
            self.warm: list[str] = []
        else:
            fut = {c for c in plan.order if plan.calls[c].rel_submit_ns >= join}
            self.future = [c for c in plan.order if c in fut]
            self.warm = [
                c for c in plan.order if c not in fut and any(s in fut for s in plan.calls[c].succs)
            ]
        self.fut_set = set(self.future)
        self.planned = len(self.future)
        self.sent = 0
        self.warm_sent = 0
        self.agent_end: dict[str, int] = {}

    async def warmup(self) -> None:
        """Send the warm-up calls (before the join point, with a successor after it) at once."""
        if not self.warm:
            return
        r = self.r

        async def one(cid: str) -> None:
            call = self.calls[cid]
            end = await r.send(self.inst, call, r.clock(), Phase.WARMUP, None)
            self.agent_end[call.agent_id] = max(self.agent_end.get(call.agent_id, 0), end)
            self.warm_sent += 1

        await asyncio.gather(*(one(c) for c in self.warm))

    async def main(self) -> None:
        """Send every future call once its predecessors completed and its gap passed."""
        r = self.r
        scale = r.shape.load.gap_scale
        off = self.inst.join_ns or 0
        self.remaining: dict[str, int] = {}
        self.ready: dict[str, int] = {}
        for cid in self.future:
            self.remaining[cid] = sum(1 for e in self.calls[cid].preds if e.pred in self.fut_set)
        # the first calls' requests are built before the session's clock starts: they are due
        # at once, and building one is part of the session's start, not of their lag
        roots = [
            (cid, r.body(self.inst, self.calls[cid], Phase.MEASURED))
            for cid in self.future
            if self.remaining[cid] == 0
        ]
        base = r.clock()
        for cid in self.future:
            c = self.calls[cid]
            self.ready[cid] = (
                base + int(scale * max(0, c.rel_submit_ns - off))
                if self.remaining[cid] < len(c.preds) or not c.preds
                else 0
            )
        async with asyncio.TaskGroup() as tg:
            self.tg = tg
            for cid, body in roots[1:]:
                tg.create_task(self._fire(cid, body))
            if roots:  # the first in this task: a new task would wait a loop turn to start
                await self._fire(*roots[0])

    async def _fire(self, cid: str, body: bytes | None = None) -> None:
        """Send one call when it is ready, then release the successors it was the last for
        (``body``: its request, when built already)."""
        r = self.r
        t = self.ready[cid]
        call = self.calls[cid]
        if body is None:
            body = r.body(self.inst, call, Phase.MEASURED)  # built before the wake-up
        end = await r.send_at(self.inst, call, t, lambda: _prev_end(self.agent_end, call), body)
        if end is None:
            return
        self.sent += 1
        self.agent_end[call.agent_id] = end
        scale = r.shape.load.gap_scale
        for sid in call.succs:
            if sid not in self.fut_set:
                continue
            succ = self.calls[sid]
            for e in succ.preds:
                if e.pred == cid:
                    self.ready[sid] = max(self.ready[sid], end + int(scale * e.gap_ns))
            self.remaining[sid] -= 1
            if self.remaining[sid] == 0:
                self.tg.create_task(self._fire(sid))


def _prev_end(agent_end: dict[str, int], call: CallPlan) -> int | None:
    """When the agent's previous call completed (None for its first)."""
    return agent_end.get(call.agent_id) if call.seq > 0 else None


# ---- open loop ----------------------------------------------------------------------------
class RecordedSchedule:
    """Open loop: every call of every recorded session at its recorded offset."""

    async def run(self, host: Host) -> None:
        """Send every call at ``time_scale`` times its offset from the point's start, whether
        or not its predecessors completed (no warm-up)."""
        host.expect_warm(0)
        host.warm_done()
        insts = _recorded_instances(host.source)
        calls = sorted(
            (
                (c.rel_trace_submit_ns, i, c)
                for i, inst in enumerate(insts)
                for c in inst.plan.calls.values()
            ),
            key=lambda e: (e[0], e[1], e[2].seq),
        )
        runs = [_OpenRun(host, inst) for inst in insts]
        base = host.clock()
        scale = host.shape.load.time_scale
        try:
            async with asyncio.TaskGroup() as tg:
                for off, i, call in calls:
                    t = base + int(scale * off)
                    # each send's task starts LEAD_NS early and waits for its own due time,
                    # so the task's start and its body's building are not part of its lag
                    if not await host.sleep_until(t - LEAD_NS):
                        break
                    tg.create_task(runs[i].send(call, t))
        finally:
            host.mark_drain()
            for run in runs:
                run.close()


def _recorded_instances(source: SessionSource) -> list[SessionInstance]:
    """Every recorded session once (a shard: its own of them)."""
    insts: list[SessionInstance] = []
    while (inst := source.next(False)) is not None and inst.index < len(source.plans):
        insts.append(inst)
    return insts


class _OpenRun:
    """One session instance on the recorded schedule: its calls are sent by the dispatcher,
    this keeps its account (the ``SessionResult``)."""

    def __init__(self, host: Host, inst: SessionInstance) -> None:
        self.r = host
        self.inst = inst
        self.sent = 0
        self.start: int | None = None
        self.end: int | None = None
        self.agent_end: dict[str, int] = {}
        host.session_started(inst, -1, host.clock())

    async def send(self, call: CallPlan, t: int) -> None:
        """Send one call of this session at ``t`` and keep its account."""
        r = self.r
        body = r.body(self.inst, call, Phase.MEASURED)  # built before the wake-up
        end = await r.send_at(self.inst, call, t, lambda: _prev_end(self.agent_end, call), body)
        if end is None:
            return
        self.start = t if self.start is None else min(self.start, t)
        self.sent += 1
        self.agent_end[call.agent_id] = max(self.agent_end.get(call.agent_id, 0), end)
        self.end = max(self.end or end, end)

    def close(self) -> None:
        """End the session's account: complete when every call of its plan was sent."""
        now = self.r.clock()
        start = self.start if self.start is not None else now
        end = self.end if self.end is not None else now
        self.r.session_ended(self.inst, -1, (start, end), self.sent, len(self.inst.plan.calls), 0)
