"""Metric plumbing: the context a metric reads, distributions, the dependency order, and the
metadata that drives every output.

A metric is one small class with ``tag``, ``header``, ``unit``, ``requires`` (tags of metrics
it reads) and ``compute(ctx, deps)``; its docstring states its formula. ``compute_all`` runs
the registry in ``graphlib`` order, so a metric can read the values of the ones it requires.

The same class says how it is shown: ``label`` is its name on plot axes and table headers
(``TTFT p50 (ms)``); ``columns`` are its cells in summary.csv and the report's tables (one
per statistic in ``stats`` for a distribution, else its value); a metric whose value is a
list of rows names them in ``row_columns`` and gets a table of its own in the report. So a
new metric is one class: registered, it is computed, written, tabulated and plotted.
"""

from __future__ import annotations

import graphlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar

from agentload.measure.records import Phase, RequestRecord, SessionResult, Window
from agentload.options.slo import Objective
from agentload.quantiles import percentile

__all__ = ["SLO", "Column", "Metric", "MetricContext", "compute_all", "distribution"]


def per_gpu(value: float | None, ctx: MetricContext) -> float | None:
    """``value`` per GPU (``--gpus``); None without it or without a value."""
    return value / ctx.gpus if value is not None and ctx.gpus else None


def per_mw(value: float | None, ctx: MetricContext) -> float | None:
    """``value`` per MW of the window's average power; None without power or a value."""
    return value / (ctx.power_watts / 1e6) if value is not None and ctx.power_watts else None


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
    """Per-request objectives (ns; tokens/s for ``tps_user``); a request meets the SLO when it
    succeeded and every set objective holds (``ttft <= ttft_ns``, ``tpot <= tpot_ns``,
    ``e2e <= e2e_ns``, ``1 s / tpot >= tps_user``)."""

    ttft_ns: int | None = None
    tpot_ns: int | None = None
    e2e_ns: int | None = None
    tps_user: float | None = None

    @classmethod
    def of(cls, slo: Mapping[str, float | None] | None) -> SLO | None:
        """The SLO of a config's ``slo`` dict (None without one)."""
        if not slo:
            return None
        ns = {
            o.key: None if slo.get(o.key) is None else int(slo[o.key] or 0)
            for o in (Objective.TTFT, Objective.TPOT, Objective.E2E)
        }
        rate = slo.get(Objective.TPS_USER.key)
        return cls(**ns, tps_user=None if rate is None else float(rate))

    def to_dict(self) -> dict[str, float | None]:
        return {
            Objective.TTFT.key: self.ttft_ns,
            Objective.TPOT.key: self.tpot_ns,
            Objective.E2E.key: self.e2e_ns,
            Objective.TPS_USER.key: self.tps_user,
        }


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
        return [r for r in self.requests if r.phase == Phase.MEASURED]

    @cached_property
    def measured_ok(self) -> list[RequestRecord]:
        """Successful measured requests: the only ones that enter latency percentiles."""
        return [r for r in self.measured if r.ok]

    @cached_property
    def in_window(self) -> list[RequestRecord]:
        """Successful requests whose stream ended inside the steady-state window."""
        w = self.window
        return [r for r in self.requests if r.ok and w.start_ns <= r.end_ns <= w.end_ns]


@dataclass(frozen=True)
class Column:
    """One cell of a metric in summary.csv and in the report's tables."""

    name: str
    """The summary.csv column, e.g. ``ttft_p50_ms``."""
    label: str
    """The report's header, e.g. ``TTFT p50 (ms)``."""
    cell: Callable[[Any], Any]
    """The metric's value (as results.json holds it) → the cell; None when absent."""


def _stat_column(tag: str, unit: str, stat: str) -> str:
    """``ttft_ms`` + ``p50`` → ``ttft_p50_ms`` (a unit suffix stays last); ``tps_user_p50``."""
    stem, sep, suffix = tag.rpartition("_")
    return f"{stem}_{stat}_{suffix}" if sep and suffix == unit else f"{tag}_{stat}"


class Metric:
    """Base of the metric classes (see the module docstring)."""

    tag: ClassVar[str]
    header: ClassVar[str]
    unit: ClassVar[str] = ""
    requires: ClassVar[tuple[str, ...]] = ()
    stats: ClassVar[tuple[str, ...]] = ()
    """For a metric whose value is a ``distribution``: the statistics it shows."""
    row_columns: ClassVar[tuple[tuple[str, str], ...]] = ()
    """For a metric whose value is a list of rows: (key, header) of each column of its table."""
    optional: ClassVar[bool] = False
    """A metric of some runs only (eval's pass rate): when it is None it is left out of the
    point's aggregates, and a run with no value at any point shows no column for it."""

    def compute(self, ctx: MetricContext, deps: Mapping[str, Any]) -> Any:
        raise NotImplementedError

    @classmethod
    def label(cls, stat: str | None = None) -> str:
        """Its name on an axis or in a header: ``TTFT p50 (ms)``, ``goodput (req/s)``."""
        name = f"{cls.header} {stat}" if stat else cls.header
        return f"{name} ({cls.unit})" if cls.unit else name

    @classmethod
    def columns(cls) -> tuple[Column, ...]:
        """Its cells in summary.csv and the report's tables: one per ``stats`` entry of a
        distribution, none for a table of rows, else the value itself."""
        if cls.stats:
            return tuple(
                Column(_stat_column(cls.tag, cls.unit, s), cls.label(s), _pick(s))
                for s in cls.stats
            )
        if cls.row_columns:
            return ()
        return (Column(cls.tag, cls.label(), lambda v: v),)


def _pick(stat: str) -> Callable[[Any], Any]:
    return lambda v: v.get(stat) if v else None


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
