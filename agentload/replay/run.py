"""One replay run: check inputs, probe the endpoint, run every point, aggregate.

Order matters for the user: traces are read and planned, the engine/options validated and the
endpoint probed (``/models`` must list the model) before a single request is sent; any of
these failing is one line and exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from agentload.auth import api_key_from_env
from agentload.client.stream import StreamClient
from agentload.errors import ConfigError, ReplayError
from agentload.intervals import peak_overlap
from agentload.masking import redact_url
from agentload.measure.capacity import Capacity
from agentload.measure.metrics import SLO, prompt_token_ratio
from agentload.measure.power import NvmlPower
from agentload.measure.repeats import repeat_groups
from agentload.measure.results import (
    ClusterRun,
    EngineInfo,
    Environment,
    PlanInfo,
    Point,
    ResultsDocument,
)
from agentload.measure.summary import summary_rows
from agentload.options.engines import EnginePreset, get_engine
from agentload.options.replay import ReplayConfig
from agentload.replay.bodies import BodyBuilder
from agentload.replay.capacity_run import DEFAULT_CAP_S, search_capacity, watched
from agentload.replay.fit import FitMode, Fitter
from agentload.replay.plan import SessionPlan, build_plans
from agentload.replay.points import ProgressHook, Watcher, make_point, run_point
from agentload.replay.salt import SaltAt, new_nonce, new_run_id
from agentload.replay.schedule import LoadShape, PointRunner
from agentload.tokenizer import DEFAULT_TOKENIZER
from agentload.trace.paths import trace_files
from agentload.trace.synth import Synthesizer
from agentload.trace.timeline import GapMode, describe_waits, has_waits, with_gaps
from agentload.trace.trace import Trace, load_trace

__all__ = [
    "ProgressHook",
    "build_document",
    "choose_apis",
    "digest_manifest",
    "load_plans",
    "make_point",
    "point_shape",
    "recorded_width",
    "run_replay",
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
        concurrency=level,
        arrival_rate=cfg.arrival_rate,
        duration_s=cfg.duration_s,
        sessions=cfg.sessions
        if cfg.sessions is not None
        else (None if cfg.duration_s else max(recorded_sessions, level)),
        gap_scale=cfg.gap_scale,
        start_at=cfg.start_at,
        seed=cfg.seed,
        session_header=cfg.session_header or engine.session_header,
        parent_header=engine.parent_header,
        schedule=cfg.schedule,
        time_scale=cfg.time_scale,
    )


def digest_manifest(plans: Sequence[SessionPlan]) -> dict[str, str]:
    return {c.key: c.digest for pl in plans for c in pl.calls.values()}


async def run_replay(cfg: ReplayConfig, progress: ProgressHook | None = None) -> ResultsDocument:
    """Run every point of ``cfg`` in this process; returns the results document (see
    ``results``). A run with ``cfg.ray`` is ``sharded.run_sharded``'s."""
    if cfg.ray is not None:
        raise ReplayError("--ray runs through replay.sharded.run_sharded, not run_replay")
    engine = get_engine(cfg.engine)
    if not cfg.extras:
        engine = engine.without_extras()
    plans, exclusion = load_plans(
        cfg.traces, cfg.max_context, cfg.salt_at, cfg.fit, cfg.tokenizer, cfg.seed,
        GapMode(cfg.gaps),
    )  # fmt: skip
    if cfg.capacity and cfg.duration_s is None:  # the cap of each probe
        cfg = cfg.model_copy(update={"duration_s": DEFAULT_CAP_S})
    manifest: dict[str, str] = {}
    power = NvmlPower(cfg.gpus) if cfg.power == "nvml" else None
    client = _client_for(cfg, plans)
    points: list[Point] = []
    interrupted = False
    simulator: str | None = None
    capacity: Capacity | None = None
    try:
        await client.probe(cfg.model)
        simulator = await client.simulator_profile(cfg.model)
        await choose_apis(client, plans, cfg)
        manifest = digest_manifest(plans)
        probe = _Prober(cfg, client, plans, engine, power, progress)
        if cfg.capacity:
            capacity = await search_capacity(cfg, watched(probe.repeated, cfg, points), points)
            interrupted = any(p.interrupted for p in points)
        for level in [] if cfg.capacity else cfg.levels:
            runs = await probe.repeated(len(points), level)
            points += runs
            if runs[-1].interrupted:
                interrupted = True
                break
    finally:
        await client.aclose()
        if power is not None:
            power.close()
    doc = build_document(cfg, engine, plans, exclusion, manifest, interrupted, points)
    doc.simulator = simulator  # agentload serve: its timings are a profile's, not hardware's
    doc.capacity = capacity
    doc.repeats = repeat_groups(summary_rows(doc), [p.load for p in points]) or None
    return doc


