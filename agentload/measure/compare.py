"""``agentload compare A B``: identical traffic? (digest manifests) and metric deltas.

A live run (``mode: live``) sent what the target's own outputs led its agents to send, so
its traffic is not compared (the line says why); the metrics are.
"""

from __future__ import annotations

from typing import Any

from agentload.measure.repeats import Interval, apart
from agentload.measure.results import ResultsDocument
from agentload.measure.summary import summary_rows

__all__ = ["capacity_lines", "compare_results", "repeat_compare_lines", "traffic_diff"]

_KEYS = (
    "ttft_p50_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "itl_p50_ms",
    "e2e_p50_ms",
    "tps_user_p50",
    "output_tps",
    "output_tps_per_gpu",
    "output_tps_per_mw",
    "goodput",
    "jobs_per_hour",
    "pass_rate",
    "solved_per_hour",
    "solved_per_hour_per_gpu",
    "solved_per_hour_per_mw",
    "errors",
)


def traffic_diff(a: ResultsDocument, b: ResultsDocument) -> dict[str, list[str]]:
    """Calls only in A, only in B, and in both with different digests."""
    ma, mb = a.digest_manifest, b.digest_manifest
    return {
        "only_a": sorted(set(ma) - set(mb)),
        "only_b": sorted(set(mb) - set(ma)),
        "changed": sorted(k for k in set(ma) & set(mb) if ma[k] != mb[k]),
    }


def _fmt(v: Any) -> str:
    return "-" if v is None else (f"{v:,.2f}" if isinstance(v, float) else str(v))


def compare_results(a: ResultsDocument, b: ResultsDocument) -> tuple[list[str], bool]:
    """Lines to print, and whether the traffic was identical."""
    diff = traffic_diff(a, b)
    same = not any(diff.values()) and a.mode == b.mode == "replay"
    n = len(a.digest_manifest)
    lines = []
    if "live" in (a.mode, b.mode):
        lines.append(
            f"traffic: not compared (A {a.mode}, B {b.mode}): in a live run the target's own "
            "outputs drove the agents, so each system received different traffic"
        )
    elif same:
        lines.append(f"traffic: IDENTICAL ({n} recorded calls, equal payload digests)")
    else:
        lines.append("traffic: DIFFERENT")
        for key, what in (
            ("changed", "with a different payload"),
            ("only_a", "only in A"),
            ("only_b", "only in B"),
        ):
            if diff[key]:
                shown = ", ".join(diff[key][:10]) + (" …" if len(diff[key]) > 10 else "")
                lines.append(f"  {len(diff[key])} call(s) {what}: {shown}")
    for k in ("gap_scale", "salt_at", "start_at", "engine") if a.mode == b.mode == "replay" else ():
        va, vb = getattr(a.config, k), getattr(b.config, k)
        if va != vb:
            lines.append(f"note: {k} differs (A {va}, B {vb})")
    lines += capacity_lines(a, b) + repeat_compare_lines(a, b)
    if a.repeats and b.repeats:
        return lines, same
    ra = {r["concurrency"] or r["arrival_rate"]: r for r in summary_rows(a)}
    rb = {r["concurrency"] or r["arrival_rate"]: r for r in summary_rows(b)}
    for level in [x for x in ra if x in rb]:
        lines.append(f"point {level}:")
        lines.append(f"  {'metric':<22}{'A':>14}{'B':>14}{'B-A':>14}{'B/A':>9}")
        for k in _KEYS:
            va, vb = ra[level].get(k), rb[level].get(k)
            if va is None and vb is None:
                continue
            delta = vb - va if isinstance(va, int | float) and isinstance(vb, int | float) else None
            ratio = f"{vb / va:.2f}x" if delta is not None and va else "-"
            lines.append(f"  {k:<22}{_fmt(va):>14}{_fmt(vb):>14}{_fmt(delta):>14}{ratio:>9}")
    only = sorted(set(ra) ^ set(rb), key=str)
    if only:
        lines.append(f"points in only one run: {', '.join(str(x) for x in only)}")
    return lines, same


def _iv(v: Interval) -> str:
    return f"{v.mean:,.2f} ± {v.half:,.2f}"


def repeat_compare_lines(a: ResultsDocument, b: ResultsDocument) -> list[str]:
    """With ``--repeat`` in both runs: per load in both, each metric's means ± 95% intervals
    and whether the difference is larger than the intervals (``apart``)."""
    if not a.repeats or not b.repeats:
        return []
    gb = {g.load: g for g in b.repeats}
    lines = []
    for ga in a.repeats:
        g2 = gb.get(ga.load)
        if g2 is None:
            continue
        lines.append(
            f"point {ga.load} ({len(ga.points)} and {len(g2.points)} runs; mean ± 95% interval):"
        )
        lines.append(f"  {'metric':<22}{'A':>22}{'B':>22}{'B/A':>9}  difference")
        for key, va in ga.metrics.items():
            vb = g2.metrics.get(key)
            if vb is None:
                continue
            ratio = f"{vb.mean / va.mean:.2f}x" if va.mean else "-"
            word = "larger than the intervals" if apart(va, vb) else "within the intervals"
            lines.append(f"  {key:<22}{_iv(va):>22}{_iv(vb):>22}{ratio:>9}  {word}")
    return lines


def capacity_lines(a: ResultsDocument, b: ResultsDocument) -> list[str]:
    """With ``--capacity`` in both runs: each answer, and whether they differ by more than
    the search's brackets (each capacity lies in [met, missed))."""
    ca, cb = a.capacity, b.capacity
    if ca is None or cb is None:
        return []
    lines = [f"capacity A: {ca.answer}", f"capacity B: {cb.answer}"]
    if ca.slo != cb.slo or ca.percentile != cb.percentile:
        lines.append("capacity: not compared (the runs used different SLOs or percentiles)")
        return lines

    def span(c: Any) -> tuple[int, float]:
        met, missed = c.bracket
        return met, missed if missed is not None else float("inf")

    (la, ha), (lb, hb) = span(ca), span(cb)
    if ha <= lb or hb <= la:
        more = "B" if lb >= ha else "A"
        lines.append(f"capacity: {more} serves more agents, beyond both brackets")
    else:
        lines.append(
            "capacity: the brackets overlap; the difference is within the search's resolution"
        )
    ga, gb = _group(a, ca.max_concurrency), _group(b, cb.max_concurrency)
    for key in ("output_tps_per_gpu", "output_tps", "tps_user_p50", "jobs_per_hour"):
        va, vb = ga.get(key), gb.get(key)
        if va is not None and vb is not None:
            word = "larger than the intervals" if apart(va, vb) else "within the intervals"
            lines.append(f"  at capacity, {key}: A {_iv(va)}, B {_iv(vb)}: {word}")
    return lines


def _group(doc: ResultsDocument, level: int | None) -> dict[str, Interval]:
    """The ``--repeat`` intervals of the point at ``level`` ({} without)."""
    for g in doc.repeats or []:
        if level is not None and g.load == f"c={level}":
            return g.metrics
    return {}
