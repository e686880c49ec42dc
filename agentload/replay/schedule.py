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

The measured window starts once every lane has finished its warm-up and every request sent
before that moment has had its first token (``W``: the queue the warm-up built, its prefills and
the first calls of the lanes that were warm earlier, has been served; a window opened at the
last warm-up's end measured that queue, seconds of TTFT that the steady state does not have) and
ends when the run stops sending at full load (``D``): the ``--duration`` deadline, the first
lane that found no session left, or the last Poisson arrival. Requests are labelled ``ramp``
(sent before ``W``), ``measured`` (``W <= send <= D``) or ``drain`` (after ``D``).

The recorded schedule is open loop: every recorded session runs once (one instance each, salted
as its plan says), and every call is sent at ``time_scale * (its submit - the earliest submit of
its trace)`` after the point started, whether or not its predecessors completed (several traces:
each from its own first submit, all starting together). There is no warm-up: the window runs
from the start to the last scheduled send (or the ``--duration`` deadline, which stops the
sending; calls in flight complete).

A capacity search in one run (``measure.capacity_stages``) moves a closed-loop point's lanes
while it runs (``set_lanes``: lanes added join mid-flight after their own warm-up, counted by
``settling``; lanes taken away are cancelled with their calls in flight).

Each of the three is a strategy in ``modes`` (``schedule_for`` picks it from the shape once,
when the runner is made); ``PointRunner`` keeps what they share: sending and recording
requests, session accounting (``account.PointAccount``), warm-up and drain, the stop, the
window and the timeline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentload.client.gate import Due
from agentload.client.outcome import Outcome
from agentload.client.stream import StreamClient
from agentload.measure.capacity_stages import SETTLE_POLL_S
from agentload.measure.pointrun import PointRun
from agentload.measure.records import (
    Phase,
    Window,
    label_phases,
    steady_window,
)
from agentload.replay.account import InFlight, PointAccount
from agentload.replay.bodies import BodyBuilder
from agentload.replay.heap import quiet_heap
from agentload.replay.modes import LEAD_NS, LaneSchedule, Schedule, schedule_for
from agentload.replay.plan import CallPlan, SessionPlan
from agentload.replay.salt import new_nonce
from agentload.replay.shapes import (
    LiveStats,
    LoadShape,
    SessionInstance,
    SessionSource,
    Shard,
    session_headers,
)
from agentload.replay.waker import OneSend, Waker

__all__ = [
    "InFlight",
    "LiveStats",
    "LoadShape",
    "PointAccount",
    "PointRunner",
    "SessionInstance",
]


class PointRunner(PointAccount):
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
        super().__init__(clock)
        self.client = client
        self.builder = builder
        self.shape = shape
        self.source = SessionSource(plans, shape, nonce or new_nonce(), shard)
        self.schedule: Schedule = schedule_for(shape)
        """Lanes, arrivals or the recorded schedule, as ``shape`` says (see ``modes``)."""
        self._serial = 0
        self._stop = asyncio.Event()
        self._warm = asyncio.Event()
        self._sleepers: set[asyncio.Task[Any]] = set()
        self.waker = Waker(clock)
        """Wakes each scheduled send at its due time (``waker``)."""
        self._pending_warm = 0
        self.note = ""
        """What the progress display adds to its line (``show``)."""
        self.warm_end = 0
        self._settle: asyncio.Task[None] | None = None
        self.drain_at: int | None = None

    # ---- run -------------------------------------------------------------------------
    async def run(self) -> PointRun:
        """Run the point on its schedule; what it produced."""
        with quiet_heap():
            self.t0 = self.clock()
            self.cpu0 = time.thread_time()
            self.client.set_tick(self.waker.poll)
            sampler = asyncio.create_task(self._sample())
            deadline = asyncio.create_task(self._deadline())
            try:
                await self.schedule.run(self)
            finally:
                tasks = [deadline, sampler, *([self._settle] if self._settle else [])]
                for t in tasks:
                    t.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                self.client.set_tick(None)
                await self.waker.aclose()
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
            wall_s=(end - self.t0) / 1e9,
            max_active_sessions=self.stats.max_active_sessions,
            max_inflight=self.stats.max_inflight,
            cpu_s=self.cpu_s,
        )

    def _window(self, end: int) -> Window:
        w = self.warm_end - self.t0
        d = (self.drain_at if self.drain_at is not None else end) - self.t0
        return steady_window(
            w,
            d,
            self.records,
            "from the end of warm-up (every lane past its warm-up, and every request sent "
            "before then past its first token) to the moment the run stopped sending at full "
            "load (duration deadline, first idle lane, or last arrival)",
        )

    async def _deadline(self) -> None:
        await self._warm.wait()
        if self.shape.load.duration_s is None:
            return
        await asyncio.sleep(self.shape.load.duration_s)
        self.mark_drain()
        self.stop()

    @property
    def cpu_s(self) -> float:
        """CPU seconds the event loop's thread used since the point started (read on that
        thread at each timeline sample and at the end: a Ray actor's poll may run on another)."""
        return self._cpu_s

    # ---- stop, warm-up and drain -----------------------------------------------------
    @property
    def stopped(self) -> bool:
        """The run stopped sending (``stop``)."""
        return self._stop.is_set()

    @property
    def warm(self) -> bool:
        """Every lane is past its warm-up (``warm_end`` is set)."""
        return self._warm.is_set()

    def stop(self) -> None:
        """Stop sending; requests in flight complete."""
        self._stop.set()
        for t in list(self._sleepers):
            t.cancel()

    def mark_drain(self) -> None:
        """The run stopped sending at full load now (the first time it is told)."""
        if self.drain_at is None:
            self.drain_at = self.clock()

    async def wait_warm(self) -> None:
        """Until every lane is past its warm-up."""
        await self._warm.wait()

    def expect_warm(self, lanes: int) -> None:
        """Warm-up ends once ``lanes`` lanes finished theirs (``warm_done`` each)."""
        self._pending_warm = lanes

    def warm_done(self) -> None:
        """One lane finished its warm-up; after the last one, the measured window opens once
        every request sent before then has had its first token (``_served``)."""
        self._pending_warm -= 1
        if self._pending_warm > 0 or self._warm.is_set() or self._settle is not None:
            return
        ready = self.clock()
        # only a warm-up builds a queue to wait for (with --start-at zero, the lanes started
        # first have simply sent their first calls); every warm-up is recorded by now
        warmed = any(r.phase is Phase.WARMUP for r in self.records)
        if warmed and self._queued_before(ready):
            self._settle = asyncio.get_running_loop().create_task(self._served(ready))
        else:
            self._open_window()

    async def _served(self, ready: int) -> None:
        """Open the window once no request sent before clock ``ready`` (when the last lane
        finished its warm-up) waits for its first token: the queue the warm-up built (its
        prefills, and the first calls of the lanes that were warm earlier) has been served."""
        while self._queued_before(ready) and not self._stop.is_set():
            await asyncio.sleep(SETTLE_POLL_S)
        self._open_window()

    def _open_window(self) -> None:
        self.warm_end = self.clock()
        self._warm.set()

    def _queued_before(self, at: int) -> bool:
        """A request sent before clock ``at`` is in flight without its first token."""
        streams = self.streams
        return any(
            f[4] < at and not streams[serial].chunk_ns
            for serial, f in self.inflight.items()
            if serial in streams
        )

    async def sleep_until(self, t: int) -> bool:
        """Sleep until clock ``t``; False when the run was stopped meanwhile."""
        if self._stop.is_set():
            return False
        if t > self.clock():
            task = asyncio.current_task()
            assert task is not None
            self._sleepers.add(task)
            try:
                await self.waker.sleep_until(t)
            except asyncio.CancelledError:
                if self._stop.is_set():
                    task.uncancel()
                    return False
                raise
            finally:
                self._sleepers.discard(task)
        return not self._stop.is_set()

    # ---- a staged capacity search (``measure.capacity_stages``) -----------------------------
    def set_lanes(self, n: int) -> None:
        """Run ``n`` lanes from now (closed loop: ``modes.LaneSchedule.set_lanes``)."""
        if not isinstance(self.schedule, LaneSchedule):
            raise TypeError("only a closed-loop point's lanes can be moved")
        self.schedule.set_lanes(n)

    def settling(self, since_ns: int) -> bool:
        """Lanes added are still in their warm-up, or a request sent before ``since_ns`` (ns
        since ``t0``: when the lanes were moved) still waits for its first token: the queue of
        the load before has not been served yet."""
        lanes = self.schedule
        if isinstance(lanes, LaneSchedule) and lanes.warming > 0:
            return True
        return self._queued_before(self.t0 + since_ns)

    def show(self, note: str) -> None:
        """What the progress display adds to its line (a capacity search's stage)."""
        self.note = note

    # ---- sending -----------------------------------------------------------------------
    def body(self, inst: SessionInstance, call: CallPlan, phase: Phase) -> bytes:
        """The request bytes of ``call`` for ``inst`` (a warm-up asks for one token)."""
        one = 1 if phase == Phase.WARMUP else None
        return self.builder.build(call, inst.salt, inst.session_id, one)

    async def send_at(
        self,
        inst: SessionInstance,
        call: CallPlan,
        t: int,
        prev_end: Callable[[], int | None],
        body: bytes,
    ) -> int | None:
        """Send a measured call at clock ``t`` and record it; its completion time, None when
        the run stopped before it went. The task wakes ``LEAD_NS`` early and takes its
        connection, and the waker writes the request at ``t`` (``client.gate``), so neither
        the task's wake-up nor the client's work is part of the lag. ``prev_end``: the
        completion of the agent's previous call, read once awake."""
        if not await self.sleep_until(t - LEAD_NS):
            return None
        task = asyncio.current_task()
        assert task is not None
        gate = OneSend(self.waker, lambda: self._sleepers.discard(task))
        self._sleepers.add(task)  # the stop cancels it until its request went
        try:
            return await self.send(inst, call, t, Phase.MEASURED, prev_end(), body, (gate, t))
        except asyncio.CancelledError:
            if self._stop.is_set() and not gate.fired:
                task.uncancel()
                return None
            raise
        finally:
            self._sleepers.discard(task)

    async def send(
        self,
        inst: SessionInstance,
        call: CallPlan,
        scheduled: int,
        phase: Phase,
        prev_end: int | None,
        body: bytes | None = None,
        due: Due | None = None,
    ) -> int:
        """Send one call now (with ``due``: at its time, ``send_at``) and record it; returns
        its completion time (clock ns). ``body``: its request built beforehand (``body()``:
        before a wake-up, so what lies between the due time and the first bytes on the wire
        is the HTTP client's work alone)."""
        if body is None:
            body = self.body(inst, call, phase)
        expected = 1 if phase == Phase.WARMUP else call.expected_tokens
        headers = session_headers(self.shape, inst.session_id, call)
        st = self.stats
        st.inflight += 1
        st.max_inflight = max(st.max_inflight, st.inflight)
        serial = self._serial = self._serial + 1
        self.inflight[serial] = (inst.index, call.key, phase, scheduled, self.clock(), expected)
        live = self.streams[serial] = Outcome(send_ns=0)
        try:
            model = self.builder.model  # a Gemini call's path names it
            out = await self.client.chat(
                body, headers, call.send_api, due=due, model=model, out=live
            )
        finally:
            st.inflight -= 1
            del self.inflight[serial], self.streams[serial]
        rec = self._request_record(inst, call, out, phase, scheduled, expected, prev_end)
        self._keep(rec)
        self.waker.poll()  # building the record took a while: a send may have fallen due
        return out.end_ns

    # ---- timeline --------------------------------------------------------------------
    async def _sample(self) -> None:
        while True:
            self._take_sample()
            await asyncio.sleep(1.0)
