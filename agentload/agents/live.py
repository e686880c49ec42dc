"""The live benchmark of ``generate`` / ``eval``: recorded traces → replay's results document.

``generate`` runs real agents with real tools against the endpoint under test and records
every call's timings; this module turns those recordings into the same ``results.json``,
``summary.csv`` and ``report.html`` as ``replay``, computed by the same metric classes
(``replay.metrics``). What differs is the traffic: the target's own outputs drove the agents,
so two systems receive different requests (``mode: live``; ``replay`` sends identical ones).

* A point is one generate run of N sessions with P at a time (``--sweep 1,4,16``: one run per
  level, each its own trace ``…-pP.agentload.jsonl.zst``). Times are ns since the point's
  start, the first session's start.
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
* Power: ``--power-watts W``, or ``--power nvml`` sampled while the sessions run.

The files go into a folder beside the traces named like the run's trace without its suffix
(``traces/quick-seed0-<time>/``); ``agentload report`` and ``compare`` read them as any other.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import dataclasses
import itertools
import re
import sys
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from agentload.agents.raygen import generate
from agentload.agents.run import GenerateOptions, ProgressSink, RunResult
from agentload.agents.run import prepare_trace_path as _prepare_trace_path
from agentload.outfile import write_errors
from agentload.recorder.paths import TRACE_SUFFIXES
from agentload.recorder.schema import LLMCallRecord
from agentload.recorder.trace import Trace, load_trace
from agentload.replay.config import ReplayConfig
from agentload.replay.metrics import SLO, MetricContext, aggregate, prompt_token_ratio
from agentload.replay.plan import SessionPlan, build_plans
from agentload.replay.power import NvmlPower, average_watts
from agentload.replay.records import (
    RequestRecord,
    SessionResult,
    label_phases,
    steady_window,
)
from agentload.replay.results import (
    Aggregates,
    EngineInfo,
    LiveInfo,
    LivePoint,
    PlanInfo,
    Point,
    ResultsDocument,
    Span,
    TimelineSample,
    TruncatedTrace,
    write_results,
)
from agentload.replay.run import run_environment

__all__ = [
    "LIVE_RULE",
    "live_point",
    "live_results",
    "results_dir",
    "run_points",
    "write_live",
]

LIVE_RULE = (
    "live: from the start (sessions start from their first call, no warm-up) to the moment "
    "the first lane found no session left"
)
_NOT_COMPLETE = frozenset({"interrupted", "error", "endpoint_error"})
"""End reasons of a session that did not run to its own end (not a complete job)."""
_FAILED_CALL = {"endpoint_error": None, "context_limit": "context_overflow"}
_HTTP = re.compile(r"^HTTP (\d{3})\b")


def results_dir(trace: Path) -> Path:
    """The folder of a run's benchmark files: its trace's path without the trace suffix."""
    name = trace.name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return trace.with_name(name.removesuffix(suffix))
    return trace.with_name(name + ".results")


def _point_trace(base: Path, level: int) -> Path:
    """``…/quick-seed0-T.agentload.jsonl.zst`` → ``…/quick-seed0-T-p4.agentload.jsonl.zst``."""
    stem = results_dir(base).name
    return base.with_name(f"{stem}-p{level}{base.name.removeprefix(stem)}")


@contextlib.asynccontextmanager
async def _power(cfg: ReplayConfig) -> AsyncIterator[NvmlPower | None]:
    """NVML sampled at 1 Hz while the block runs (``--power nvml``), else None."""
    if cfg.power != "nvml":
        yield None
        return
    power = NvmlPower(cfg.gpus)
    task = asyncio.create_task(power.run())
    try:
        yield power
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        power.sample()
        power.close()


async def run_points(
    opts: GenerateOptions,
    cfg: ReplayConfig,
    progress: ProgressSink | None = None,
    report: bool = True,
) -> tuple[list[RunResult], ResultsDocument, Path, list[Path]]:
    """One generate run per level of ``cfg.levels`` (its ``parallel``); the results document
    of them all, the folder it is written to (``write_live``) and the files written there.
    Interrupted (Ctrl-C, SIGTERM), it writes what ran — the points so far and the interrupted
    one, its sessions ``interrupted`` — then lets the interruption go on."""
    s = opts.scenario
    seed = s.seed if opts.seed is None else opts.seed
    base = _prepare_trace_path(Path(opts.out), s.name, seed)
    folder = results_dir(base)
    one = len(cfg.levels) == 1
    runs: list[RunResult] = []
    path = base
    async with _power(cfg) as power:
        try:
            for level in cfg.levels:
                path = base if one else _point_trace(base, level)
                point = dataclasses.replace(opts, parallel=level, out=path)
                runs.append(await generate(point, progress))
        except asyncio.CancelledError:
            if path.exists():
                runs.append(RunResult(trace_path=path))
            if runs:
                levels = cfg.levels[: len(runs)]
                doc = live_results(runs, opts, cfg.model_copy(update={"levels": levels}))
                write_live(doc, folder, report)
                print(f"agentload: interrupted; the live results of what ran: {folder}",
                      file=sys.stderr, flush=True)  # fmt: skip
            raise
    doc = live_results(runs, opts, cfg, power.samples if power is not None else None)
    return runs, doc, folder, write_live(doc, folder, report)


def live_results(
    runs: Sequence[RunResult],
    opts: GenerateOptions,
    cfg: ReplayConfig,
    power_samples: list[tuple[int, float]] | None = None,
) -> ResultsDocument:
    """The results document of the runs (one point each, in order); see the module docstring."""
    traces = [load_trace(r.trace_path) for r in runs]
    plans = build_plans(traces, salt_at="off") if any(t.calls for t in traces) else []
    slo = SLO(**cfg.slo) if cfg.slo else None
    points = []
    for i, trace in enumerate(traces):
        mine = [pl for pl in plans if pl.trace_path == trace.path]
        prefix = f"{i}:" if len(traces) > 1 else ""  # as build_plans keys several traces
        points.append(live_point(trace, mine, cfg.levels[i], cfg, slo, prefix, power_samples))
    first = traces[0].header
    gen = (first.model_extra or {}).get("generator") or {}
    return ResultsDocument(
        mode="live",
        config=cfg.model_copy(
            update={
                "traces": [str(r.trace_path) for r in runs],
                "endpoint": first.endpoint or runs[0].endpoint,
                "model": first.model or runs[0].model,
                "engine": "openai",
                "extras": False,
                "sessions": opts.sessions,
                "gap_scale": 1.0,
                "salt_at": "off",
                "start_at": "zero",
                "timeout_s": opts.call_timeout_s,
                "seed": first.seed if first.seed is not None else cfg.seed,
            }
        ),
        environment=run_environment(),
        engine=EngineInfo(name="openai", ignore_eos=False, min_tokens=False, include_usage=True),
        plan=PlanInfo(
            sessions=len(plans),
            calls=sum(len(p.calls) for p in plans),
            max_context=None,
            excluded_sessions=[],
            truncated_traces=[
                TruncatedTrace(file=t.path, detail=str(t.truncated))
                for t in traces
                if t.truncated is not None
            ],
        ),
        digest_manifest={c.key: c.digest for pl in plans for c in pl.calls.values()},
        interrupted=any(p.interrupted for p in points),
        points=points,
        prompt_token_ratio=prompt_token_ratio(r for p in points for r in p.requests),
        live=LiveInfo(
            command="eval" if opts.evaluate else "generate",
            scenario=first.scenario or opts.scenario.name,
            scenario_hash=first.scenario_hash,
            sandbox=str(gen.get("sandbox") or opts.sandbox or opts.scenario.sandbox.kind),
            retries=opts.retries,
            points=[
                LivePoint(
                    trace=str(r.trace_path),
                    parallel=level,
                    end_reasons=dict(Counter(str(st.end_reason) for st in t.sessions.values())),
                )
                for r, t, level in zip(runs, traces, cfg.levels, strict=True)
            ],
        ),
    )


def live_point(
    trace: Trace,
    plans: Sequence[SessionPlan],
    parallel: int,
    cfg: ReplayConfig,
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
    watts = cfg.power_watts
    if power_samples is not None:
        watts = average_watts(power_samples, t0 + window.start_ns, t0 + window.end_ns)
    ctx = MetricContext(requests, sessions, window, cfg.gpus, watts, slo)
    wall = max([s.end_ns for s in sessions] + [r.end_ns for r in requests], default=0)
    return Point(
        interrupted=any(s.end_reason == "interrupted" for s in trace.sessions.values()),
        concurrency=parallel,
        arrival_rate=None,
        wall_s=wall / 1e9,
        warmup_window=Span(start_ns=0, end_ns=0),
        window=window,
        power_watts=watts,
        max_active_sessions=_peak((s.start_ns, s.end_ns) for s in sessions),
        max_inflight_requests=_peak((r.send_ns, r.end_ns) for r in requests),
        aggregates=Aggregates.model_validate(aggregate(ctx)),
        timeline=_timeline(requests, sessions, wall),
        scrape=None,
        sessions=sessions,
        requests=requests,
    )


def _stream_end(c: LLMCallRecord) -> int:
    """When the call's stream ended: its last chunk (else its last token, first, submit)."""
    t = c.timings
    if t.chunk_offsets_ns:
        return t.submit_ns + max(t.chunk_offsets_ns)
    return t.last_token_ns or t.first_token_ns or t.submit_ns


