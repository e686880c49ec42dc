"""What a running point recorded (``PointAccount``, the base of ``schedule.PointRunner``): its
request and session records, the live counters and the timeline, and the requests and sessions
in flight; what a capacity probe's rule reads of them (``pending``)."""

from __future__ import annotations

import operator
import time
from collections.abc import Callable
from typing import Any

from agentload.client.outcome import Outcome
from agentload.measure.records import Phase, RequestRecord, SessionResult, unchecked
from agentload.measure.steady import Pending
from agentload.replay.plan import CallPlan
from agentload.replay.shapes import LiveStats, SessionInstance

__all__ = ["InFlight", "PointAccount"]

_new_request = unchecked(RequestRecord)
_new_session = unchecked(SessionResult)

InFlight = tuple[int, str, str, int, int, int]
"""A request in flight: (session instance, call key, phase, scheduled ns, sent ns (clock),
expected tokens) — what a sharded replay counts as failed when its worker is lost."""


class PointAccount:
    """What a running point recorded: its request and session records, the live counters and
    the timeline, and the requests and sessions in flight (times since ``t0``)."""

    def __init__(self, clock: Callable[[], int]) -> None:
        self.clock = clock
        self.inflight: dict[int, InFlight] = {}
        """Requests in flight by a serial number (see ``InFlight``)."""
        self.streams: dict[int, Outcome] = {}
        """The outcome of each request in flight as it streams (its first chunk's time)."""
        self.active: dict[int, tuple[str, int, int]] = {}
        """Session instances running: number → (recorded session, lane, start clock ns)."""
        self.stats = LiveStats()
        self.records: list[RequestRecord] = []
        self.sessions: list[SessionResult] = []
        self.timeline: list[dict[str, Any]] = []
        self.t0 = 0
        self.cpu0 = 0.0
        """The loop thread's CPU time when the point started."""
        self._cpu_s = 0.0

    def pending(self, since_ns: int) -> Pending:
        """The requests (not warm-up) sent, and the sessions started from their first call, at
        ``since_ns`` (ns since ``t0``) or later that are in flight; of those requests, the
        TTFTs of the ones already streaming and when the others were sent."""
        at, t0 = self.t0 + since_ns, self.t0
        sends: list[int] = []
        waiting: list[int] = []
        ttfts: list[float] = []
        for serial, f in self.inflight.items():
            if f[4] < at or f[2] == Phase.WARMUP:
                continue
            sends.append(f[4] - t0)
            live = self.streams.get(serial)
            if live is not None and live.chunk_ns:
                ttfts.append((live.chunk_ns[0] - live.send_ns) / 1e6)
            else:
                waiting.append(f[4] - t0)
        starts = [start - t0 for _, _, start in self.active.values() if start >= at]
        return Pending(
            len(sends),
            len(starts),
            min(sends, default=None),
            min(starts, default=None),
            ttft_ms=tuple(ttfts),
            first_waiting_ns=min(waiting, default=None),
        )

    def session_started(self, inst: SessionInstance, lane: int, start: int) -> None:
        """Account for a session instance that started on ``lane`` at ``start`` (clock ns)."""
        self.active[inst.index] = (inst.plan.key, lane, start)
        st = self.stats
        st.active_sessions += 1
        st.max_active_sessions = max(st.max_active_sessions, st.active_sessions)

    def session_ended(
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
            _new_session(
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

    def _request_record(
        self,
        inst: SessionInstance,
        call: CallPlan,
        out: Outcome,
        phase: Phase,
        scheduled: int,
        expected: int,
        prev_end: int | None,
    ) -> RequestRecord:
        """The record of a request that completed as ``out`` (times since the point's start)."""
        t0 = self.t0
        ch = out.chunk_ns
        return _new_request(
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
            prefill_worker=out.prefill_worker,
            decode_worker=out.decode_worker,
            server_timing=out.server_timing,
            itl_ns=tuple(map(operator.sub, ch[1:], ch)),
        )

    def _keep(self, rec: RequestRecord) -> None:
        """Keep a completed request's record and add it to the live counters."""
        st = self.stats
        self.records.append(rec)
        st.requests += 1
        if rec.error_kind is not None:
            st.errors += 1
        else:
            st.output_tokens += rec.output_tokens
            if rec.ttft_ns is not None:
                st.ttfts.append(rec.ttft_ns)

    def _take_sample(self) -> None:
        """Add the counters now to the timeline (and read the loop's CPU time)."""
        self._cpu_s = time.thread_time() - self.cpu0
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
