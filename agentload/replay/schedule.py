"""Session scheduling: closed loop (lanes, ``--concurrency``, or Poisson arrivals) or the
recorded schedule (``--schedule recorded``, open loop).

A session instance runs its call graph (see ``plan``): a call is sent once all its
predecessors completed on the target and ``max(pred completion + gap_scale * recorded gap)``
has passed. With ``start_at="random"`` the first session of every lane joins mid-flight at a
recorded time ``t`` drawn uniformly over ``[0, last submit)``: calls submitted before ``t`` are
skipped except those with a successor after ``t``, which are sent once as unmeasured warm-up
(with ``max_tokens = 1``: only their prefill matters for the cache, because the next prompt
carries the recorded reply, not whatever the target generates);
the session then continues with the remaining recorded waits (``submit - t``). Lanes recycle:
when a session's whole agent tree finished, the lane starts the next session (from zero).

The measured window starts when every lane has finished its warm-up (``W``) and ends when the
run stops sending at full load (``D``): the ``--duration`` deadline, the first lane that found
no session left, or the last Poisson arrival. Requests are labelled ``ramp`` (sent before
``W``), ``measured`` (``W <= send <= D``) or ``drain`` (after ``D``).

The recorded schedule is open loop: every recorded session runs once (one instance
each, salted as its plan says), and every call is sent at ``time_scale * (its submit - the earliest submit of its
trace)`` after the point started, whether or not its predecessors completed (several traces:
each from its own first submit, all starting together). There is no warm-up: the window runs
from the start to the last scheduled send (or the ``--duration`` deadline, which stops the
sending; calls in flight complete).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentload.replay.bodies import BodyBuilder
from agentload.replay.client import StreamClient
from agentload.replay.plan import CallPlan, SessionPlan
from agentload.replay.records import (
    RequestRecord,
    SessionResult,
    Window,
    label_phases,
    steady_window,
)
from agentload.replay.salt import new_nonce
from agentload.replay.shapes import (
    LiveStats,
    LoadShape,
    PointRun,
    SessionInstance,
    SessionSource,
    Shard,
)

__all__ = ["InFlight", "LiveStats", "LoadShape", "PointRun", "PointRunner", "SessionInstance"]

InFlight = tuple[int, str, str, int, int, int]
"""A request in flight: (session instance, call key, phase, scheduled ns, sent ns (clock),
expected tokens) — what a sharded replay counts as failed when its worker is lost."""


class PointRunner:
    """Runs one load point against the target (see the module docstring)."""

    def __init__(
        self,
        client: StreamClient,
        plans: Sequence[SessionPlan],
        builder: BodyBuilder,
        shape: LoadShape,
        *,
        nonce: str | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
        shard: Shard | None = None,
    ) -> None:
        self.client = client
        self.builder = builder
        self.shape = shape
        self.clock = clock
        self.source = SessionSource(plans, shape, nonce or new_nonce(), shard)
        self.inflight: dict[int, InFlight] = {}
        """Requests in flight by a serial number (see ``InFlight``)."""
        self.active: dict[int, tuple[str, int, int]] = {}
        """Session instances running: number → (recorded session, lane, start clock ns)."""
        self._serial = 0
        self.stats = LiveStats()
        self.records: list[RequestRecord] = []
        self.sessions: list[SessionResult] = []
        self.timeline: list[dict[str, Any]] = []
        self._stop = asyncio.Event()
        self._warm = asyncio.Event()
        self._sleepers: set[asyncio.Task[Any]] = set()
        self._pending_warm = 0
        self.t0 = 0
        self.warm_end = 0
        self.drain_at: int | None = None

    # ---- run -------------------------------------------------------------------------
    async def run(self) -> PointRun:
        self.t0 = self.clock()
        sampler = asyncio.create_task(self._sample())
        deadline = asyncio.create_task(self._deadline())
        try:
            if self.shape.schedule == "recorded":
                await self._recorded()
            elif self.shape.arrival_rate:
                await self._arrivals(self.shape.arrival_rate)
            else:
                await self._lanes()
        finally:
            deadline.cancel()
            sampler.cancel()
            await asyncio.gather(deadline, sampler, return_exceptions=True)
        return self.result()

    def result(self) -> PointRun:
        """What the point produced so far (also after the run was cancelled)."""
        end = self.clock()
        if not self._warm.is_set():
            self.warm_end = end
        self._take_sample()
        window = self._window(end)
        label_phases(self.records, window)
        self.sessions.sort(key=lambda s: s.session)
        return PointRun(
            t0_ns=self.t0,
            requests=self.records,
            sessions=self.sessions,
            window=window,
            warmup_end_ns=self.warm_end - self.t0,
            timeline=self.timeline,
            stats=self.stats,
            wall_s=(end - self.t0) / 1e9,
        )

    def _window(self, end: int) -> Window:
        w = self.warm_end - self.t0
        d = (self.drain_at if self.drain_at is not None else end) - self.t0
        return steady_window(
            w,
            d,
            self.records,
            "from the end of warm-up (every lane past its warm-up) to the moment the run "
            "stopped sending at full load (duration deadline, first idle lane, or last arrival)",
        )

    async def _deadline(self) -> None:
        await self._warm.wait()
        if self.shape.duration_s is None:
            return
        await asyncio.sleep(self.shape.duration_s)
        self._mark_drain()
        self.stop()

    def stop(self) -> None:
        """Stop sending; requests in flight complete."""
        self._stop.set()
        for t in list(self._sleepers):
            t.cancel()

    def _mark_drain(self) -> None:
        if self.drain_at is None:
            self.drain_at = self.clock()

    def _warm_done(self) -> None:
        self._pending_warm -= 1
        if self._pending_warm <= 0 and not self._warm.is_set():
            self.warm_end = self.clock()
            self._warm.set()

    async def _lanes(self) -> None:
        n = self.shape.concurrency
        if self.shape.sessions is not None:
            n = max(1, min(n, self.shape.sessions))
        self._pending_warm = n
        async with asyncio.TaskGroup() as tg:
            for lane in range(n):
                tg.create_task(self._lane(lane))

    async def _lane(self, lane: int) -> None:
        first = True
        try:
            while not self._stop.is_set():
                inst = self.source.next(first and self.shape.start_at == "random")
                if inst is None:
                    break
                await self._run_session(inst, lane, first)
                first = False
        finally:
            if first:
                self._warm_done()
            self._mark_drain()

    async def _arrivals(self, rate: float) -> None:
        rng = random.Random(self.shape.seed)
        self._pending_warm = 0
        self._warm_done()
        async with asyncio.TaskGroup() as tg:
            t = self.clock()
            while not self._stop.is_set():
                inst = self.source.next(False)
                if inst is None:
                    break
                tg.create_task(self._run_session(inst, -1, False))
                t += int(rng.expovariate(rate) * 1e9)
                if not await self._sleep_until(t):
                    break
                if t <= self.clock():
                    # Behind schedule (a rate the loop cannot keep up with): let the sessions
                    # and the deadline run, or this loop would never give them a turn.
                    await asyncio.sleep(0)
            self._mark_drain()

    async def _recorded(self) -> None:
        """Every call of every plan at its recorded offset (module docstring)."""
        self._pending_warm = 0
        self._warm_done()
        insts: list[SessionInstance | None] = []
        while (inst := self.source.next(False)) is not None and inst.index < len(self.source.plans):
            insts.append(inst)  # every recorded session once (a shard: its own of them)
        calls = sorted(
            (
                (c.rel_trace_submit_ns, i, c)
                for i, inst in enumerate(insts)
                if inst is not None
                for c in inst.plan.calls.values()
            ),
            key=lambda e: (e[0], e[1], e[2].seq),
        )
        runs = [_OpenRun(self, inst) for inst in insts if inst is not None]
        base = self.clock()
        scale = self.shape.time_scale
        try:
            async with asyncio.TaskGroup() as tg:
                for off, i, call in calls:
                    t = base + int(scale * off)
                    if not await self._sleep_until(t):
                        break
                    tg.create_task(runs[i].send(call, t))
        finally:
            self._mark_drain()
            for run in runs:
                run.close()

    async def _sleep_until(self, t: int) -> bool:
        """Sleep until clock ``t``; False when the run was stopped meanwhile."""
        if self._stop.is_set():
            return False
        delay = (t - self.clock()) / 1e9
        if delay > 0:
            task = asyncio.current_task()
            assert task is not None
            self._sleepers.add(task)
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                if self._stop.is_set():
                    task.uncancel()
                    return False
                raise
            finally:
                self._sleepers.discard(task)
        return not self._stop.is_set()

    # ---- one session -----------------------------------------------------------------
    def _session_started(self, inst: SessionInstance, lane: int, start: int) -> None:
        self.active[inst.index] = (inst.plan.key, lane, start)
        st = self.stats
        st.active_sessions += 1
        st.max_active_sessions = max(st.max_active_sessions, st.active_sessions)

    def _session_ended(
        self,
        inst: SessionInstance,
        lane: int,
        span: tuple[int, int],
        sent: int,
        planned: int,
        warm_sent: int,
    ) -> None:
        """Account for a session instance that ended over ``span`` (clock ns): complete when it
        sent the ``planned`` calls, else cut; its ``SessionResult``."""
        start, end = span
        self.active.pop(inst.index, None)
        st = self.stats
        st.active_sessions -= 1
        complete = sent == planned
        if complete:
            st.done_sessions += 1
        else:
            st.cut_sessions += 1
        self.sessions.append(
            SessionResult(
                session=inst.index,
                source=inst.plan.key,
                lane=lane,
                start_ns=start - self.t0,
                end_ns=end - self.t0,
                joined_at_ns=inst.join_ns,
                complete=complete,
                requests=sent,
                warmup_requests=warm_sent,
            )
        )

    async def _run_session(self, inst: SessionInstance, lane: int, first: bool) -> None:
        start = self.clock()
        self._session_started(inst, lane, start)
        run = _SessionRun(self, inst)
        try:
            await run.warmup()
            if first:
                self._warm_done()
                first = False
            await run.main()
        finally:
            if first:
                self._warm_done()
            span = (start, self.clock())
            self._session_ended(inst, lane, span, run.sent, run.planned, run.warm_sent)

    async def send(
        self,
        inst: SessionInstance,
        call: CallPlan,
        scheduled: int,
        phase: str,
        prev_end: int | None,
    ) -> int:
        """Send one call and record it; returns its completion time (clock ns)."""
        warm = phase == "warmup"
        expected = 1 if warm else call.expected_tokens
        body = self.builder.build(call, inst.salt, inst.session_id, 1 if warm else None)
        hdr = self.shape.session_header
        headers = {hdr: inst.session_id} if hdr else None
        st = self.stats
        st.inflight += 1
        st.max_inflight = max(st.max_inflight, st.inflight)
        serial = self._serial = self._serial + 1
        self.inflight[serial] = (inst.index, call.key, phase, scheduled, self.clock(), expected)
        try:
            out = await self.client.chat(body, headers, call.send_api)
        finally:
            st.inflight -= 1
            del self.inflight[serial]
        t0 = self.t0
        ch = out.chunk_ns
        rec = RequestRecord(
            session=inst.index,
            source=inst.plan.key,
            agent=call.agent_id,
            call=call.key,
            seq=call.seq,
            turn_depth=call.seq,
            phase=phase,
            digest=call.digest,
            scheduled_ns=scheduled - t0,
            send_ns=out.send_ns - t0,
            end_ns=out.end_ns - t0,
            first_ns=None if out.first_ns is None else out.first_ns - t0,
            status=out.status,
            error_kind=out.error_kind,
            error=out.error,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            cached_tokens=out.cached_tokens,
            expected_tokens=expected,
            recorded_prompt_tokens=call.prompt_tokens,
            prompt_tokens_ours=call.ours(),
            mismatch=out.completion_tokens is not None and out.completion_tokens != expected,
            ceiling_tokens=call.ceiling(),
            within_ceiling_tokens=call.within(),
            gap_ns=None if prev_end is None else out.send_ns - prev_end,
            recorded_gap_ns=call.recorded_gap_ns,
            finish_reason=out.finish_reason,
            itl_ns=[b - a for a, b in itertools.pairwise(ch)],
        )
        self.records.append(rec)
        st.requests += 1
        if out.error_kind is not None:
            st.errors += 1
        else:
            st.output_tokens += rec.output_tokens
            if rec.ttft_ns is not None:
                st.ttfts.append(rec.ttft_ns)
        return out.end_ns

    # ---- timeline --------------------------------------------------------------------
    def _take_sample(self) -> None:
        st = self.stats
        self.timeline.append(
            {
                "t_ns": self.clock() - self.t0,
                "active_sessions": st.active_sessions,
                "inflight": st.inflight,
                "requests": st.requests,
                "errors": st.errors,
                "output_tokens": st.output_tokens,
            }
        )

    async def _sample(self) -> None:
        while True:
            self._take_sample()
            await asyncio.sleep(1.0)


class _SessionRun:
    """The call graph of one session instance being executed."""

    def __init__(self, runner: PointRunner, inst: SessionInstance) -> None:
        self.r = runner
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
        if not self.warm:
            return
        r = self.r

        async def one(cid: str) -> None:
            call = self.calls[cid]
            end = await r.send(self.inst, call, r.clock(), "warmup", None)
            self.agent_end[call.agent_id] = max(self.agent_end.get(call.agent_id, 0), end)
            self.warm_sent += 1

        await asyncio.gather(*(one(c) for c in self.warm))

    async def main(self) -> None:
        r = self.r
        scale = r.shape.gap_scale
        base = r.clock()
        off = self.inst.join_ns or 0
        self.remaining: dict[str, int] = {}
        self.ready: dict[str, int] = {}
        for cid in self.future:
            c = self.calls[cid]
            n = sum(1 for e in c.preds if e.pred in self.fut_set)
            self.remaining[cid] = n
            self.ready[cid] = (
                base + int(scale * max(0, c.rel_submit_ns - off))
                if n < len(c.preds) or not c.preds
                else 0
            )
        async with asyncio.TaskGroup() as tg:
            self.tg = tg
            for cid in self.future:
                if self.remaining[cid] == 0:
                    tg.create_task(self._fire(cid))

    async def _fire(self, cid: str) -> None:
        r = self.r
        t = self.ready[cid]
        if not await r._sleep_until(t):
            return
        call = self.calls[cid]
        prev = self.agent_end.get(call.agent_id) if call.seq > 0 else None
        end = await r.send(self.inst, call, t, "measured", prev)
        self.sent += 1
        self.agent_end[call.agent_id] = end
        scale = r.shape.gap_scale
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


class _OpenRun:
    """One session instance on the recorded schedule: its calls are sent by the dispatcher,
    this keeps its account (the ``SessionResult``)."""

    def __init__(self, runner: PointRunner, inst: SessionInstance) -> None:
        self.r = runner
        self.inst = inst
        self.sent = 0
        self.start: int | None = None
        self.end: int | None = None
        self.agent_end: dict[str, int] = {}
        runner._session_started(inst, -1, runner.clock())

    async def send(self, call: CallPlan, t: int) -> None:
        r = self.r
        if self.start is None:
            self.start = r.clock()
        prev = self.agent_end.get(call.agent_id) if call.seq > 0 else None
        end = await r.send(self.inst, call, t, "measured", prev)
        self.sent += 1
        self.agent_end[call.agent_id] = max(self.agent_end.get(call.agent_id, 0), end)
        self.end = max(self.end or end, end)

    def close(self) -> None:
        now = self.r.clock()
        start = self.start if self.start is not None else now
        end = self.end if self.end is not None else now
        self.r._session_ended(self.inst, -1, (start, end), self.sent, len(self.inst.plan.calls), 0)
