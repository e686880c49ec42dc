"""The report's figures: categories (gap buckets, context bands) in their own order."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from agentload.measure import plots
from agentload.measure.records import RequestRecord
from agentload.measure.results import (
    Aggregates,
    Distribution,
    GroupAggregates,
    KVBucket,
    Point,
    ResultsDocument,
)
from agentload.options.replay import ReplayConfig


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


def test_kv_survival_above_one_stays_on_the_plot(drawn: dict[str, Any], tmp_path: Path) -> None:
    # an unsalted run (replicas share whole prompts) can reuse more than one session's ceiling
    run = _run(_point(1, kv_survival=[_kv_row("0-1s", 0, 1.43), _kv_row("1-5s", 1, 0.7)]))
    assert plots.kv_plot(run, tmp_path) is not None
    (ax,) = drawn["kv_survival.png"].axes
    low, high = ax.get_ylim()
    assert low == 0 and high > 1.43


def _request(send_ns: int, e2e_ns: int) -> RequestRecord:
    return RequestRecord(
        session=0,
        source="s",
        agent="a",
        call=f"c{send_ns}",
        seq=0,
        turn_depth=0,
        phase="measured",
        digest="d",
        scheduled_ns=send_ns,
        send_ns=send_ns,
        first_ns=send_ns + 300_000_000,
        end_ns=send_ns + e2e_ns,
    )


def _overlaps(ax: Any) -> list[tuple[str, str]]:
    """Neighbouring x tick labels of ``ax`` whose drawn boxes touch or overlap."""
    renderer = ax.figure.canvas.get_renderer()
    labels = [t for t in ax.get_xticklabels() if t.get_text() and t.get_visible()]
    boxes = sorted(
        ((t.get_window_extent(renderer), t.get_text()) for t in labels), key=lambda b: b[0].x0
    )
    return [(a[1], b[1]) for a, b in itertools.pairwise(boxes) if a[0].x1 + 2 > b[0].x0]


def test_latency_cdf_tick_labels_do_not_overlap(drawn: dict[str, Any], tmp_path: Path) -> None:
    # slow requests (tens of seconds of E2E, as on a CPU engine): ms tick labels like 120,000
    # ran into each other
    reqs = [_request(i * 1_000_000, (15 + 7 * i) * 1_000_000_000) for i in range(20)]
    run = _run(Point.model_construct(concurrency=1, arrival_rate=None, requests=reqs))
    assert plots.cdf_plot(run, tmp_path) is not None
    ttft_ax, e2e_ax = drawn["latency_cdf.png"].axes
    assert e2e_ax.get_xlabel() == "E2E (s)" and ttft_ax.get_xlabel() == "TTFT (ms)"
    for ax in (ttft_ax, e2e_ax):
        assert _overlaps(ax) == [], ax.get_xlabel()


def test_the_job_pareto_plots_jobs_per_gpu_against_jobs_per_user(
    drawn: dict[str, Any], tmp_path: Path
) -> None:
    def lat(p50: float) -> Distribution:
        return Distribution.model_construct(n=3, p50=p50)

    # c=1: one job every 60 s per user, 120 jobs/h; c=4: 120 s, 360 jobs/h; c=8: 300 s, 300
    # jobs/h (beaten on both axes by c=4: off the frontier)
    run = _run(
        _point(1, session_latency_s=lat(60.0), jobs_per_hour=120.0),
        _point(4, session_latency_s=lat(120.0), jobs_per_hour=360.0),
        _point(8, session_latency_s=lat(300.0), jobs_per_hour=300.0),
        _point(16, session_latency_s=None, jobs_per_hour=None),  # no complete session
    )
    run.config = ReplayConfig.model_construct(gpus=2)
    assert plots.job_pareto_plot([run], ["a"], tmp_path) is not None
    fig = drawn["pareto_jobs.png"]
    ax = fig.axes[0]
    (dots,) = ax.collections
    assert [tuple(p) for p in dots.get_offsets()] == [(60.0, 60.0), (30.0, 180.0), (12.0, 150.0)]
    (front,) = ax.get_lines()
    assert list(front.get_xdata()) == [30.0, 60.0]  # c=8 is beaten by c=4
    assert ax.get_ylabel() == "jobs per hour per GPU"
    empty = _run(_point(1, session_latency_s=None, jobs_per_hour=None))
    empty.config = ReplayConfig.model_construct(gpus=None)
    assert plots.job_pareto_plot([empty], ["a"], tmp_path) is None
