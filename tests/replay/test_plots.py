"""The report's figures: categories (gap buckets, context bands) in their own order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentload.replay import plots
from agentload.replay.results import (
    Aggregates,
    Distribution,
    GroupAggregates,
    KVBucket,
    Point,
    ResultsDocument,
)


def _kv_row(bucket: str, lo: float, ratio: float) -> KVBucket:
    return KVBucket.model_construct(bucket=bucket, lo_s=lo, ratio=ratio)


def _point(concurrency: int, **aggregates: Any) -> Point:
    agg = Aggregates.model_construct(**{"kv_survival": [], "by_band": {}, **aggregates})
    return Point.model_construct(concurrency=concurrency, arrival_rate=None, aggregates=agg)


def _run(*points: Point) -> ResultsDocument:
    """A results document holding just what the plot reads (not validated, so the points
    keep the order given)."""
    return ResultsDocument.model_construct(points=list(points))


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The figures the plot functions save, by file name (drawn, so tick labels are set)."""
    figs: dict[str, Any] = {}

    def keep(fig: Any, path: Path) -> Path:
        fig.canvas.draw()
        figs[path.name] = fig
        return path

    monkeypatch.setattr(plots, "_save", keep)
    return figs


def _lines(fig: Any) -> tuple[list[str], list[dict[str, float]]]:
    """The x tick labels, and each line as {tick label: y}."""
    (ax,) = fig.axes
    ticks = {
        t: lab.get_text() for t, lab in zip(ax.get_xticks(), ax.get_xticklabels(), strict=True)
    }
    lines = []
    for line in ax.get_lines():
        xs = ax.xaxis.convert_units(line.get_xdata())
        lines.append({ticks[x]: y for x, y in zip(xs, line.get_ydata(), strict=True)})
    return [lab.get_text() for lab in ax.get_xticklabels()], lines


def test_kv_survival_buckets_are_ordered_by_gap_length(
    drawn: dict[str, Any], tmp_path: Path
) -> None:
    # two points that saw different buckets: a categorical axis would order them by first
    # appearance (0-1s, 15-60s, 1-5s, 5-15s)
    run = _run(
        _point(1, kv_survival=[_kv_row("0-1s", 0, 0.9), _kv_row("15-60s", 15, 0.4)]),
        _point(2, kv_survival=[_kv_row("1-5s", 1, 0.8), _kv_row("5-15s", 5, 0.6)]),
    )
    assert plots.kv_plot(run, tmp_path) is not None
    ticks, (one, two) = _lines(drawn["kv_survival.png"])
    assert ticks == ["0-1s", "1-5s", "5-15s", "15-60s"]
    assert one == {"0-1s": 0.9, "15-60s": 0.4} and two == {"1-5s": 0.8, "5-15s": 0.6}


def test_ttft_bands_are_ordered_by_context_length(drawn: dict[str, Any], tmp_path: Path) -> None:
    def bands(*names: str) -> dict[str, GroupAggregates]:
        return {
            n: GroupAggregates.model_construct(ttft_ms=Distribution.model_construct(p50=i + 1.0))
            for i, n in enumerate(names)
        }

    run = _run(
        _point(1, by_band=bands("0-64K", "128-256K")),
        _point(2, by_band=bands("64-128K", "256K+")),
    )
    assert plots.ttft_band_plot(run, tmp_path) is not None
    ticks, (one, two) = _lines(drawn["ttft_by_band.png"])
    assert ticks == ["0-64K", "64-128K", "128-256K", "256K+"]
    assert one == {"0-64K": 1.0, "128-256K": 2.0} and two == {"64-128K": 1.0, "256K+": 2.0}
