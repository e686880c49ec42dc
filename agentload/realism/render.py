"""``agentload realism``'s table: in the terminal (rich) and as Markdown (docs/realism.md and
the README's table are written from ``markdown``)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from agentload.realism.judge import RealismDocument, Row, Spread, Verdict

__all__ = ["fmt", "markdown", "render", "summary_line"]

_MARK = {
    Verdict.IN: "in band",
    Verdict.OUT: "OUT",
    Verdict.BY_DESIGN: "by design",
    Verdict.NO_DATA: "-",
}


def fmt(kind: str, x: float | None) -> str:
    """A value as its kind reads: tokens with separators, seconds with 3 figures, shares with
    2 decimals, counts as integers where they are."""
    if x is None:
        return "-"
    if kind == "tokens":
        return f"{x:,.0f}"
    if kind == "share":
        return f"{x:.2f}"
    if kind == "count":
        return f"{x:g}" if x == int(x) else f"{x:.1f}"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:.3g}"


def _ours(r: Row) -> str:
    s = r.ours
    if s.n == 1:
        return fmt(r.kind, s.p50)
    return " / ".join(fmt(r.kind, v) for v in (s.p10, s.p50, s.p90))


def _corpus(r: Row) -> str:
    s: Spread = r.corpus
    return " / ".join(fmt(r.kind, v) for v in (s.p10, s.p25, s.p50, s.p75, s.p90))


def _unit(r: Row) -> str:
    unit = {"call": "per-session medians", "agent": "agents", "session": "sessions"}[r.unit]
    return f"{unit}{' (s)' if r.kind == 's' else ''}"


def _ks(r: Row) -> str:
    return "-" if r.ks_d is None else f"{r.ks_d:.2f}"


def _verdict(r: Row) -> str:
    mark = _MARK[r.verdict]
    if r.band != "p25-p75" and r.verdict is not Verdict.NO_DATA:
        mark += f" ({r.band}: {r.corpus.n} units)"
    return mark


def summary_line(doc: RealismDocument) -> str:
    """``N of M statistics in band`` with the ones out, and the by-design ones."""
    out = [r.title for r in doc.rows if r.verdict is Verdict.OUT]
    design = [r.title for r in doc.rows if r.verdict is Verdict.BY_DESIGN]
    line = f"{doc.in_band} of {doc.judged} statistics in the corpus's band (p25-p75)"
    if design:
        line += f"; by design: {', '.join(design)}"
    if out:
        line += f"; OUT: {', '.join(out)}"
    return line


def render(doc: RealismDocument, console: Console) -> None:
    """The table, the two sides named above it, the summary line under it."""
    console.print(f"ours:   {doc.ours.label} ({doc.ours.sessions} sessions)")
    for w in (doc.ours.modeled_waits or "").split("\n"):
        if w:
            console.print(f"        gaps: {w}")
    console.print(f"corpus: {doc.corpus.label} ({doc.corpus.sessions} sessions)")
    table = Table(show_lines=False, pad_edge=False)
    table.add_column("statistic")
    table.add_column("unit")
    table.add_column("ours p10 / p50 / p90", justify="right")
    table.add_column("corpus p10 / p25 / p50 / p75 / p90", justify="right")
    table.add_column("verdict")
    table.add_column("KS D", justify="right")
    for r in doc.rows:
        table.add_row(r.title, _unit(r), _ours(r), _corpus(r), _verdict(r), _ks(r))
    console.print(table)
    for r in doc.rows:
        if r.verdict is Verdict.BY_DESIGN:
            console.print(f"by design: {r.title}: {r.why}")
    console.print(summary_line(doc))


def markdown(doc: RealismDocument) -> str:
    """The table in Markdown (one row per statistic), for docs/realism.md and the README."""
    lines = [
        "| statistic | unit | ours p10 / p50 / p90 | corpus p10 / p25 / p50 / p75 / p90 | verdict "
        "| KS D |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc.rows:
        lines.append(
            f"| {r.title} | {_unit(r)} | {_ours(r)} | {_corpus(r)} | {_verdict(r)} | {_ks(r)} |"
        )
    return "\n".join(lines) + "\n"
