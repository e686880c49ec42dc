"""The report's interactive part: the token and job Pareto plots and the session swim lanes,
drawn in the page by ``report.js`` (inlined, no library, no network) from one JSON block.

Each run is a series (a checkbox shows or hides it); each point carries the numbers its tooltip
shows. The swim lanes are one point's sessions (the first run's capacity point with
``--capacity``, else its last point): a lane per session instance, a bar per call from send to
end, coloured by TTFT, the root agent's calls (the agent of the session's first request, a
warm-up included) full height and the other agents' in the lower half; the white between bars
is the tool waits. Warm-up requests are not drawn.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from agentload.measure.pareto import axis_label, axis_of, job_label, job_xy, point_xy
from agentload.measure.points import Point
from agentload.measure.records import Phase
from agentload.measure.results import ResultsDocument

__all__ = ["LANES", "interactive_section", "report_data"]

LANES = 24
"""Sessions shown in the swim lanes (the first to start)."""
_CALLS = 400
"""Calls drawn per lane."""


def _tip(p: Point) -> list[list[Any]]:
    a = p.aggregates

    def stat(d: Any, s: str) -> Any:
        return getattr(d, s, None) if d is not None else None

    return [
        ["load", p.load],
        ["window (s)", p.window.seconds],
        ["measured requests", a.phases.measured],
        ["TTFT p50 (ms)", stat(a.ttft_ms, "p50")],
        ["TTFT p99 (ms)", stat(a.ttft_ms, "p99")],
        ["TPOT p50 (ms)", stat(a.tpot_ms, "p50")],
        ["tokens/s per user p50", stat(a.tps_user, "p50")],
        ["output tokens/s", a.output_tps],
        ["output tokens/s per GPU", a.output_tps_per_gpu],
        ["jobs per hour", a.jobs_per_hour],
        ["session latency p50 (s)", stat(a.session_latency_s, "p50")],
        ["errors", sum(a.errors.values())],
    ]


def _lane_point(run: ResultsDocument) -> Point | None:
    cap = run.capacity
    if cap is not None and cap.max_concurrency is not None:
        at = [p for p in cap.probes if p.concurrency == cap.max_concurrency]
        if at:
            return run.points[at[-1].points[0]]
    return run.points[-1] if run.points else None


def _lanes(run: ResultsDocument, name: str) -> dict[str, Any] | None:
    p = _lane_point(run)
    if p is None:
        return None
    roots: dict[int, str] = {}
    calls: dict[int, list[list[Any]]] = {}
    for r in sorted(p.requests, key=lambda r: r.send_ns):
        root = roots.setdefault(r.session, r.agent)  # its first request's, warm-up included
        if r.phase == Phase.WARMUP:
            continue
        ttft = None if r.ttft_ns is None else round(r.ttft_ns / 1e6, 2)
        calls.setdefault(r.session, []).append(
            [
                round(r.send_ns / 1e6, 2),
                round(r.end_ns / 1e6, 2),
                ttft,
                int(r.agent != root),
                r.agent,
            ]
        )
    order = sorted(calls, key=lambda s: calls[s][0][0])[:LANES]
    return {
        "title": f"Sessions of {name}, {p.load} (the first {len(order)} to start)",
        "sessions": [{"name": f"session {s}", "calls": calls[s][:_CALLS]} for s in order],
    }


def report_data(runs: list[ResultsDocument], names: list[str]) -> dict[str, Any]:
    """What ``report.js`` draws (see the module docstring)."""
    ytag = axis_of(runs[0]).tag
    series = []
    for run, name in zip(runs, names, strict=True):
        pts = []
        for p in run.points:
            x, y = point_xy(p, ytag) or (None, None)
            jx, jy = job_xy(p, run.config.gpus) or (None, None)
            pts.append({"load": p.load, "x": x, "y": y, "jx": jx, "jy": jy, "tip": _tip(p)})
        series.append({"name": name, "points": pts})
    return {
        "runs": series,
        "x_label": "output tokens/s per user, median over sessions",
        "y_label": axis_label(axis_of(runs[0])),
        "jx_label": "jobs per hour per user (3600 / median session latency)",
        "jy_label": job_label(runs[0].config.gpus),
        "lanes": _lanes(runs[0], names[0]),
    }


def interactive_section(runs: list[ResultsDocument], names: list[str]) -> str:
    """The HTML of the interactive figures: run toggles, the two Pareto plots, the lanes."""
    blob = json.dumps(report_data(runs, names), allow_nan=False).replace("</", "<\\/")
    script = resources.files("agentload.measure").joinpath("report.js").read_text("utf-8")
    return (
        "<section id='al-interactive'><h2>Pareto and sessions (interactive)</h2>"
        "<p>Hover a point or a call for its numbers; untick a run to hide it.</p>"
        "<div id='al-runs' class='toggles'></div>"
        "<div id='al-pareto' class='chart'></div><div id='al-jobs' class='chart'></div>"
        "<div id='al-lanes' class='chart'></div><div id='al-tip' class='tip' hidden></div>"
        f"<script type='application/json' id='al-data'>{blob}</script>"
        f"<script>{script}</script></section>"
    )
