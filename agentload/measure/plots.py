"""The report's figures (matplotlib, Agg backend), each written as a PNG; returns the paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter, MaxNLocator

from agentload.measure.metrics import BANDS
from agentload.measure.metrics.latency import E2E, TTFT
from agentload.measure.metrics.quality import KVSurvival
from agentload.measure.metrics.session import TokensPerSecondPerUser
from agentload.measure.pareto import axis_label, axis_of, frontier, job_points, points_xy
from agentload.measure.records import Phase
from agentload.measure.results import Point, ResultsDocument

__all__ = ["all_plots", "scrape_series"]


def _series(ax: Any, pts: list[tuple[float, float, Any]], name: str) -> None:
    """One run on a Pareto plot: its points, labelled by load, and its frontier dashed."""
    ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=name)
    f = frontier(pts)
    ax.plot([p[0] for p in f], [p[1] for p in f], linestyle="--")
    for x, y, lab in pts:
        ax.annotate(str(lab), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=8)


def pareto_plot(runs: list[ResultsDocument], names: list[str], out: Path) -> Path | None:
    ymetric = axis_of(runs[0])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    drawn = False
    for run, name in zip(runs, names, strict=True):
        pts = points_xy(run, ymetric.tag)
        if not pts:
            continue
        drawn = True
        _series(ax, pts, name)
    if not drawn:
        plt.close(fig)
        return None
    for t in runs[0].config.target_tps_user:
        ax.axvline(t, color="grey", linewidth=0.8, linestyle=":")
    _style(
        ax,
        TokensPerSecondPerUser.label("p50") + ", median over sessions",
        axis_label(ymetric),
        "Throughput vs interactivity across the sweep",
    )
    return _save(fig, out / "pareto.png")


def job_pareto_plot(runs: list[ResultsDocument], names: list[str], out: Path) -> Path | None:
    """Jobs per hour per GPU against jobs per hour per user (``pareto.job_points``), each run's
    frontier dashed; the top axis gives the median session latency that x implies."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ylabel = ""
    for run, name in zip(runs, names, strict=True):
        pts, label = job_points(run)
        if not pts:
            continue
        ylabel = ylabel or label
        _series(ax, pts, name)
    if not ylabel:
        plt.close(fig)
        return None
    top = ax.secondary_xaxis("top", functions=(_per_hour_to_min, _per_hour_to_min))
    top.set_xlabel("median session latency (min)")
    _style(
        ax,
        "jobs per hour per user (3600 / median session latency)",
        ylabel,
        "Jobs: system throughput vs each user's",
    )
    return _save(fig, out / "pareto_jobs.png")


def _per_hour_to_min(x: Any) -> Any:
    """Jobs per hour ↔ minutes per job (its own inverse)."""
    import numpy as np

    with np.errstate(divide="ignore"):
        return 60.0 / np.maximum(np.asarray(x, dtype=float), 1e-9)


def ttft_band_plot(run: ResultsDocument, out: Path) -> Path | None:
    lines = []
    for p in run.points:
        ys = {name: g.ttft_ms.p50 for name, g in p.aggregates.by_band.items() if g.ttft_ms}
        if ys:
            lines.append((p.load, ys))
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    _category_lines(ax, lines, [name for name, _ in BANDS])
    _style(ax, "context band (input tokens)", TTFT.label("p50"), f"{TTFT.header} by context band")
    return _save(fig, out / "ttft_by_band.png")


def cdf_plot(run: ResultsDocument, out: Path) -> Path | None:
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    series: list[list[tuple[str, list[float]]]] = [[], []]
    for p in run.points:
        ok = [r for r in p.requests if r.phase == Phase.MEASURED and r.ok]
        got: tuple[list[int | None], list[int | None]] = (
            [r.ttft_ns for r in ok],
            [r.e2e_ns for r in ok],
        )
        for i, ns in enumerate(got):
            vals = sorted(v / 1e6 for v in ns if v is not None)
            if vals:
                series[i].append((p.load, vals))
    if not any(series):
        plt.close(fig)
        return None
    for ax, m, lines in zip(axes, (TTFT, E2E), series, strict=True):
        # seconds once the values run into the tens of thousands of ms: long tick labels
        # (120,000) ran into each other
        top = max((v[-1] for _, v in lines), default=0.0)
        div, unit = (1000.0, "s") if top >= 10_000 else (1.0, "ms")
        for label, vals in lines:
            n = len(vals)
            ax.plot([v / div for v in vals], [(i + 1) / n for i in range(n)], label=label)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=6))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: f"{x:,.6g}"))
        _style(ax, f"{m.header} ({unit})", "fraction of requests", f"{m.header} CDF")
    return _save(fig, out / "latency_cdf.png")


def kv_plot(run: ResultsDocument, out: Path) -> Path | None:
    lines, lo = [], {}
    for p in run.points:
        rows = p.aggregates.kv_survival
        if rows:
            lines.append((p.load, {r.bucket: r.ratio for r in rows}))
            lo.update({r.bucket: r.lo_s for r in rows})
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    _category_lines(ax, lines, sorted(lo, key=lambda b: lo[b]))
    # 1 is everything reusable reused; a server counting with another tokenizer (or a file
    # written before the unsalted ceiling was the whole prompt) can go above it, so the axis
    # grows with the data instead of cutting it off
    top = max((y for _, ys in lines for y in ys.values()), default=1.0)
    ax.set_ylim(0, max(1.1, top * 1.08))
    _style(
        ax,
        "preceding gap (idle time since the agent's previous call)",
        KVSurvival.label(),
        f"{KVSurvival.header} vs gap",
    )
    return _save(fig, out / "kv_survival.png")


