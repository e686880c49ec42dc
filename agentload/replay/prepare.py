"""What a replay decides before its first request, on whichever executor runs its points: the
traces read and planned (``load_plans``: fitted, synthesized, warned about), the API each call
goes in (``choose_apis``), each point's load shape (``point_shape``) and the connections a
client keeps for it (``connections``).

Order matters for the user: traces are read and planned, the engine/options validated and the
endpoint probed (``/models`` must list the model) before a single request is sent; any of
these failing is one line and exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from agentload.client.stream import StreamClient
from agentload.errors import ConfigError, ReplayError
from agentload.intervals import peak_overlap
from agentload.measure.pointrun import PointLoad
from agentload.options.engines import EnginePreset
from agentload.options.replay import ReplayConfig
from agentload.replay.fit import FitMode, Fitter
from agentload.replay.plan import SessionPlan, build_plans
from agentload.replay.salt import SaltAt
from agentload.replay.shapes import LoadShape
from agentload.tokenizer import DEFAULT_TOKENIZER
from agentload.trace.paths import trace_files
from agentload.trace.synth import Synthesizer
from agentload.trace.timeline import GapMode, describe_waits, has_waits, with_gaps
from agentload.trace.trace import Trace, load_trace

__all__ = [
    "choose_apis",
    "connections",
    "digest_manifest",
    "load_plans",
    "plan_apis",
    "point_load",
    "point_shape",
    "recorded_warm",
    "recorded_width",
    "session_width",
    "top_level",
]


def load_plans(
    paths: Sequence[str],
    max_context: int | None,
    salt_at: SaltAt = "after-system",
    fit: FitMode = "cut-session",
    tokenizer: str | None = None,
    seed: int = 0,
    gaps: GapMode = GapMode.MODELED,
) -> tuple[list[SessionPlan], dict[str, Any]]:
    """Plans of every session of the traces for salt mode ``salt_at`` (``plan``),
    fitted to ``max_context`` by ``fit`` (see ``fit``), what was cut or left out, and which
    traces end early (a killed run: one warning line each on stderr; their complete calls are
    replayed, each session as far as it was recorded). Content-free traces get prompts
    synthesized with ``tokenizer`` (default o200k_base) and ``seed``; a ``tokenizer`` given
    for traces that all have their text is a ``ConfigError``. The recorded waits are read on
    the ``gaps`` timeline (``trace.timeline``: with the traces' modeled waits, or without)."""
    traces = [with_gaps(load_trace(p), gaps) for p in trace_files(paths)]
    modeled = [describe_waits(t) for t in traces if gaps is GapMode.MODELED and has_waits(t)]
    synth = _synthesizer(traces, tokenizer, seed)
    truncated = _warn_truncated(traces)
    if salt_at != "off":
        _note_shared_blocks(traces)
    fitter = Fitter(max_context, fit) if max_context is not None else None
    plans = build_plans(traces, salt_at=salt_at, select=fitter, synth=synth)
    if not plans and fitter is not None:
        what = "call" if fit == "drop-session" else "first call"
        raise ReplayError(
            f"--max-context {max_context}: every session has a {what} above it "
            f"({len(fitter.excluded)} left out; prompt + output in the trace's tokens)"
        )
    _warn_unloadable_tokenizers(traces, plans)
    return plans, {
        "max_context": max_context,
        "fit": fit,
        "excluded_sessions": fitter.excluded if fitter else [],
        "cut_sessions": [vars(c) for c in fitter.cut] if fitter else [],
        "dropped_calls": fitter.dropped_calls if fitter else 0,
        "truncated_traces": truncated,
        "gaps": gaps.value,
        "modeled_waits": next(iter(dict.fromkeys(modeled)), None),
    }


def _synthesizer(traces: Sequence[Trace], tokenizer: str | None, seed: int) -> Synthesizer | None:
    """The synthesizer of the content-free traces' prompts (None when every trace has its
    text; a ``tokenizer`` given then is a ``ConfigError``)."""
    if any(t.header.redacted for t in traces):
        return Synthesizer(tokenizer or DEFAULT_TOKENIZER, seed)
    if tokenizer is not None:
        raise ConfigError(
            f"--tokenizer {tokenizer}: no trace is content-free (header.redacted); the "
            "tokenizer only synthesizes the prompts of such traces"
        )
    return None


def _warn_truncated(traces: Sequence[Trace]) -> list[dict[str, str]]:
    """The traces that end early (file and detail), each warned about on stderr."""
    truncated = [
        {"file": t.path, "detail": str(t.truncated)} for t in traces if t.truncated is not None
    ]
    for t in truncated:
        print(
            f"agentload: warning: {t['file']}: {t['detail']} (a killed run?); its complete "
            "calls are replayed, each session as far as it was recorded",
            file=sys.stderr,
            flush=True,
        )
    return truncated


def _note_shared_blocks(traces: Sequence[Trace]) -> None:
    """A note on stderr for each trace whose block ids are shared across its sessions (the
    salt keeps their prefix caches apart)."""
    for tr in traces:
        src = tr.header.source
        if src is not None and src.hash_id_scope == "global" and len(tr.sessions) > 1:
            print(
                f"agentload: note: {tr.path}: its block ids are shared across sessions "
                f"({src.format}); the salt keeps each session's prefix cache apart, "
                "--salt-at off replays that sharing",
                file=sys.stderr,
                flush=True,
            )


def _warn_unloadable_tokenizers(traces: Sequence[Trace], plans: Sequence[SessionPlan]) -> None:
    """A warning on stderr for each planned trace whose tokenizer cannot be loaded here (its
    salted requests' ceilings then count the unsalted blocks)."""
    unsalted = {pl.trace_path for pl in plans if pl.calls[pl.order[0]].within_tokens is None}
    for trace in traces:
        if trace.path in unsalted:
            print(
                f"agentload: warning: {trace.path}: tokenizer {trace.header.tokenizer} cannot "
                "be loaded; the KV-survival ceiling of salted requests counts the trace's "
                "unsalted blocks",
                file=sys.stderr,
                flush=True,
            )


def recorded_width(plans: Sequence[SessionPlan]) -> int:
    """Most calls the traces had in flight at once (the open loop's connections)."""
    return peak_overlap(
        (c.rel_trace_submit_ns, c.rel_trace_submit_ns + c.rel_end_ns - c.rel_submit_ns)
        for pl in plans
        for c in pl.calls.values()
    )


def session_width(plans: Sequence[SessionPlan]) -> int:
    """Most calls one recorded session had in flight at once (an orchestrator and its
    parallel sub-agents): what one closed-loop lane may need in connections."""
    return max(
        (peak_overlap((c.rel_submit_ns, c.rel_end_ns) for c in pl.calls.values()) for pl in plans),
        default=1,
    )


def point_shape(
    cfg: ReplayConfig, level: int, recorded_sessions: int, engine: EnginePreset
) -> LoadShape:
    """The load shape of the point at ``level`` (a lane count; ignored with an arrival rate or
    the recorded schedule): by default every recorded session at least once, or ``level`` of
    them, unless ``--duration`` bounds the point instead."""
    return LoadShape(
        cfg,
        concurrency=level,
        sessions=cfg.sessions
        if cfg.sessions is not None
        else (None if cfg.duration_s else max(recorded_sessions, level)),
        session_header=cfg.session_header or engine.session_header,
        parent_header=engine.parent_header,
    )


def point_load(cfg: ReplayConfig, level: int) -> PointLoad:
    """The load of the point at ``level`` as results.json says it: lanes, or the arrival rate,
    or the recorded schedule."""
    recorded = cfg.schedule == "recorded"
    concurrency = None if cfg.arrival_rate or recorded else level
    return PointLoad(concurrency, cfg.arrival_rate, cfg.schedule)


def digest_manifest(plans: Sequence[SessionPlan]) -> dict[str, str]:
    return {c.key: c.digest for pl in plans for c in pl.calls.values()}


def top_level(cfg: ReplayConfig) -> int:
    """The most lanes any point of the run may have: the largest level, the capacity search's
    top, or (arrivals: a target's latency decides how many run at once) 256."""
    if cfg.capacity:
        return cfg.capacity_max
    return max(cfg.levels) if not cfg.arrival_rate else 256


def connections(cfg: ReplayConfig, plans: Sequence[SessionPlan], executors: int = 1) -> int:
    """Connections one client keeps (one of ``executors`` sharing the load): its share of the
    run's top level times the widest session (sub-agents in parallel), plus spares; on the
    recorded schedule (open loop: no call may queue for a connection) every call."""
    if cfg.schedule == "recorded":
        return min(4096, sum(len(p.calls) for p in plans) + 8)
    width = max(pl.max_width for pl in plans)
    return max(8, -(-top_level(cfg) // executors) * width + 8)


def recorded_warm(plans: Sequence[SessionPlan]) -> int:
    """Connections opened before a point of the recorded schedule: more than the recording
    had in flight (the target's own latency decides, and a connection opened mid-run delays
    its request)."""
    return max(2 * recorded_width(plans), min(64, sum(len(p.calls) for p in plans)))


async def choose_apis(
    client: StreamClient, plans: Sequence[SessionPlan], cfg: ReplayConfig
) -> None:
    """``--api auto``: each call recorded in Responses, Messages or Gemini goes in that API when
    the target answers one small request of it, else as its chat translation (``--api chat``)."""
    wanted = {c.api for p in plans for c in p.calls.values() if c.native is not None}
    wanted.discard("chat")
    if cfg.api == "chat" or not wanted:
        return
    spoken = {api for api in sorted(wanted) if (await client.speaks(api, cfg.model))[0]}
    for p in plans:
        for c in p.calls.values():
            if c.api in spoken and c.native is not None:
                c.use_api(c.api)


def plan_apis(plans: Sequence[SessionPlan]) -> dict[str, dict[str, int]]:
    """Calls per recorded API and the API each was sent in (``PlanInfo.apis``)."""
    out: dict[str, dict[str, int]] = {}
    for p in plans:
        for c in p.calls.values():
            sent = out.setdefault(c.api, {})
            sent[c.send_api] = sent.get(c.send_api, 0) + 1
    return out
