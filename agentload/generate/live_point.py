"""One point of the live benchmark: a generate run's trace → the records replay's metrics read.

* Times are ns since the point's start, the first session's start.
* Each recorded ``llm_call`` becomes a ``RequestRecord``: send = submit, first chunk = first
  token, end = the last chunk of the stream; the server's usage and finish reason; ITLs the
  gaps between the chunks from the first to the last token; the gap since the agent's previous
  call ended. The payload digest, our token counts and the KV-survival ceiling are replay's
  own (``replay.plan.build_plans``). A call that failed for good (an ``error`` event with
  reason ``endpoint_error`` or ``context_limit``) is a failed request.
* Each session becomes a ``SessionResult`` (``complete`` unless it was interrupted or ended in
  an error; ``eval_passed`` from its success check), on the lane that ran it.
* The window is replay's rule for lanes that start from zero: from the start (no warm-up) to
  the moment the first lane found no session left (the end of the (N−P+1)-th session to end).
* The point's aggregates are replay's metric classes over those records (``measure.metrics``);
  its timeline the counters replay samples at 1 Hz, rebuilt from the records.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections import Counter
from collections.abc import Sequence

from agentload.intervals import peak_overlap
from agentload.measure.errorkinds import ErrorKind, http_kind
from agentload.measure.metrics import SLO
from agentload.measure.pointrun import PointLoad, PointRun, build_point, window_watts
from agentload.measure.records import (
    Phase,
    RequestRecord,
    SessionResult,
    label_phases,
    steady_window,
)
from agentload.measure.results import Point
from agentload.options.measure import MeasureOptions
from agentload.replay.plan import SessionPlan
from agentload.trace.events import EventKind
from agentload.trace.schema import EndReason, LLMCallRecord
from agentload.trace.trace import Trace

__all__ = ["LIVE_RULE", "live_point"]

LIVE_RULE = (
    "live: from the start (sessions start from their first call, no warm-up) to the moment "
    "the first lane found no session left"
)
_NOT_COMPLETE = frozenset(
    {EndReason.INTERRUPTED, EndReason.ERROR, EndReason.ENDPOINT_ERROR, EndReason.DISK_QUOTA}
)
"""End reasons of a session that did not run to its own end (not a complete job)."""
_FAILED_CALL: dict[str, ErrorKind | None] = {
    EndReason.ENDPOINT_ERROR: None,
    EndReason.CONTEXT_LIMIT: ErrorKind.CONTEXT_OVERFLOW,
}
"""The end reasons of a call that failed for good, and their request's error kind (None: from
the HTTP status in its error, else ``endpoint_error``)."""
_HTTP = re.compile(r"^HTTP (\d{3})\b")


def live_point(
    trace: Trace,
    plans: Sequence[SessionPlan],
    parallel: int,
    measure: MeasureOptions,
    slo: SLO | None = None,
    prefix: str = "",
    power_samples: list[tuple[int, float]] | None = None,
) -> Point:
    """One point from one generate run's trace and its plans (see the module docstring)."""
    starts = [s.start_ns for s in trace.sessions.values()]
    starts += [c.timings.submit_ns for c in trace.calls.values()]
    t0 = min(starts, default=0)
    index = {
        sid: int(s.meta.get("index", i))
        for i, (sid, s) in enumerate(sorted(trace.sessions.items(), key=lambda kv: kv[1].start_ns))
    }
    requests = _requests(trace, plans, index, t0, prefix)
    sessions = _sessions(trace, requests, index, t0)
    lanes = min(parallel, len(sessions))
    ends = sorted(s.end_ns for s in sessions)
    window = steady_window(0, ends[len(ends) - lanes] if ends else 0, requests, LIVE_RULE)
    label_phases(requests, window)
    wall = max([s.end_ns for s in sessions] + [r.end_ns for r in requests], default=0)
    run = PointRun(
        t0_ns=t0,
        requests=requests,
        sessions=sessions,
        window=window,
        warmup_end_ns=0,
        timeline=_timeline(requests, sessions, wall),
        wall_s=wall / 1e9,
        max_active_sessions=peak_overlap((s.start_ns, s.end_ns) for s in sessions),
        max_inflight=peak_overlap((r.send_ns, r.end_ns) for r in requests),
        cpu_s=None,  # the agents sent the requests, not a client of ours
    )
    watts = measure.power_watts
    if power_samples is not None:
        watts = window_watts(power_samples, run)
    interrupted = any(s.end_reason == "interrupted" for s in trace.sessions.values())
    return build_point(run, PointLoad(parallel), measure.gpus, slo, watts, interrupted=interrupted)


def _stream_end(c: LLMCallRecord) -> int:
    """When the call's stream ended: its last chunk (else its last token, first, submit)."""
    t = c.timings
    if t.chunk_offsets_ns:
        return t.submit_ns + max(t.chunk_offsets_ns)
    return t.end_ns


def _itl(c: LLMCallRecord) -> tuple[int, ...]:
    """Gaps between consecutive chunks from the first token's to the last token's."""
    t = c.timings
    if t.first_token_ns is None or t.last_token_ns is None:
        return ()
    lo, hi = t.first_token_ns - t.submit_ns, t.last_token_ns - t.submit_ns
    inside = [o for o in t.chunk_offsets_ns if lo <= o <= hi]
    return tuple(b - a for a, b in itertools.pairwise(inside))