def pick_session(point: Point) -> int | None:
    """The complete from-zero session with the most requests (else the busiest)."""
    sessions = point.sessions
    full = [s for s in sessions if s.complete and s.joined_at_ns is None] or sessions
    if not full:
        return None
    return max(full, key=lambda s: (s.requests, -s.session)).session


def timeline_plot(run: ResultsDocument, out: Path) -> Path | None:
    candidates = []
    for p in run.points:
        sid = pick_session(p)
        if sid is None:
            continue
        best = next(x for x in p.sessions if x.session == sid)
        candidates.append(((best.complete and best.joined_at_ns is None, best.requests), p, sid))
    if not candidates:
        return None
    _, point, sid = max(candidates, key=lambda c: c[0])
    reqs = [r for r in point.requests if r.session == sid]
    if not reqs:
        return None
    agents: list[str] = []
    for r in sorted(reqs, key=lambda r: r.send_ns):
        if r.agent not in agents:
            agents.append(r.agent)
    t0 = min(r.send_ns for r in reqs)
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.45 * len(agents)))
    for r in reqs:
        y = agents.index(r.agent)
        s = (r.send_ns - t0) / 1e9
        e = (r.end_ns - t0) / 1e9
        color = (
            "lightgrey" if r.phase == Phase.WARMUP else ("tab:red" if r.error_kind else "tab:blue")
        )
        ax.barh(y, e - s, left=s, height=0.6, color=color)
        if r.first_ns is not None:
            ax.barh(y, (r.first_ns - r.send_ns) / 1e9, left=s, height=0.6, color="tab:orange")
    ax.set_yticks(range(len(agents)))
    ax.set_yticklabels([a[-24:] for a in agents], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the session's first request (orange: time to first token)")
    ax.set_title(f"Session {sid} at {point.load}: requests per agent")
    ax.grid(axis="x", alpha=0.3)
    return _save(fig, out / "session_timeline.png")


# Scraped series by what they say: KV-cache occupancy (left axis, solid) and queue-like
# counts (right axis, dotted): vLLM/SGLang waiting and running, llama.cpp processing/deferred.
_USAGE_WORDS = ("usage",)
_QUEUE_WORDS = ("waiting", "running", "queue", "processing", "deferred")


def scrape_series(keys: list[str], words: tuple[str, ...], n: int = 3) -> list[str]:
    """Up to ``n`` of the scraped series whose name holds one of ``words``."""
    return [k for k in keys if any(w in k.split("{")[0].lower() for w in words)][:n]


def scrape_plot(run: ResultsDocument, out: Path) -> Path | None:
    fig, ax = plt.subplots(figsize=(9, 4))
    ax2 = ax.twinx()
    drawn = False
    for p in run.points:
        samples = p.scrape.samples if p.scrape is not None else []
        keys = sorted({k for s in samples for k in s.values})
        usage = scrape_series(keys, _USAGE_WORDS, 2)
        queue = scrape_series(keys, _QUEUE_WORDS)
        for k, axis, style in [*((k, ax, "-") for k in usage), *((k, ax2, ":") for k in queue)]:
            xs = [s.t_ns / 1e9 for s in samples if k in s.values]
            ys = [s.values[k] for s in samples if k in s.values]
            axis.plot(xs, ys, style, label=f"{p.load} {k.split('{')[0]}")
            drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel("seconds since the point started")
    if ax.get_lines():
        ax.set_ylabel("KV cache usage (solid)")
    else:  # no usage series (llama.cpp has none): no empty left axis
        ax.set_yticks([])
    ax2.set_ylabel("requests waiting / running / processing (dotted)")
    ax.set_title("Server metrics (scraped at 1 Hz)")
    ax.grid(alpha=0.3)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], fontsize=7)
    return _save(fig, out / "server_metrics.png")


def _category_lines(ax: Any, lines: list[tuple[str, dict[str, float]]], order: list[str]) -> None:
    """One line per ``(label, {category: y})`` over categories placed in ``order`` (unknown ones
    after it). Matplotlib's own categorical axis would order them by first appearance, so two
    points with different buckets would interleave them (``0-1s, 15-60s, 1-5s``)."""
    seen = {c for _, ys in lines for c in ys}
    cats = [c for c in order if c in seen] + sorted(seen - set(order))
    pos = {c: i for i, c in enumerate(cats)}
    for label, ys in lines:
        xs = sorted(ys, key=pos.__getitem__)
        ax.plot([pos[c] for c in xs], [ys[c] for c in xs], marker="o", label=label)
    ax.set_xticks(range(len(cats)), cats)


def _style(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    """Labels, title, light grid and a small legend: the look every line plot shares."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def all_plots(runs: list[ResultsDocument], names: list[str], out: Path) -> list[Path]:
    """Every figure that has data; the Pareto overlays all runs (labelled by ``names``), the
    others use the first."""
    out.mkdir(parents=True, exist_ok=True)
    first = runs[0]
    made = [
        pareto_plot(runs, names, out),
        job_pareto_plot(runs, names, out),
        ttft_band_plot(first, out),
        cdf_plot(first, out),
        kv_plot(first, out),
        timeline_plot(first, out),
        scrape_plot(first, out),
    ]
    return [p for p in made if p is not None]
