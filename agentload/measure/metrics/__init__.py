"""Replay metrics: one small class per metric, formula in its docstring, graphlib-ordered.

``aggregate(ctx)`` computes every registered metric for one point, plus the request-level
ones by turn depth and by context band. ``METRICS`` is the registry: summary.csv, the report
and the plots read each metric's metadata from it (``registry()``), so ``register`` is the
one step that adds a metric to every output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from agentload.measure.metrics.base import (
    SLO,
    Column,
    Metric,
    MetricContext,
    compute_all,
    distribution,
)
from agentload.measure.metrics.cache import KVHitRate, SessionKVHitRate
from agentload.measure.metrics.latency import E2E, ITL, TPOT, TTFT, ClientLag
from agentload.measure.metrics.quality import (
    GAP_BUCKETS,
    ContextOverflow,
    ErrorCounts,
    Goodput,
    KVHits,
    KVSurvival,
    LengthMismatch,
    PhaseCounts,
    PromptTokenRatio,
    SLOAttainment,
    meets_slo,
    prompt_token_ratio,
)
from agentload.measure.metrics.serving import PoolMetrics, RouterKVHitRate, WorkerMetrics
from agentload.measure.metrics.session import (
    JobsPerHour,
    SessionLatency,
    TokensPerSecondPerUser,
    serving_ns,
)
from agentload.measure.metrics.tasks import (
    PassRate,
    SolvedTasksPerHour,
    SolvedTasksPerHourPerGPU,
    SolvedTasksPerHourPerMW,
)
from agentload.measure.metrics.throughput import (
    OutputThroughput,
    OutputThroughputPerGPU,
    OutputThroughputPerMW,
    RequestThroughput,
    TotalThroughput,
)
from agentload.measure.records import Phase, RequestRecord

__all__ = [
    "BANDS",
    "GAP_BUCKETS",
    "GROUP_METRICS",
    "METRICS",
    "SLO",
    "Column",
    "Metric",
    "MetricContext",
    "aggregate",
    "band_of",
    "compute_all",
    "depth_bucket",
    "distribution",
    "meets_slo",
    "prompt_token_ratio",
    "register",
    "registry",
    "serving_ns",
]

# Registry order is the order of summary.csv's columns and of the report's tables.
METRICS: tuple[type[Metric], ...] = (
    PhaseCounts,
    TTFT,
    TPOT,
    ITL,
    E2E,
    TokensPerSecondPerUser,
    SessionLatency,
    JobsPerHour,
    OutputThroughput,
    TotalThroughput,
    RequestThroughput,
    OutputThroughputPerGPU,
    OutputThroughputPerMW,
    Goodput,
    SLOAttainment,
    KVSurvival,
    KVHits,
    KVHitRate,
    RouterKVHitRate,
    SessionKVHitRate,
    PoolMetrics,
    WorkerMetrics,
    PromptTokenRatio,
    ErrorCounts,
    ContextOverflow,
    LengthMismatch,
    ClientLag,
    PassRate,
    SolvedTasksPerHour,
    SolvedTasksPerHourPerGPU,
    SolvedTasksPerHourPerMW,
)
GROUP_METRICS: tuple[type[Metric], ...] = (TTFT, TPOT, E2E, KVSurvival, SLOAttainment)

M = TypeVar("M", bound=type[Metric])


def register(metric: M) -> M:
    """Add ``metric`` to the registry, after the others (a class decorator): ``aggregate``
    computes it, results.json holds it, summary.csv and the report show its ``columns``."""
    global METRICS
    if any(m.tag == metric.tag for m in METRICS):
        raise ValueError(f"a metric tagged {metric.tag!r} is already registered")
    METRICS = (*METRICS, metric)
    return metric


def registry() -> tuple[type[Metric], ...]:
    """The registered metrics, in output order."""
    return METRICS


BANDS: tuple[tuple[str, int], ...] = (
    ("0-64K", 64 * 1024),
    ("64-128K", 128 * 1024),
    ("128-256K", 256 * 1024),
    ("256K+", 1 << 62),
)
_DEPTHS: tuple[tuple[str, int], ...] = (("0", 1), ("1-3", 4), ("4-15", 16), ("16-63", 64))


def band_of(r: RequestRecord) -> str:
    """Context band of a request by its input tokens (server-reported, else recorded)."""
    n = r.input_tokens
    return next(name for name, hi in BANDS if n < hi)


def depth_bucket(r: RequestRecord) -> str:
    """Turn-depth bucket: 0, 1-3, 4-15, 16-63, 64+."""
    return next((name for name, hi in _DEPTHS if r.turn_depth < hi), "64+")


def _grouped(ctx: MetricContext, key: Callable[[RequestRecord], str]) -> dict[str, Any]:
    groups: dict[str, list[RequestRecord]] = {}
    for r in ctx.requests:
        if r.phase == Phase.MEASURED:
            groups.setdefault(key(r), []).append(r)
    out = {}
    for name, reqs in groups.items():
        sub = MetricContext(reqs, ctx.sessions, ctx.window, ctx.gpus, ctx.power_watts, ctx.slo)
        vals = compute_all(sub, GROUP_METRICS)
        vals["requests"] = len(reqs)
        vals["failed"] = sum(1 for r in reqs if not r.ok)
        out[name] = vals
    return out


def aggregate(ctx: MetricContext) -> dict[str, Any]:
    """Every metric of a point (an ``optional`` one only when it has a value), and
    ``by_depth`` / ``by_band`` groups."""
    vals = compute_all(ctx, METRICS)
    for m in METRICS:
        if m.optional and vals[m.tag] is None:
            del vals[m.tag]
    order = [name for name, _ in BANDS]
    by_band = _grouped(ctx, band_of)
    vals["by_band"] = {k: by_band[k] for k in order if k in by_band}
    by_depth = _grouped(ctx, depth_bucket)
    vals["by_depth"] = {k: by_depth[k] for k in [*(n for n, _ in _DEPTHS), "64+"] if k in by_depth}
    return vals
