"""The live benchmark of ``generate`` / ``eval``: recorded traces → replay's results document.

``generate`` runs real agents with real tools against the endpoint under test and records
every call's timings; this module turns those recordings into the same ``results.json``,
``summary.csv`` and ``report.html`` as ``replay``, computed by the same metric classes
(``measure.metrics``). What differs is the traffic: the target's own outputs drove the agents,
so two systems receive different requests (``mode: live``; ``replay`` sends identical ones).

* A point is one generate run of N sessions with P at a time (``--sweep 1,4,16``: one run per
  level, each its own trace ``…-pP.agentload.jsonl.zst``), turned into a replay ``Point`` by
  ``generate.live_point`` (each ``llm_call`` a ``RequestRecord``, each session a
  ``SessionResult``, the window by replay's rule).
* Power: ``--power-watts W``, or ``--power nvml`` sampled while the sessions run.

The files go into a folder beside the traces named like the run's trace without its suffix
(``traces/quick-seed0-<time>/``); ``agentload report`` and ``compare`` read them as any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from agentload.client.stream import PROBE_TIMEOUT_S
from agentload.generate.dispatch import generate
from agentload.generate.live_capacity import LiveProbe
from agentload.generate.live_point import live_point
from agentload.generate.options import GenerateOptions
from agentload.generate.run import RunResult, endpoint_simulator
from agentload.generate.run import prepare_trace_path as _prepare_trace_path
from agentload.generate.sessions import ProgressSink
from agentload.measure.capacity_search import search_capacity
from agentload.measure.files import write_run
from agentload.measure.metrics import SLO, prompt_token_ratio
from agentload.measure.power import NvmlPower
from agentload.measure.results import (
    EngineInfo,
    Environment,
    LiveInfo,
    LivePoint,
    PlanInfo,
    ResultsDocument,
    TruncatedTrace,
)
from agentload.options.capacity import CapacityOptions
from agentload.options.cluster import ClusterOptions
from agentload.options.live import LiveConfig
from agentload.options.measure import MeasureOptions
from agentload.replay.plan import build_plans
from agentload.trace.paths import TRACE_SUFFIXES
from agentload.trace.timeline import describe_waits
from agentload.trace.trace import Trace, load_trace

__all__ = [
    "live_results",
    "results_dir",
    "run_points",
    "write_live",
]


def results_dir(trace: Path) -> Path:
    """The folder of a run's benchmark files: its trace's path without the trace suffix."""
    name = trace.name
    for suffix in TRACE_SUFFIXES:
        if name.endswith(suffix):
            return trace.with_name(name.removesuffix(suffix))
    return trace.with_name(name + ".results")


def _point_trace(base: Path, level: int | str) -> Path:
    """``…/quick-seed0-T.agentload.jsonl.zst`` → ``…/quick-seed0-T-p4.agentload.jsonl.zst``."""
    stem = results_dir(base).name
    return base.with_name(f"{stem}-p{level}{base.name.removeprefix(stem)}")


@contextlib.asynccontextmanager
async def _power(opts: MeasureOptions) -> AsyncIterator[NvmlPower | None]:
    """NVML sampled at 1 Hz while the block runs (``--power nvml``), else None."""
    if opts.power != "nvml":
        yield None
        return
    power = NvmlPower(opts.gpus)
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
    progress: ProgressSink | None = None,
    report: bool = True,
) -> tuple[list[RunResult], ResultsDocument, Path, list[Path]]:
    """One generate run per level of ``opts.levels`` (its ``parallel``); the results document
    of them all, the folder it is written to (``write_live``) and the files written there.
    Interrupted (Ctrl-C, SIGTERM), it writes what ran — the points so far and the interrupted
    one, its sessions ``interrupted`` — then lets the interruption go on."""
    s = opts.scenario
    seed = s.seed if opts.seed is None else opts.seed
    base = _prepare_trace_path(Path(opts.out), s.name, seed)
    folder = results_dir(base)
    one = len(opts.levels) == 1
    runs: list[RunResult] = []
    levels: list[int] = []
    path = base
    capacity = None
    probe = None
    level = opts.levels[0]
    served = None  # an --endpoint that is agentload serve: its profile
    async with _power(opts) as power:
        try:
            if opts.capacity:
                probe = LiveProbe(
                    opts,
                    lambda lv, r: _point_trace(base, f"{lv}-r{r}"),
                    progress,
                    lambda run, lv: live_results([run], opts, levels=[lv]).points[0],
                )
                runs, levels = probe.runs, probe.levels  # filled as the probes run
                capacity = await search_capacity(opts, probe, [])
            for level in [] if opts.capacity else opts.levels:
                path = base if one else _point_trace(base, level)
                point = opts.model_copy(update={"levels": [level], "out": path})
                runs.append(await generate(point, progress))
                levels.append(level)
        except asyncio.CancelledError:
            if probe is not None and probe.current is not None:  # the round it was running
                path, level = probe.current
            if path.exists() and all(r.trace_path != path for r in runs):
                runs.append(RunResult(trace_path=path))
                levels.append(level)
            if runs:
                doc = live_results(runs, opts, levels=levels)
                write_live(doc, folder, report)
                print(
                    f"agentload: interrupted; the live results of what ran: {folder}",
                    file=sys.stderr,
                    flush=True,
                )
            raise
    if opts.endpoint and runs:  # it answered: is it agentload serve?
        probe_s = min(PROBE_TIMEOUT_S, opts.call_timeout_s)
        served = await endpoint_simulator(opts.endpoint, opts.model, probe_s)
    doc = live_results(runs, opts, power.samples if power is not None else None, served, levels)
    doc.capacity = capacity
    return runs, doc, folder, write_live(doc, folder, report)


def _config(
    runs: Sequence[RunResult], opts: GenerateOptions, first: Any, levels: list[int]
) -> LiveConfig:
    """The run's ``config`` in results.json: what the live run was given (its traces, target,
    points, sessions, seed, measurement and cluster options)."""
    shared = set(CapacityOptions.model_fields) | set(ClusterOptions.model_fields)
    return LiveConfig.model_validate(
        {
            "traces": [str(r.trace_path) for r in runs],
            "endpoint": first.endpoint or runs[0].endpoint,
            "model": first.model or runs[0].model,
            "engine": opts.engine,
            "levels": levels,
            "sessions": opts.sessions,
            "seed": first.seed if first.seed is not None else 0,
            "gaps": "modeled" if opts.pace == "real" else "measured",
            "call_timeout_s": opts.call_timeout_s,
            **opts.model_dump(include=shared),
        }
    )


def _slept_waits(traces: Sequence[Trace]) -> dict[str, Any]:
    """``PlanInfo``'s gaps: the agents slept through their modeled waits (``--pace real``), so
    the run's timeline holds them; else the measured gaps alone."""
    slept = [t for t in traces if t.header.waits is not None and t.header.waits.slept]
    if not slept:
        return {"gaps": "measured"}
    return {"gaps": "modeled", "modeled_waits": describe_waits(slept[0])}


