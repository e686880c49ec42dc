"""One replay run, on this machine or on a Ray cluster: the one orchestration over a
``points.PointExecutor``.

Traces are read and planned and the options checked (``prepare``), the executor probes the
target and chooses the calls' APIs (this machine: ``local.LocalPoints``; ``--ray``:
``sharded.RayPoints``, which also starts the workers), then the points run: every level of
``--concurrency``/``--sweep`` ``--repeat`` times, or the probes of the ``--capacity`` search;
Ctrl-C ends the run after the point it interrupted. The results document is built once, the
same way for either executor (``build_document``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentload.masking import redact_url
from agentload.measure.capacity import Capacity
from agentload.measure.capacity_search import search_capacity, search_in_one_run
from agentload.measure.capacity_stages import StageDriver, StageMark
from agentload.measure.metrics import prompt_token_ratio
from agentload.measure.repeats import repeat_groups
from agentload.measure.results import (
    ClusterRun,
    EngineInfo,
    Environment,
    PlanInfo,
    Point,
    ResultsDocument,
)
from agentload.measure.steady import SteadyRule
from agentload.measure.summary import summary_rows
from agentload.options.engines import EnginePreset, get_engine
from agentload.options.replay import ReplayConfig
from agentload.replay.capacity_run import DEFAULT_CAP_S, watched
from agentload.replay.local import LocalPoints
from agentload.replay.plan import SessionPlan
from agentload.replay.points import PointExecutor, ProgressHook, RunInputs, Watcher
from agentload.replay.prepare import digest_manifest, load_plans, plan_apis
from agentload.trace.timeline import GapMode

__all__ = ["ProgressHook", "build_document", "load_plans", "run_replay"]


async def run_replay(cfg: ReplayConfig, progress: ProgressHook | None = None) -> ResultsDocument:
    """Run every point of ``cfg`` (see the module docstring); the results document."""
    engine = get_engine(cfg.engine)
    if not cfg.extras:
        engine = engine.without_extras()
    plans, exclusion = load_plans(
        cfg.traces,
        cfg.max_context,
        cfg.salt_at,
        cfg.fit,
        cfg.tokenizer,
        cfg.seed,
        GapMode(cfg.gaps),
    )
    if cfg.capacity and cfg.duration_s is None:  # the cap of each probe
        cap = max(DEFAULT_CAP_S, cfg.capacity_min_window_s)
        cfg = cfg.model_copy(update={"duration_s": cap})
    executor = _executor(RunInputs(cfg, plans, engine, progress))
    points: list[Point] = []
    manifest: dict[str, str] = {}
    simulator = capacity = None
    try:
        simulator = await executor.open()
        manifest = digest_manifest(plans)
        repeated = _Repeats(cfg, executor)
        if cfg.capacity:
            capacity = await _capacity(cfg, executor, repeated, points)
        for level in [] if cfg.capacity else cfg.levels:
            points += await repeated(len(points), level)
            if points[-1].interrupted:
                break
    finally:
        await executor.aclose()
    interrupted = any(p.interrupted for p in points)
    doc = build_document(
        cfg, engine, plans, exclusion, manifest, interrupted, points, executor.cluster
    )
    doc.simulator = simulator  # agentload serve: its timings are a profile's, not hardware's
    doc.capacity = capacity
    doc.repeats = repeat_groups(summary_rows(doc), [p.load for p in points]) or None
    return doc


async def _capacity(
    cfg: ReplayConfig, executor: PointExecutor, repeated: _Repeats, points: list[Point]
) -> Capacity:
    """The capacity search: in one run whose lanes it moves (``--capacity-search ramp``), or a
    point per probe."""
    rule = SteadyRule(min_s=cfg.capacity_min_window_s)
    if cfg.search_method == "probes":
        return await search_capacity(cfg, watched(repeated, cfg, points, rule), points)
    cap_s = cfg.duration_s or DEFAULT_CAP_S

    async def staged(search: StageDriver, marks: list[StageMark]) -> list[Point]:
        return await executor.staged(len(points), 1, search, marks)

    return await search_in_one_run(cfg, staged, points, rule, cap_s)


def _executor(run: RunInputs) -> PointExecutor:
    """This machine's executor, or Ray's with ``--ray`` (imported only then)."""
    if run.cfg.ray is None:
        return LocalPoints(run)
    from agentload.replay.sharded import RayPoints

    return RayPoints(run)


class _Repeats:
    """All the ``--repeat`` runs of one load: ``await repeats(first index, level, watchers)``
    (each run with its watcher); stops after an interrupted one."""

    def __init__(self, cfg: ReplayConfig, executor: PointExecutor) -> None:
        self.cfg, self.executor = cfg, executor
        self.total = 0 if cfg.capacity else len(cfg.levels) * cfg.repeat

    async def __call__(
        self, first: int, level: int, watchers: Sequence[Watcher | None] | None = None
    ) -> list[Point]:
        out: list[Point] = []
        for r in range(self.cfg.repeat):
            watcher = watchers[r] if watchers else None
            p = await self.executor.point(first + r, level, self.total, watcher)
            p.repeat = r if self.cfg.repeat > 1 else None
            out.append(p)
            if p.interrupted:
                break
        return out


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
            apis=plan_apis(plans),
            **exclusion,
        ),
        digest_manifest=manifest,
        interrupted=interrupted,
        prompt_token_ratio=prompt_token_ratio(r for p in points for r in p.requests),
        points=points,
        cluster=cluster,
    )