def _itl(c: LLMCallRecord) -> list[int]:
    """Gaps between consecutive chunks from the first token's to the last token's."""
    t = c.timings
    if t.first_token_ns is None or t.last_token_ns is None:
        return []
    lo, hi = t.first_token_ns - t.submit_ns, t.last_token_ns - t.submit_ns
    inside = [o for o in t.chunk_offsets_ns if lo <= o <= hi]
    return [b - a for a, b in itertools.pairwise(inside)]


def _requests(
    trace: Trace, plans: Sequence[SessionPlan], index: dict[str, int], t0: int, prefix: str
) -> list[RequestRecord]:
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
                    phase="measured",
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
        if ev.kind != "error" or reason not in _FAILED_CALL or not call_id or not ev.agent_id:
            continue
        text = str(d.get("error") or reason)
        m = _HTTP.match(text)
        kind = _FAILED_CALL[reason] or (f"http_{m.group(1)}" if m else "endpoint_error")
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
                phase="measured",
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


def _peak(intervals: Any) -> int:
    """Most intervals ``[start, end)`` open at once."""
    events = sorted(e for a, b in intervals for e in ((a, 1), (b, -1)))
    now = best = 0
    for _, d in events:
        now += d
        best = max(best, now)
    return best


def _timeline(
    requests: list[RequestRecord], sessions: list[SessionResult], wall: int
) -> list[TimelineSample]:
    """The counters replay samples at 1 Hz, rebuilt from the records."""
    done = sorted(requests, key=lambda r: r.end_ns)
    ends = [r.end_ns for r in done]
    out = []
    for t in range(0, wall + 1, 1_000_000_000):
        n = bisect.bisect_right(ends, t)
        out.append(
            TimelineSample(
                t_ns=t,
                active_sessions=sum(1 for s in sessions if s.start_ns <= t < s.end_ns),
                inflight=sum(1 for r in requests if r.send_ns <= t < r.end_ns),
                requests=n,
                errors=sum(1 for r in done[:n] if not r.ok),
                output_tokens=sum(r.output_tokens for r in done[:n] if r.ok),
            )
        )
    return out


def write_live(doc: ResultsDocument, out: Path, report: bool = True) -> list[Path]:
    """Write results.json, summary.csv and (with ``report``, when a request succeeded: a run
    whose every call failed has nothing to draw) report.html and its PNGs into ``out``;
    returns their paths."""
    from agentload.replay.summary import write_summary

    with write_errors(out, option="--out"):  # a full disk: one line, the traces are kept
        paths = [write_results(doc, out), write_summary(doc, out)]
        if report and any(r.ok for p in doc.points for r in p.requests):
            from agentload.replay.report import write_report  # matplotlib: seconds to import

            paths += write_report([doc], out)
    return paths
