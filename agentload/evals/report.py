"""The eval run in words and pictures: the per-task table, eval.html (a grid of tasks ×
attempts), eval.json and eval.html written together, and the per-task differences of two runs
(``agentload compare``)."""

from __future__ import annotations

import html
from pathlib import Path

from agentload.evals.results import EvalDocument, write_eval
from agentload.masking import mask_text, redact_url
from agentload.outfile import write_errors

__all__ = [
    "EVAL_HTML",
    "compare_evals",
    "eval_table",
    "overall_line",
    "write_eval_files",
    "write_eval_html",
]

EVAL_HTML = "eval.html"


def overall_line(doc: EvalDocument) -> str:
    """One line: the mode, pass@1, pass@k and the solved rates."""
    o = doc.overall
    rates = [f"{o.solved_per_hour:.1f} solved/h"]
    if o.solved_per_hour_per_gpu is not None:
        rates.append(f"{o.solved_per_hour_per_gpu:.2f}/h/GPU")
    if o.solved_per_hour_per_mw is not None:
        rates.append(f"{o.solved_per_hour_per_mw:,.0f}/h/MW")
    at_k = f", pass@{doc.k} {o.pass_at_k:.3f}" if doc.k > 1 else ""
    return (
        f"eval ({doc.mode}): {o.tasks_solved}/{o.tasks} tasks solved, {o.passed}/{o.sessions} "
        f"attempts pass; pass@1 {o.pass_at_1:.3f}{at_k}; " + ", ".join(rates)
    )


def eval_table(doc: EvalDocument) -> list[str]:
    """The per-task table, one line per task, then the overall line."""
    head = (
        f"{'task':<28} {'package':<12} {'pass':>5} {'pass@1':>6} {'pass@k':>6} {'wall s':>7} "
        f"{'tokens':>9} {'calls':>6} {'tool s':>7}  end"
    )
    lines = [head, "-" * len(head)]
    for t in doc.tasks:
        ends = ", ".join(f"{r} {n}" for r, n in sorted(t.end_reasons.items()))
        tokens = t.prompt_tokens_mean + t.completion_tokens_mean
        lines.append(
            f"{t.task:<28} {t.package:<12} {t.passed:>2}/{t.attempts:<2} {t.pass_at_1:>6.2f} "
            f"{t.pass_at_k:>6.2f} {t.wall_s_mean:>7.1f} {tokens:>9,.0f} {t.calls_mean:>6.1f} "
            f"{t.tool_s_mean:>7.1f}  {ends}"
        )
    lines.append(overall_line(doc))
    return lines


_CSS = """body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}td.t{text-align:left}
td.pass{background:#c6efce}td.fail{background:#ffc7ce}td.none{background:#eee}
.note{color:#555;max-width:60em}"""


def write_eval_html(doc: EvalDocument, out: Path) -> Path:
    """eval.html in ``out``: one row per task, one cell per attempt (green: passed; the title
    says the end reason and the suite's failures), the task's pass@1 / pass@k and means."""
    k_max = max((t.attempts for t in doc.tasks), default=0)
    rows = []
    for t in doc.tasks:
        cells = []
        mine = sorted((a for a in doc.attempts if a.task == t.task), key=lambda a: a.attempt)
        for a in mine:
            failed = (a.suite or {}).get("failed_count")
            why = f"{a.end_reason}; suite: " + (
                "no result" if failed is None else f"{failed} failing"
            )
            cls = "pass" if a.passed else "fail"
            mark = "✓" if a.passed else "✗"
            cells.append(f'<td class="{cls}" title="{html.escape(why)}">{mark}</td>')
        cells += ['<td class="none"></td>'] * (k_max - len(mine))
        rows.append(
            f'<tr><td class="t">{html.escape(t.task)}</td><td class="t">'
            f'{html.escape(t.package)}</td><td class="t">{html.escape(t.kind)}</td>'
            + "".join(cells)
            + f"<td>{t.pass_at_1:.2f}</td><td>{t.pass_at_k:.2f}</td><td>{t.wall_s_mean:.1f}</td>"
            f"<td>{t.prompt_tokens_mean + t.completion_tokens_mean:,.0f}</td>"
            f"<td>{t.calls_mean:.1f}</td><td>{t.tool_s_mean:.1f}</td></tr>"
        )
    attempts = "".join(f"<th>#{i + 1}</th>" for i in range(k_max))
    note = {
        "oracle": "Oracle mode: the built-in simulator applied each task's reference fix. "
        "This tests the harness end to end; it measures no model.",
        "simulator": "The built-in simulator without the oracle: it makes only neutral edits.",
        "model": "A real endpoint: these are the model's own results.",
    }[doc.mode]
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>agentload eval: {html.escape(doc.scenario)}</title><style>{_CSS}</style></head><body>
<h1>agentload eval</h1>
<p>{html.escape(overall_line(doc))}</p>
<p class="note">{html.escape(note)} Endpoint {html.escape(redact_url(doc.endpoint))}, model
{html.escape(doc.model)}, scenario {html.escape(doc.scenario)}, seed {doc.seed}, k {doc.k},
{doc.parallel} at a time, {doc.wall_s:.0f} s. Trace: {html.escape(doc.trace)}</p>
<table><tr><th>task</th><th>package</th><th>kind</th>{attempts}<th>pass@1</th>
<th>pass@{doc.k}</th><th>wall s</th><th>tokens</th><th>calls</th><th>tool s</th></tr>
{"".join(rows)}
</table></body></html>
"""
    path = out / EVAL_HTML
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(mask_text(page), encoding="utf-8")
    return path


def write_eval_files(doc: EvalDocument, folder: Path) -> list[Path]:
    """eval.json and eval.html into ``folder``."""
    with write_errors(folder, option="--out"):
        return [write_eval(doc, folder), write_eval_html(doc, folder)]


def compare_evals(a: EvalDocument, b: EvalDocument) -> list[str]:
    """Per-task differences of two eval runs (A → B), then the overall ones."""
    lines = [f"A: {overall_line(a)}", f"B: {overall_line(b)}"]
    if a.mode != b.mode:
        lines.append(f"mode differs: A {a.mode}, B {b.mode}")
    ta, tb = {t.task: t for t in a.tasks}, {t.task: t for t in b.tasks}
    only_a, only_b = sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))
    if only_a:
        lines.append("only in A: " + ", ".join(only_a))
    if only_b:
        lines.append("only in B: " + ", ".join(only_b))
    lines.append(
        f"{'task':<28} {'A pass':>7} {'B pass':>7} {'Δ pass@1':>9} {'A wall':>7} {'B wall':>7}  change"
    )
    changed = 0
    for name in [t for t in ta if t in tb]:
        x, y = ta[name], tb[name]
        delta = y.pass_at_1 - x.pass_at_1
        what = (
            "fixed" if not x.passed and y.passed else "broke" if x.passed and not y.passed else ""
        )
        changed += bool(what)
        lines.append(
            f"{name:<28} {x.passed:>3}/{x.attempts:<3} {y.passed:>3}/{y.attempts:<3} "
            f"{delta:>+9.2f} {x.wall_s_mean:>7.1f} {y.wall_s_mean:>7.1f}  {what}"
        )
    o, p = a.overall, b.overall
    lines.append(
        f"overall: pass@1 {o.pass_at_1:.3f} → {p.pass_at_1:.3f} ({p.pass_at_1 - o.pass_at_1:+.3f}); "
        f"{changed} task(s) changed between solved and unsolved"
    )
    return lines