def live_results(
    runs: Sequence[RunResult],
    opts: GenerateOptions,
    power_samples: list[tuple[int, float]] | None = None,
    served: str | None = None,
    levels: list[int] | None = None,
) -> ResultsDocument:
    """The results document of the runs (one point each, in order; ``served``: the profile of
    the ``--endpoint`` when it is agentload's simulator); see the module docstring."""
    traces = [load_trace(r.trace_path) for r in runs]
    plans = build_plans(traces, salt_at="off") if any(t.calls for t in traces) else []
    slo = SLO.of(opts.slo)
    levels = levels or opts.levels[: len(runs)]
    points = []
    for i, trace in enumerate(traces):
        mine = [pl for pl in plans if pl.trace_path == trace.path]
        prefix = f"{i}:" if len(traces) > 1 else ""  # as build_plans keys several traces
        points.append(live_point(trace, mine, levels[i], opts, slo, prefix, power_samples))
    first = traces[0].header
    gen = (first.model_extra or {}).get("generator") or {}
    return ResultsDocument(
        mode="live",
        config=_config(runs, opts, first, levels),
        environment=Environment.here(),
        engine=EngineInfo(
            name=opts.engine or "openai", ignore_eos=False, min_tokens=False, include_usage=True
        ),
        plan=PlanInfo(
            sessions=len(plans),
            calls=sum(len(p.calls) for p in plans),
            **_slept_waits(traces),
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
                for r, t, level in zip(runs, traces, levels, strict=True)
            ],
        ),
        simulator=served if opts.endpoint else str(opts.scenario.endpoint.profile),
    )


def write_live(doc: ResultsDocument, out: Path, report: bool = True) -> list[Path]:
    """``measure.files.write_run``; report.html only with ``report`` and when a request
    succeeded (a run whose every call failed has nothing to draw)."""
    return write_run(doc, out, report and any(r.ok for p in doc.points for r in p.requests))