def _client_for(cfg: ReplayConfig, plans: Sequence[SessionPlan]) -> StreamClient:
    """The run's HTTP client, with connections for its largest load."""
    width = max(pl.max_width for pl in plans)
    top = max(cfg.levels) if not cfg.arrival_rate else 256
    top = cfg.capacity_max if cfg.capacity else top
    conns = max(8, top * width + 8)
    if cfg.schedule == "recorded":  # open loop: no call may queue for a connection
        conns = min(4096, sum(len(p.calls) for p in plans) + 8)
    return StreamClient(
        cfg.endpoint, api_key=api_key_from_env(), timeout_s=cfg.timeout_s, max_connections=conns
    )


class _Prober:
    """Runs one point of the run: ``await prober(index, level, watcher)``; all the repetitions
    of a load: ``prober.repeated``."""

    def __init__(
        self,
        cfg: ReplayConfig,
        client: StreamClient,
        plans: Sequence[SessionPlan],
        engine: EnginePreset,
        power: NvmlPower | None,
        progress: ProgressHook | None,
    ) -> None:
        self.cfg, self.client, self.plans, self.engine = cfg, client, plans, engine
        self.power, self.progress = power, progress
        self.slo = SLO.of(cfg.slo)
        self.builder = BodyBuilder(cfg.model, engine, cfg.session_field or engine.session_field)
        self.nonce = new_run_id()
        self.width = session_width(plans)

    async def repeated(
        self, first: int, level: int, watchers: Sequence[Watcher | None] | None = None
    ) -> list[Point]:
        """The ``--repeat`` runs of ``level`` (indexes from ``first``), each with its watcher;
        stops after an interrupted one."""
        out: list[Point] = []
        for r in range(self.cfg.repeat):
            p = await self(first + r, level, watchers[r] if watchers else None)
            p.repeat = r if self.cfg.repeat > 1 else None
            out.append(p)
            if p.interrupted:
                break
        return out

    async def __call__(self, i: int, level: int, watcher: Watcher | None = None) -> Point:
        cfg, plans = self.cfg, self.plans
        shape = point_shape(cfg, level, len(plans), self.engine)
        runner = PointRunner(
            self.client, plans, self.builder, shape, nonce=new_nonce(self.nonce, i)
        )
        # closed loop: each lane may have its session's parallel calls in flight; open
        # loop: the target's own latency decides how many are in flight, so open more
        # than the recording had (a connection opened mid-run delays its request)
        warm = level * self.width
        if cfg.schedule == "recorded":
            warm = max(2 * recorded_width(plans), min(64, sum(len(p.calls) for p in plans)))
        await self.client.warm(warm if not cfg.arrival_rate else 0)
        total = 0 if cfg.capacity else len(cfg.levels) * cfg.repeat
        return await run_point(runner, cfg, self.slo, self.power, self.progress, i, total, watcher)


def build_document(
    cfg: ReplayConfig,
    engine: EnginePreset,
    plans: Sequence[SessionPlan],
    exclusion: dict[str, Any],
    manifest: dict[str, str],
    interrupted: bool,
    points: list[Point],
    cluster: ClusterRun | None = None,
) -> ResultsDocument:
    """The results document of a run (one machine, or a Ray cluster: ``cluster``)."""
    return ResultsDocument(
        salt_at=cfg.salt_at,
        config=cfg.model_copy(
            update={
                "endpoint": redact_url(cfg.endpoint),
                "scrape_metrics": ",".join(redact_url(u) for u in cfg.scrape_targets) or None,
            }
        ),
        environment=Environment.here(),
        engine=EngineInfo(
            name=engine.name,
            ignore_eos=engine.ignore_eos,
            min_tokens=engine.min_tokens,
            include_usage=engine.include_usage,
        ),
        plan=PlanInfo(
            sessions=len(plans),
            calls=sum(len(p.calls) for p in plans),
            apis=_apis(plans),
            **exclusion,
        ),
        digest_manifest=manifest,
        interrupted=interrupted,
        prompt_token_ratio=prompt_token_ratio(r for p in points for r in p.requests),
        points=points,
        cluster=cluster,
    )


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


def _apis(plans: Sequence[SessionPlan]) -> dict[str, dict[str, int]]:
    """Calls per recorded API and the API each was sent in (``PlanInfo.apis``)."""
    out: dict[str, dict[str, int]] = {}
    for p in plans:
        for c in p.calls.values():
            sent = out.setdefault(c.api, {})
            sent[c.send_api] = sent.get(c.send_api, 0) + 1
    return out
