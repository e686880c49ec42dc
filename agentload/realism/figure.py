"""``agentload realism --plot PNG`` and ``--html FILE``: each statistic's CDF, ours over the
corpus's, with the corpus's p25-p75 band shaded and our median marked.

One panel per statistic with data on both sides: the empirical CDFs of the units the band is
taken over (per-session medians for a call statistic, else agents or sessions), the x axis
logarithmic where the values span more than two decades. The HTML file is self-contained: the
table, the two sides named, and the figure as inline SVG (nothing fetched). Rendered with
matplotlib's Agg backend; written whole or not at all (``outfile.atomic_output``).
"""

from __future__ import annotations

import html
import io
import math
from pathlib import Path
from typing import Any

from agentload.outfile import atomic_output
from agentload.realism.judge import RealismDocument, Verdict
from agentload.realism.render import markdown, summary_line
from agentload.realism.statistics import Observations
from agentload.trace.compare_plot import ecdf, log_scale
from agentload.trace.plot import save_figure

__all__ = ["write_html", "write_png"]

_OURS, _CORPUS = "#d62728", "#1f77b4"
_COLUMNS = 4


def _figure(doc: RealismDocument, ours: Observations, corpus: Observations) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    rows = [r for r in doc.rows if r.verdict is not Verdict.NO_DATA]
    n_rows = max(1, math.ceil(len(rows) / _COLUMNS))
    fig, axes = plt.subplots(n_rows, _COLUMNS, figsize=(4.2 * _COLUMNS, 3.1 * n_rows), dpi=100)
    flat = list(axes.flat) if hasattr(axes, "flat") else [axes]
    for ax, r in zip(flat, rows, strict=False):
        a, b = ours.units(r.key), corpus.units(r.key)
        assert r.corpus.p25 is not None and r.corpus.p75 is not None
        ax.axvspan(r.corpus.p25, r.corpus.p75, color=_CORPUS, alpha=0.12, lw=0)
        xs, ys = ecdf(b)
        ax.step(xs, ys, where="post", color=_CORPUS, label=f"{doc.corpus.label} ({len(b)})")
        xs, ys = ecdf(a)
        ax.step(xs, ys, where="post", color=_OURS, label=f"{doc.ours.label} ({len(a)})")
        if r.ours.p50 is not None:
            ax.axvline(r.ours.p50, color=_OURS, ls="--", lw=1)
        if min(a + b) > 0 and log_scale([*a, *b]):
            ax.set_xscale("log")
        mark = {Verdict.IN: "in band", Verdict.OUT: "OUT", Verdict.BY_DESIGN: "by design"}
        ax.set_title(f"{r.title[:44]}\n{mark.get(r.verdict, '')}", fontsize=8)
        ax.set_ylim(0, 1.02)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower right")
    for ax in flat[len(rows) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def write_png(
    doc: RealismDocument, ours: Observations, corpus: Observations, out: Path, *, force: bool
) -> Path:
    """The figure as a PNG at ``out``."""
    return save_figure(_figure(doc, ours, corpus), out, force=force)


def write_html(
    doc: RealismDocument, ours: Observations, corpus: Observations, out: Path, *, force: bool
) -> Path:
    """The table and the figure (inline SVG) as one self-contained HTML file at ``out``."""
    from matplotlib import pyplot as plt

    fig = _figure(doc, ours, corpus)
    buf = io.StringIO()
    try:
        fig.savefig(buf, format="svg")
    finally:
        plt.close(fig)
    svg = buf.getvalue()
    svg = svg[svg.index("<svg") :]
    rows = []
    for line in markdown(doc).splitlines()[2:]:
        cells = [html.escape(c.strip()) for c in line.strip("|").split("|")]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "statistic",
            "unit",
            "ours p10 / p50 / p90",
            "corpus p10 / p25 / p50 / p75 / p90",
            "verdict",
            "KS D",
        )
    )
    page = f"""<!doctype html>
<html><head><meta charset="utf-8"><title>agentload realism</title>
<style>body{{font:14px sans-serif;margin:2em}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:right}}td:first-child{{text-align:left}}
</style></head><body>
<h1>Realism: {html.escape(doc.ours.label)} against {html.escape(doc.corpus.label)}</h1>
<p>ours: {html.escape(doc.ours.label)}, {doc.ours.sessions} sessions;
gaps: {html.escape(doc.ours.modeled_waits or "measured")}</p>
<p>corpus: {html.escape(doc.corpus.label)}, {doc.corpus.sessions} sessions
{html.escape(doc.corpus.source or "")}</p>
<p><b>{html.escape(summary_line(doc))}</b></p>
<table><tr>{head}</tr>{"".join(rows)}</table>
<p>Each panel: the empirical CDFs of the units the band is taken over (per-session medians for a
call statistic), the corpus's p25-p75 band shaded, our median dashed.</p>
{svg}
</body></html>
"""
    with atomic_output(out, option="--html", force=force) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return out
