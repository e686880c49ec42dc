"""report.html: self-contained (PNGs embedded as data URIs, also written beside it)."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from agentload.masking import mask_text, redact_url
from agentload.measure import metrics
from agentload.measure.capacity import Capacity, check_text
from agentload.measure.interactive import interactive_section
from agentload.measure.pareto import Headline, axis_of, headline, points_xy
from agentload.measure.results import (
    LIVE_NOTE,
    Aggregates,
    Distribution,
    GroupAggregates,
    Point,
    ResultsDocument,
    simulated_note,
    waits_note,
)
from agentload.measure.summary import group_columns, summary_columns
from agentload.options.replay import ReplayConfig

__all__ = ["headlines", "run_lines", "text_summary", "write_report"]


def _f(v: Any, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return str(v)


def headlines(results: ResultsDocument) -> list[Headline]:
    """The ``--target-tps-user`` statements for one run."""
    y = axis_of(results)
    pts = points_xy(results, y.tag)
    return [headline(pts, t, f"output {y.unit}") for t in results.config.target_tps_user]


def _d(d: Distribution | None, stat: str) -> str:
    return _f(getattr(d, stat)) if d is not None else "-"


def run_lines(results: ResultsDocument) -> list[str]:
    """What the run as a whole says before its points: how ``--max-context`` fitted the
    traces, and the server/ours prompt-token ratio."""
    lines = []
    fit = results.plan.fit_line()
    if fit:
        lines.append(fit)
    api = results.plan.api_line()
    if api:
        lines.append(api)
    ratio = results.prompt_token_ratio
    if ratio is not None:
        lines.append(
            f"server/ours prompt tokens: {ratio:.3f} (the target counts {ratio:.3f} tokens "
            "per token of the trace's tokenizer)"
        )
    return lines + cluster_lines(results)


def cluster_lines(results: ResultsDocument) -> list[str]:
    """A sharded run (``replay --ray``): where it ran, the clock skew, and every worker lost."""
    c = results.cluster
    if c is None:
        return []
    lines = [
        f"ran on Ray cluster {c.address}: {c.workers} workers on {c.nodes} node(s), merged "
        f"exactly; clocks aligned to within {c.residual_skew_ns / 1e6:.2f} ms"
    ]
    for p in results.points:
        for w in p.workers or []:
            if w.lost is not None:
                lines.append(
                    f"{p.load}: {w.lost}; its {w.lost_inflight} request(s) in flight were "
                    "counted as failed (worker_lost) and the window ends at the loss"
                )
    return lines


def text_summary(results: ResultsDocument) -> list[str]:
    """The run's lines (first the capacity answer of a --capacity run, then LIVE_NOTE for a
    live run), then one line per point, for the terminal."""
    lines = [results.capacity.answer] if results.capacity is not None else []
    lines += [LIVE_NOTE] if results.mode == "live" else []
    sim = simulated_note(results)
    lines += [sim] if sim else []
    waits = waits_note(results)
    lines += [waits] if waits else []
    lines += run_lines(results)
    lines += repeat_lines(results)
    for p in results.points:
        a = p.aggregates
        ph = a.phases
        errs = sum(a.errors.values())
        lines.append(
            f"{p.load}: {ph.measured} measured requests (warm-up {ph.warmup}, ramp "
            f"{ph.ramp}, drain {ph.drain}) in a {p.window.seconds:.1f}s "
            f"window | TTFT p50 {_d(a.ttft_ms, 'p50')} p99 {_d(a.ttft_ms, 'p99')} ms | "
            f"TPOT p50 {_d(a.tpot_ms, 'p50')} ms | E2E p50 {_d(a.e2e_ms, 'p50')} ms | "
            f"{_d(a.tps_user, 'p50')} tok/s/user | {_f(a.output_tps)} output tok/s | "
            f"errors {errs} (context overflow {a.context_overflow})" + _hits(a) + _client(p)
        )
        lines += [f"  {line}" for line in pool_lines(a)]
    return lines


def pool_lines(a: Aggregates) -> list[str]:
    """One line per serving pool the answers named (``--engine dynamo``): its workers,
    requests, TTFT of the prompts it computed, ITL of the outputs it generated, hit rates."""
    out = []
    for row in a.pools or []:
        said = [f"{row.pool} pool: {row.workers} worker(s), {row.requests} requests"]
        if row.ttft_p50_ms is not None:
            said.append(f"TTFT p50 {row.ttft_p50_ms:.1f} p99 {_f(row.ttft_p99_ms)} ms")
        if row.itl_p50_ms is not None:
            said.append(f"ITL p50 {row.itl_p50_ms:.2f} p99 {_f(row.itl_p99_ms)} ms")
        if row.kv_hit_rate is not None:
            said.append(f"KV hit rate {row.kv_hit_rate:.2f}")
        if row.router_kv_hit_rate is not None:
            said.append(f"router predicted {row.router_kv_hit_rate:.2f}")
        out.append(", ".join(said))
    return out


_REPEAT_SHOWN = (
    ("output_tps", "output tok/s"),
    ("ttft_p50_ms", "TTFT p50 ms"),
    ("tpot_p50_ms", "TPOT p50 ms"),
    ("tps_user_p50", "tok/s/user p50"),
    ("jobs_per_hour", "jobs/h"),
)


def repeat_lines(results: ResultsDocument) -> list[str]:
    """One line per load run more than once: its headline metrics' means ± 95% intervals."""
    out = []
    for g in results.repeats or []:
        shown = [
            f"{label} {g.metrics[k].mean:,.1f} ± {g.metrics[k].half:,.1f}"
            for k, label in _REPEAT_SHOWN
            if k in g.metrics
        ]
        out.append(f"{g.load} over {len(g.points)} runs (mean ± 95% interval): " + ", ".join(shown))
    return out