def _requests(
    trace: Trace, plans: Sequence[SessionPlan], index: dict[str, int], t0: int, prefix: str
) -> list[RequestRecord]:
    """Every request of the trace, the failed ones included, each with its gap since its
    agent's previous call ended."""
    out: list[RequestRecord] = []
    for pl in plans:
        for cid in pl.order:
            c, cp = trace.calls[cid], pl.calls[cid]
            u, first = c.usage, c.timings.first_token_ns
            send = c.timings.submit_ns - t0
            out.append(
                RequestRecord(
                    session=index.get(pl.session_id, -1),
                    source=pl.key,
                    agent=c.agent_id,
                    call=cp.key,
                    seq=c.seq,
                    turn_depth=c.seq,
                    phase=Phase.MEASURED,
                    digest=cp.digest,
                    scheduled_ns=send,
                    send_ns=send,
                    end_ns=_stream_end(c) - t0,
                    first_ns=None if first is None else first - t0,
                    status=200,
                    prompt_tokens=u.prompt_tokens,
                    completion_tokens=u.completion_tokens,
                    cached_tokens=u.cached_tokens,
                    expected_tokens=cp.expected_tokens,
                    recorded_prompt_tokens=cp.prompt_tokens,
                    prompt_tokens_ours=cp.ours(),
                    ceiling_tokens=cp.ceiling_tokens,
                    recorded_gap_ns=cp.recorded_gap_ns,
                    finish_reason=c.response.finish_reason,
                    itl_ns=_itl(c),
                )
            )
    out += _failed_requests(trace, index, t0, prefix, out)
    out.sort(key=lambda r: (r.send_ns, r.call))
    last_end: dict[str, int] = {}
    for r in sorted(out, key=lambda r: (r.agent, r.seq, r.send_ns)):
        prev = last_end.get(r.agent)
        r.gap_ns = None if prev is None else r.send_ns - prev
        last_end[r.agent] = r.end_ns
    return out


def _failed_requests(
    trace: Trace, index: dict[str, int], t0: int, prefix: str, done: list[RequestRecord]
) -> list[RequestRecord]:
    """A failed request for each call that failed for good (its ``error`` event)."""
    calls = Counter(r.agent for r in done)
    out = []
    for ev in trace.events:
        d = ev.details
        reason, call_id = d.get("reason"), d.get("call_id")
        if (
            ev.kind != EventKind.ERROR
            or reason not in _FAILED_CALL
            or not call_id
            or not ev.agent_id
        ):
            continue
        text = str(d.get("error") or reason)
        m = _HTTP.match(text)
        kind = _FAILED_CALL[reason] or (
            http_kind(int(m.group(1))) if m else ErrorKind.ENDPOINT_ERROR
        )
        end = ev.ns - t0
        send = end - int(float(d.get("elapsed_s") or 0) * 1e9)
        sid = ev.session_id or ""
        out.append(
            RequestRecord(
                session=index.get(sid, -1),
                source=prefix + sid,
                agent=ev.agent_id,
                call=prefix + str(call_id),
                seq=calls[ev.agent_id],
                turn_depth=calls[ev.agent_id],
                phase=Phase.MEASURED,
                digest="",
                scheduled_ns=send,
                send_ns=send,
                end_ns=end,
                status=int(m.group(1)) if m else None,
                error_kind=kind,
                error=text,
            )
        )
    return out


def _sessions(
    trace: Trace, requests: list[RequestRecord], index: dict[str, int], t0: int
) -> list[SessionResult]:
    """Every session of the trace, on the lane that ran it (the first free at its start)."""
    count = Counter(r.session for r in requests)
    last = {r.session: r.end_ns for r in sorted(requests, key=lambda r: r.end_ns)}
    lane_free: list[int] = []
    out = []
    for sid, s in sorted(trace.sessions.items(), key=lambda kv: kv[1].start_ns):
        i = index[sid]
        start = s.start_ns - t0
        end = s.end_ns - t0 if s.end_ns is not None else last.get(i, start)
        lane = next((k for k, free in enumerate(lane_free) if free <= start), len(lane_free))
        if lane == len(lane_free):
            lane_free.append(end)
        lane_free[lane] = end
        out.append(
            SessionResult(
                session=i,
                source=sid,
                lane=lane,
                start_ns=start,
                end_ns=end,
                joined_at_ns=None,
                complete=s.end_reason is not None and s.end_reason not in _NOT_COMPLETE,
                requests=count[i],
                warmup_requests=0,
                eval_passed=s.eval_passed,
            )
        )
    return sorted(out, key=lambda s: s.session)


def _timeline(
    requests: list[RequestRecord], sessions: list[SessionResult], wall: int
) -> list[dict[str, int]]:
    """The counters replay samples at 1 Hz, rebuilt from the records."""
    done = sorted(requests, key=lambda r: r.end_ns)
    ends = [r.end_ns for r in done]
    out = []
    for t in range(0, wall + 1, 1_000_000_000):
        n = bisect.bisect_right(ends, t)
        out.append(
            {
                "t_ns": t,
                "active_sessions": sum(1 for s in sessions if s.start_ns <= t < s.end_ns),
                "inflight": sum(1 for r in requests if r.send_ns <= t < r.end_ns),
                "requests": n,
                "errors": sum(1 for r in done[:n] if not r.ok),
                "output_tokens": sum(r.output_tokens for r in done[:n] if r.ok),
            }
        )
    return out
