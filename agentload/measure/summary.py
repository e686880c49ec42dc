"""summary.csv: one row per point of a ``ResultsDocument``.

Its columns are the point's load and window, then every registered metric's ``columns`` in
registry order (``metrics.registry()``): a metric added to the registry adds its columns here
with no change to this module. The report's tables use the same columns with their labels.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentload.measure import metrics
from agentload.measure.metrics import Column, Metric
from agentload.measure.results import GroupAggregates, Point, ResultsDocument

__all__ = ["SummaryColumn", "group_columns", "summary_columns", "summary_rows", "write_summary"]


@dataclass(frozen=True)
class SummaryColumn:
    """A column of summary.csv (``name``) and of the report's table (``label``)."""

    name: str
    label: str
    get: Callable[[Point], Any]


_POINT_COLUMNS = (
    SummaryColumn("concurrency", "concurrency", lambda p: p.concurrency),
    SummaryColumn("arrival_rate", "arrival rate (sessions/s)", lambda p: p.arrival_rate),
    SummaryColumn("window_s", "measured window (s)", lambda p: p.window.seconds),
)


def _metric_columns(m: type[Metric]) -> list[SummaryColumn]:
    def getter(c: Column) -> Callable[[Point], Any]:
        return lambda p: c.cell(p.aggregates.value(m.tag))

    return [SummaryColumn(c.name, c.label, getter(c)) for c in m.columns()]


def summary_columns(points: Sequence[Point] | None = None) -> list[SummaryColumn]:
    """The point's load and window, then every registered metric's columns; given the run's
    ``points``, an ``optional`` metric without a value at any of them is left out."""
    shown = [
        m
        for m in metrics.registry()
        if not m.optional
        or points is None
        or any(p.aggregates.value(m.tag) is not None for p in points)
    ]
    return [*_POINT_COLUMNS, *(c for m in shown for c in _metric_columns(m))]


def group_columns(
    group_metrics: Sequence[type[Metric]] = metrics.GROUP_METRICS,
) -> list[tuple[str, Callable[[GroupAggregates], Any]]]:
    """(label, cell) of the report's by-band / by-depth tables: requests, failures, then the
    group metrics' columns."""
    out: list[tuple[str, Callable[[GroupAggregates], Any]]] = [
        ("requests", lambda g: g.requests),
        ("failed", lambda g: g.failed),
    ]
    for m in group_metrics:
        out += [(c.label, _group_cell(m.tag, c)) for c in m.columns()]
    return out


def _group_cell(tag: str, c: Column) -> Callable[[GroupAggregates], Any]:
    return lambda g: c.cell(g.value(tag))


def summary_rows(results: ResultsDocument) -> list[dict[str, Any]]:
    """One row per point: ``{column name: value}``."""
    cols = summary_columns(results.points)
    return [{c.name: c.get(p) for c in cols} for p in results.points]


def write_summary(results: ResultsDocument, out: Path) -> Path:
    """Write ``summary.csv`` (one row per point); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "summary.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[c.name for c in summary_columns(results.points)])
        w.writeheader()
        for row in summary_rows(results):
            w.writerow({k: "" if v is None else v for k, v in row.items()})
    return path
