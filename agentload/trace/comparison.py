"""``agentload trace stats A --compare B``: two sets of traces side by side, statistic by
statistic (the samples of ``samples``).

``compare(a, b)`` returns one JSON-ready object: per statistic each side's ``n`` and
p10/p50/p90 (linear interpolation between closest ranks, as everywhere in agentload), the
ratio of the medians ``A p50 / B p50`` (1 when both are 0; null when only B's is 0 or a side
has no sample), whether that ratio is within ``1 ± tolerance``, and the two-sample
Kolmogorov-Smirnov distance (scipy's ``ks_2samp``: the largest gap between the two empirical
CDFs, and its p-value) when both sides have at least two samples. ``prefix_reuse`` also carries each side's
pooled, token-weighted value (``pooled``: Σ seen tokens / Σ prompt tokens over every session),
the figure ``trace stats`` prints as ``prefix_reuse_ceiling``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from agentload.quantiles import percentile
from agentload.trace.samples import STATISTICS, Samples, describe

__all__ = [
    "DEFAULT_TOLERANCE",
    "compare",
    "format_value",
    "ks",
    "render_comparison",
    "statistic_rows",
    "summarize",
]

_SHORT = 16
"""Labels longer than this are printed above the table and the columns say A and B."""

DEFAULT_TOLERANCE = 0.25
"""How far a median may be from the other side's and still count as matching (±25%)."""


def statistic_rows(a: Samples, b: Samples) -> list[str]:
    """The statistics of the comparison in table order, ``tool_latency_s`` expanded into one
    row per tool kind either side has (by name)."""
    rows: list[str] = []
    for stat in STATISTICS:
        if stat == "tool_latency_s":
            kinds = {k for s in (a, b) for k in s.values if k.startswith("tool_latency_s.")}
            rows.extend(sorted(kinds))
        else:
            rows.append(stat)
    return rows


def summarize(values: Sequence[float]) -> dict[str, Any]:
    """``n`` and p10/p50/p90 of samples (None without any)."""
    if not values:
        return {"n": 0, "p10": None, "p50": None, "p90": None}
    return {
        "n": len(values),
        "p10": percentile(values, 10),
        "p50": percentile(values, 50),
        "p90": percentile(values, 90),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if b == 0:
        return 1.0 if a == 0 else None
    return a / b


def ks(a: Sequence[float], b: Sequence[float]) -> dict[str, float] | None:
    """The two-sample Kolmogorov-Smirnov distance ``d`` and its p-value ``p`` (None with
    fewer than two samples a side)."""
    if len(a) < 2 or len(b) < 2:
        return None
    from scipy.stats import ks_2samp

    res = ks_2samp(list(a), list(b))
    return {"d": float(res.statistic), "p": float(res.pvalue)}


def compare(
    a: Samples,
    b: Samples,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
) -> dict[str, Any]:
    """The comparison object (module docstring), statistics in ``statistic_rows`` order."""
    stats: dict[str, Any] = {}
    for stat in statistic_rows(a, b):
        va, vb = a.get(stat), b.get(stat)
        sa, sb = summarize(va), summarize(vb)
        ratio = _ratio(sa["p50"], sb["p50"])
        row: dict[str, Any] = {
            "a": sa,
            "b": sb,
            "ratio": ratio,
            "within": None if ratio is None else abs(ratio - 1) <= tolerance + 1e-12,
            "ks": ks(va, vb),
        }
        if stat == "prefix_reuse":
            for side, s in (("a", a), ("b", b)):
                seen, total = s.reuse_tokens
                row[side]["pooled"] = seen / total if total else None
        stats[stat] = row
    return {"tolerance": tolerance, "statistics": stats}


def format_value(stat: str, x: float | None, share_digits: int = 2) -> str:
    """One value of statistic ``stat`` as table text: seconds to 3 significant digits, shares
    to ``share_digits`` decimals, counts with thousands separators; ``-`` for None."""
    if x is None:
        return "-"
    if stat.split(".")[0].endswith("_s"):
        return f"{x:.3g}" if abs(x) < 100 else f"{x:,.0f}"
    if stat in ("tool_time_share", "prefix_reuse"):
        return f"{x:.{share_digits}f}"
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.3g}"


def _triple(stat: str, s: dict[str, Any]) -> str:
    if not s["n"]:
        return "-"
    return " / ".join(format_value(stat, s[k]) for k in ("p10", "p50", "p90"))


def render_comparison(
    result: dict[str, Any], console: Console, labels: tuple[str, str] = ("A", "B")
) -> None:
    """The comparison object as one table: p10 / p50 / p90 of each side, the ratio of the
    medians, the KS distance (p-value), the sample counts and whether the medians match."""
    la, lb = labels
    if max(len(la), len(lb)) > _SHORT:
        console.print(f"A: {la}\nB: {lb}")
        la, lb = "A", "B"
    tol = result["tolerance"]
    table = Table(title=f"{la} compared with {lb}", title_justify="left")
    for col, justify in (
        ("statistic", "left"),
        (f"{la} p10 / p50 / p90", "right"),
        (f"{lb} p10 / p50 / p90", "right"),
        (f"p50 {la}/{lb}", "right"),
        ("KS D (p)", "right"),
        ("n", "right"),
        (f"±{tol:.0%}", "center"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for stat, row in result["statistics"].items():
        ks = row["ks"]
        within = row["within"]
        table.add_row(
            describe(stat),
            _triple(stat, row["a"]),
            _triple(stat, row["b"]),
            "-" if row["ratio"] is None else f"{row['ratio']:.2f}",
            "-" if ks is None else f"{ks['d']:.2f} ({ks['p']:.2g})",
            f"{row['a']['n']} / {row['b']['n']}",
            "-" if within is None else ("yes" if within else "no"),
        )
    console.print(table)
    reuse = result["statistics"].get("prefix_reuse")
    if reuse is not None:
        pa, pb = reuse["a"].get("pooled"), reuse["b"].get("pooled")
        console.print(
            f"prefix reuse over all sessions (token-weighted): {la} {format_value('prefix_reuse', pa)}, "
            f"{lb} {format_value('prefix_reuse', pb)}"
        )
