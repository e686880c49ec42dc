"""Metric plumbing: the context a metric reads, distributions, and the dependency order.

A metric is one small class with ``tag``, ``header``, ``unit``, ``requires`` (tags of metrics
it reads) and ``compute(ctx, deps)``; its docstring states its formula. ``compute_all`` runs
the registry in ``graphlib`` order, so a metric can read the values of the ones it requires.
"""

from __future__ import annotations

import graphlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from agentload.quantiles import percentile
from agentload.replay.records import RequestRecord, SessionResult, Window

__all__ = ["SLO", "Metric", "MetricContext", "compute_all", "distribution"]


def distribution(values: Iterable[float]) -> dict[str, float] | None:
    """``{n, mean, min, p50, p90, p99, max}`` of the values, or None when there are none."""
    v = sorted(values)
    if not v:
        return None
    return {
        "n": len(v),
        "mean": sum(v) / len(v),
        "min": v[0],
        "p50": percentile(v, 50, presorted=True),
        "p90": percentile(v, 90, presorted=True),
        "p99": percentile(v, 99, presorted=True),
        "max": v[-1],
    }


@dataclass(frozen=True)
class SLO:
    """Per-request objectives in ns; a request meets the SLO when it succeeded and every set
    objective holds (``ttft <= ttft_ns``, ``tpot <= tpot_ns``, ``e2e <= e2e_ns``)."""

    ttft_ns: int | None = None
    tpot_ns: int | None = None
    e2e_ns: int | None = None

    def to_dict(self) -> dict[str, int | None]:
        return {"ttft_ns": self.ttft_ns, "tpot_ns": self.tpot_ns, "e2e_ns": self.e2e_ns}


@dataclass
class MetricContext:
    """What the metrics of one point read."""

    requests: list[RequestRecord]
    sessions: list[SessionResult]
    window: Window
    gpus: int | None = None
    power_watts: float | None = None
    slo: SLO | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @cached_property
    def measured(self) -> list[RequestRecord]:
        """Every request sent inside the measured window (successful or not)."""
        return [r for r in self.requests if r.phase == "measured"]

    @cached_property
    def measured_ok(self) -> list[RequestRecord]:
        """Successful measured requests: the only ones that enter latency percentiles."""
        return [r for r in self.measured if r.ok]

    @cached_property
    def in_window(self) -> list[RequestRecord]:
        """Successful requests whose stream ended inside the steady-state window."""
        w = self.window
        return [r for r in self.requests if r.ok and w.start_ns <= r.end_ns <= w.end_ns]


class Metric:
    """Base of the metric classes (see the module docstring)."""

    tag: ClassVar[str]
    header: ClassVar[str]
    unit: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        raise NotImplementedError


def compute_all(ctx: MetricContext, metrics: Sequence[type[Metric]]) -> dict[str, Any]:
    """Every metric's value by tag, computed in dependency order."""
    by_tag = {m.tag: m for m in metrics}
    graph = {m.tag: set(m.requires) for m in metrics}
    values: dict[str, Any] = {}
    for tag in graphlib.TopologicalSorter(graph).static_order():
        cls = by_tag.get(tag)
        if cls is None:
            raise KeyError(f"metric {tag!r} is required but not registered")
        values[tag] = cls().compute(ctx, values)
    return values
