"""The ``trace stats --compare --plot`` figure: one panel per statistic, each side's empirical
CDF overlaid (x on a log scale where the samples span more than two decades), the medians
marked, the KS distance and the ratio of the medians in the panel's title. Rendered with
matplotlib's Agg backend."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentload.trace.plot import save_figure
from agentload.trace.samples import Samples, describe

__all__ = ["ecdf", "log_scale", "plot_comparison"]

_COLOURS = ("#1f77b4", "#d62728")
_COLUMNS = 4


def ecdf(values: Sequence[float]) -> tuple[list[float], list[float]]:
    """The empirical CDF as step points, from 0 at the smallest sample to 1 at the largest."""
    xs = sorted(values)
    n = len(xs)
    return [xs[0], *xs], [0.0, *((i + 1) / n for i in range(n))]


def log_scale(values: Sequence[float]) -> bool:
    pos = [v for v in values if v > 0]
    return bool(pos) and min(pos) > 0 and max(pos) / min(pos) > 100


def plot_comparison(
    a: Samples,
    b: Samples,
    result: dict[str, Any],
    out: str | os.PathLike[str],
    labels: tuple[str, str] = ("A", "B"),
    *,
    force: bool = False,
) -> Path:
    """Write the figure of ``result`` (``comparison.compare(a, b)``) to ``out`` (an existing
    one replaced only with ``force``); its path."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    stats = list(result["statistics"])
    rows = max(1, math.ceil(len(stats) / _COLUMNS))
    fig, axes = plt.subplots(rows, _COLUMNS, figsize=(4.2 * _COLUMNS, 3.2 * rows), dpi=110)
    flat = list(axes.flat) if hasattr(axes, "flat") else [axes]
    for ax, stat in zip(flat, stats, strict=False):
        row = result["statistics"][stat]
        both = [*a.get(stat), *b.get(stat)]
        for side, samples, label, colour in (
            ("a", a, labels[0], _COLOURS[0]),
            ("b", b, labels[1], _COLOURS[1]),
        ):
            values = samples.get(stat)
            if not values:
                continue
            xs, ys = ecdf(values)
            ax.step(
                xs, ys, where="post", color=colour, linewidth=1.6, label=f"{label} (n={len(xs)})"
            )
            p50 = row[side]["p50"]
            if p50 is not None:
                ax.axvline(p50, color=colour, linestyle=":", linewidth=1)
        if log_scale(both):
            ax.set_xscale("log")
        ks = row["ks"]
        extra = []
        if row["ratio"] is not None:
            extra.append(f"p50 ratio {row['ratio']:.2f}")
        if ks is not None:
            extra.append(f"KS {ks['d']:.2f}")
        title = describe(stat) + (f"\n{', '.join(extra)}" if extra else "")
        ax.set_title(title, fontsize=9)
        ax.set_ylim(0, 1.02)
        ax.grid(True, alpha=0.3)
        ax.tick_params(labelsize=8)
        if both:
            ax.legend(loc="lower right", frameon=False, fontsize=7)
        else:
            ax.text(0.5, 0.5, "no samples", ha="center", va="center", transform=ax.transAxes)
    for ax in flat[len(stats) :]:
        ax.set_visible(False)
    fig.suptitle(f"{labels[0]} vs {labels[1]}: empirical CDFs", fontsize=11)
    fig.tight_layout()
    return save_figure(fig, out, force=force)