def _client(p: Point) -> str:
    """`` | CLIENT SATURATED (why)`` for a point whose client was the bottleneck, else ""."""
    c = p.client
    return f" | CLIENT SATURATED ({c.why})" if c is not None and c.saturated else ""


def saturation_warning(results: ResultsDocument) -> str | None:
    """One warning line naming the points whose client was saturated (None: it kept up)."""
    hot = [p for p in results.points if p.client is not None and p.client.saturated]
    if not hot:
        return None
    why = hot[0].client.why if hot[0].client is not None else None
    return (
        f"agentload: warning: the client was saturated at {', '.join(p.load for p in hot)} "
        f"({why}): those points measure the client as much as the target; spread the load "
        "over more processes with --ray --workers N"
    )


def _hits(a: Aggregates) -> str:
    """`` | cached N tokens (within-session W, cross-session C), hit rate M of ideal I, per
    session min … p50 …`` ("" without cached counts)."""
    h = a.kv_hits
    if h is None:
        return ""
    split = (
        f" (within-session {h.within_session_tokens:,}, cross-session {h.cross_session_tokens:,})"
        if h.within_session_tokens is not None and h.cross_session_tokens is not None
        else ""
    )
    rate = a.value("kv_hit_rate")
    per = a.value("session_kv_hit_rate")
    hit = f", hit rate {rate['measured']:.2f} of ideal {rate['ideal']:.2f}" if rate else ""
    pred = a.router_kv_hit_rate
    hit += f" (router predicted {pred:.2f})" if rate and pred is not None else ""
    hit += f", per session min {per['min']:.2f} p50 {per['p50']:.2f}" if per else ""
    return f" | cached {h.cached_tokens:,} tokens{split}{hit}"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """A table in a box that scrolls sideways when it is wider than the page."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_f(c, 2))}</td>" for c in row) + "</tr>" for row in rows
    )
    return f"<div class='wide'><table><tr>{head}</tr>{body}</table></div>"


def _summary_table(points: list[Point]) -> str:
    """The summary: one row per column of summary.csv, one column per point (a sweep has a
    handful of points and the registry some forty columns, so this way it fits the page)."""
    cols = summary_columns(points)
    rows = [[c.label, *(c.get(p) for p in points)] for c in cols]
    return _table(["", *(p.load for p in points)], rows).replace(
        "<table>", "<table class='summary'>", 1
    )


def _scrape_section(p: Point) -> str:
    """What ``--scrape-metrics`` collected at a point: every kept series' first, last, min and
    max, or why there is nothing."""
    sc = p.scrape
    if sc is None:
        return ""
    head = (
        f"<h4>Server metrics ({html.escape(sc.url)})</h4><p>{len(sc.samples)} scrape(s), "
        f"{sc.failures} failed"
        + (f"; last error: {html.escape(sc.last_error)}" if sc.last_error else "")
        + ".</p>"
    )
    keys = sorted({k for s in sc.samples for k in s.values})
    if not keys:
        return head + "<p>No kept series (see docs/engines.md for each engine's names).</p>"
    rows = []
    for k in keys:
        vals = [s.values[k] for s in sc.samples if k in s.values]
        rows.append([k, vals[0], vals[-1], vals[-1] - vals[0], min(vals), max(vals)])
    return head + _table(["series", "first", "last", "last − first", "min", "max"], rows)


def _group_table(groups: dict[str, GroupAggregates], title: str) -> str:
    cols = group_columns()
    rows = [[name, *(cell(g) for _, cell in cols)] for name, g in groups.items()]
    return f"<h4>{html.escape(title)}</h4>" + _table(["group", *(h for h, _ in cols)], rows)


def _row_tables(p: Point) -> list[str]:
    """A table for every registered metric whose value is a list of rows (KV survival)."""
    out = []
    for m in metrics.registry():
        rows = p.aggregates.value(m.tag) if m.row_columns else None
        if rows:
            heads = [h for _, h in m.row_columns]
            cells = [[r.get(k) for k, _ in m.row_columns] for r in rows]
            out.append(f"<h4>{html.escape(m.label())}</h4>" + _table(heads, cells))
    return out


def _capacity_section(cap: Capacity) -> list[str]:
    """The capacity answer and how long the search took, then one row per probe (a ramp
    step's marked): its verdict and each objective's percentile with its two 95% bounds."""
    rows = [
        [
            p.concurrency,
            "ramp step" if p.ramp else "full probe",
            p.verdict.value,
            "met" if p.met else "missed",
            f"{p.window_s:.1f}",
            ", ".join(s.value for s in p.stops),
            "; ".join(check_text(c) for c in p.checks),
        ]
        for p in cap.probes
    ]
    head = ["sessions", "probe", "verdict", "taken as", "window (s)", "window ended", "objectives"]
    took = f" The search took {cap.elapsed_s / 60:.1f} min" if cap.elapsed_s else ""
    how = (
        " in one run whose lanes it moved (a ramp, then full probes)."
        if cap.search == "ramp"
        else ", a point per probe."
    )
    return [
        f"<p class='headline'>{html.escape(cap.answer)}</p>",
        f"<p>{took}{how if took else ''}</p>" if took else "",
        _table(head, rows),
    ]


def _what(run: ResultsDocument) -> str:
    """What ran: the command or endpoint, model, traces and load settings."""
    cfg = run.config
    if run.live is not None or not isinstance(cfg, ReplayConfig):
        live = run.live
        ran = f"{live.command} -s {live.scenario} · " if live is not None else ""
        sandbox = f" · sandbox {live.sandbox}" if live is not None else ""
        return (
            f"LIVE · {ran}endpoint {redact_url(cfg.endpoint)} · model {cfg.model} · "
            f"{cfg.sessions} sessions per point{sandbox} · traces {', '.join(cfg.traces)}"
        )
    return (
        f"endpoint {redact_url(cfg.endpoint)} · model {cfg.model} · engine {cfg.engine} · "
        f"traces {', '.join(cfg.traces)} · gap scale {cfg.gap_scale} · "
        f"start at {cfg.start_at} · salt at {cfg.salt_at}"
    )


def _time_scale(run: ResultsDocument) -> float:
    return run.config.time_scale if isinstance(run.config, ReplayConfig) else 1.0


def _run_section(run: ResultsDocument, name: str) -> str:
    parts = [f"<h2>{html.escape(name)}</h2>", f"<p>{html.escape(_what(run))}</p>"]
    parts += _capacity_section(run.capacity) if run.capacity is not None else []
    parts += [f"<p class='headline'>{html.escape(h.text)}</p>" for h in headlines(run)]
    plan = run.plan
    for t in plan.truncated_traces:
        parts.append(
            f"<p>{html.escape(t.file)} is truncated ({html.escape(t.detail)}): "
            "its sessions are replayed as far as they were recorded.</p>"
        )
    parts += [f"<p>{html.escape(line)}.</p>" for line in run_lines(run) + repeat_lines(run)]
    if plan.cut_sessions:
        rows = [[c.session, c.kept_calls, c.dropped_calls] for c in plan.cut_sessions]
        parts.append(_table(["session cut", "calls kept", "calls dropped"], rows))
    if run.points:
        parts.append(_summary_table(run.points))
    for p in run.points:
        a = p.aggregates
        w = p.window
        ph = a.phases
        load = (
            f"concurrency {p.concurrency}"
            if p.concurrency
            else f"rate {p.arrival_rate}/s"
            if p.arrival_rate
            else f"the recorded schedule (time scale {_time_scale(run):g})"
        )
        parts.append(f"<h3>{html.escape(load)}</h3>")
        parts.append(
            "<p>"
            + html.escape(
                f"Warm-up window 0–{p.warmup_window.end_ns / 1e9:.2f}s "
                f"({ph.warmup} warm-up requests, {ph.ramp} ramp requests); measured window "
                f"{w.start_ns / 1e9:.2f}–{w.end_ns / 1e9:.2f}s ({ph.measured} requests; "
                f"{ph.drain} after it). Window rule: {w.rule}. Peak sessions in flight "
                f"{p.max_active_sessions}, peak requests in flight {p.max_inflight_requests}. "
                f"Errors: {a.errors or 'none'}; context overflow {a.context_overflow}; "
                f"length mismatches {a.length_mismatch}."
            )
            + "</p>"
        )
        parts.append(_group_table(a.by_band, "By context band"))
        parts.append(_group_table(a.by_depth, "By turn depth"))
        parts += _row_tables(p)
        parts.append(_scrape_section(p))
    return "\n".join(parts)


_CSS = (
    "body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}"
    ".wide{max-width:100%;overflow-x:auto}"
    "table{border-collapse:collapse;font-size:12px;margin:.5em 0}"
    "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "td:first-child,th:first-child{text-align:left;overflow-wrap:anywhere}"
    "table.summary td:first-child{white-space:nowrap}"
    ".headline{font-size:1.2em;font-weight:bold}img{max-width:100%}"
    ".chart{margin:1em 0}.chart svg{max-width:100%;height:auto;font-family:sans-serif}"
    ".toggles label{margin-right:1.5em;font-weight:bold;cursor:pointer}"
    ".tip{position:absolute;background:#fff;border:1px solid #888;padding:4px;"
    "box-shadow:2px 2px 6px #0003;pointer-events:none;z-index:10}"
    "circle.point{cursor:pointer;stroke:#fff;stroke-width:1}rect.call{stroke:#0002}"
)


def write_report(runs: list[ResultsDocument], out: Path) -> list[Path]:
    """Write report.html and its PNGs into ``out``; returns [report.html, *pngs]."""
    from agentload.measure.plots import all_plots  # matplotlib: only when a report is drawn

    out.mkdir(parents=True, exist_ok=True)
    names = [
        (run.path.parent.name if run.path is not None else "") or f"run {i + 1}"
        for i, run in enumerate(runs)
    ]
    pngs = all_plots(runs, names, out)
    live = sum(1 for run in runs if run.mode == "live")
    kind = "live benchmark" if live == len(runs) else "replay"
    body = [f"<h1>agentload {kind} report</h1>"]
    if live:
        body.append(f"<p class='live'><b>{html.escape(LIVE_NOTE)}</b></p>")
    for label in (simulated_note, waits_note):
        note = next(filter(None, (label(run) for run in runs)), None)
        if note is not None:
            body.append(f"<p class='live'><b>{html.escape(note)}</b></p>")
    body.append(f"<p>{len(runs)} run(s)" + (f", {live} of them live" if live else "") + ".</p>")
    body += [
        f"<p class='headline'>{html.escape(r.capacity.answer)}</p>" for r in runs if r.capacity
    ]
    body.append(interactive_section(runs, names))
    body += [_run_section(run, name) for run, name in zip(runs, names, strict=True)]
    for png in pngs:
        data = base64.b64encode(png.read_bytes()).decode()
        body.append(f"<h3>{html.escape(png.stem.replace('_', ' '))}</h3>")
        body.append(f"<img alt='{png.stem}' src='data:image/png;base64,{data}'>")
    doc = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>agentload {kind} report</title>"
        f"<style>{_CSS}</style></head><body>{''.join(body)}</body></html>"
    )
    path = out / "report.html"
    path.write_text(mask_text(doc), encoding="utf-8")  # a learned secret, wherever it is
    return [path, *pngs]
