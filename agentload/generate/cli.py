"""``agentload generate`` and ``agentload eval``: run agent sessions, record them to a trace.

Progress goes to stderr (a live table on a terminal, plain lines otherwise); the trace path
and the summary table go to stdout (``--json``: one JSON object instead). Ctrl-C / SIGTERM end
the run cleanly: every session records ``interrupted``, every sandbox is removed, the trace is
closed and readable; the exit code is 130 (143 for SIGTERM).
"""

from __future__ import annotations

import asyncio
import inspect
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import typer
from rich.console import Console

from agentload.auth import userinfo_warning
from agentload.errortext import one_line
from agentload.masking import mask_text
from agentload.measure.results import ResultsDocument
from agentload.trace.schema import EndReason

if TYPE_CHECKING:  # the agents' modules load langgraph and langchain (seconds): only
    # the commands that run agents import them, so `agentload --help`, `record`, `replay` ... start fast
    from agentload.evals.results import EvalDocument
    from agentload.generate.calibrate import TokenRatio
    from agentload.generate.options import GenerateOptions
    from agentload.generate.run import RunResult

__all__ = ["FAILED_REASONS", "register", "run_command", "run_generate"]

FAILED_REASONS = (EndReason.ENDPOINT_ERROR, EndReason.ERROR, EndReason.DISK_QUOTA)
"""End reasons of a session that did not work; when every session ends so, the exit code is 1."""


def token_line(t: TokenRatio) -> str:
    """The summary's token-unit line: the measured server/ours ratio, or why it is 1."""
    if t.error is not None:
        return f"tokens: server/ours 1 (not measured: {t.error})"
    return (
        f"tokens: server/ours {t.ratio:.3f} ({t.sample_tokens_server:,} server tokens for "
        f"{t.sample_tokens_ours:,} of ours); scenario sizes are server tokens"
    )


@dataclass
class _Ran:
    """What a command ran and wrote: its runs (one per ``--sweep`` level), the live results
    document, their folder and the files written there, and the eval results."""

    runs: list[RunResult]
    doc: ResultsDocument | None
    folder: Path | None
    written: list[Path]
    evaluation: EvalDocument | None = None


def run_generate(
    opts: GenerateOptions,
    *,
    json_out: bool = False,
    live: bool = True,
    report: bool = True,
) -> RunResult:
    """Run ``generate`` with progress, signals and the summary (what the commands call); with
    ``live`` (the live benchmark), one run per level of ``opts.levels`` and the benchmark files
    beside the traces (``generate.live``; report.html only with ``report``). Returns the
    (first) run."""
    from agentload.generate.run import summary_rows

    warning = userinfo_warning(opts.endpoint) if opts.endpoint else None
    if warning:
        print(one_line(warning), file=sys.stderr)
    ran = _run_with_signals(opts, live, report)
    rows = [row for run in ran.runs for row in summary_rows(run)]
    if opts.evaluate and opts.task_names() is not None:
        ran.evaluation = _write_evaluation(opts, ran)
    if json_out:
        sys.stdout.write(orjson.dumps(_json_summary(opts, ran, rows)).decode() + "\n")
    else:
        _print_summary(opts, ran, rows)
    sessions = [st for run in ran.runs for st in run.sessions]
    failed = [st for st in sessions if st.end_reason in FAILED_REASONS]
    if failed and len(failed) == len(sessions):
        raise typer.Exit(1)
    return ran.runs[0]


def _run_with_signals(opts: GenerateOptions, live: bool, report: bool) -> _Ran:
    """The run(s) with progress on stderr; SIGTERM cancels them (exit 143, after each run has
    closed its trace and written what it could)."""
    from agentload.generate.dispatch import generate
    from agentload.generate.display import make_progress
    from agentload.generate.live import run_points

    progress = make_progress(Console(stderr=True), opts.scenario.context_target)

    async def main() -> tuple[list[RunResult], ResultsDocument | None, Path | None, list[Path]]:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            async with progress:
                if not live:
                    return [await generate(opts, progress)], None, None, []
                return await run_points(opts, progress, report)
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        return _Ran(*asyncio.run(main()))
    except asyncio.CancelledError:
        print("agentload: terminated", file=sys.stderr)
        raise typer.Exit(143) from None


def _write_evaluation(opts: GenerateOptions, ran: _Ran) -> EvalDocument:
    """The eval results of the (first) run, eval.json and eval.html written beside its results
    (added to ``ran.written``)."""
    from agentload.evals.report import write_eval_files
    from agentload.generate.evalrun import eval_document
    from agentload.generate.live import results_dir

    result = ran.runs[0]
    evaluation = eval_document(result, opts, opts.gpus, opts.power_watts)
    ran.written += write_eval_files(evaluation, ran.folder or results_dir(result.trace_path))
    return evaluation


def _json_summary(opts: GenerateOptions, ran: _Ran, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The ``--json`` object: the (first) run, every session's row, the files written."""
    result, written, evaluation = ran.runs[0], ran.written, ran.evaluation
    payload: dict[str, Any] = {
        "trace": str(result.trace_path),
        "endpoint": result.endpoint,
        "model": result.model,
        "wall_s": result.wall_ns / 1e9,
        "token_ratio": result.tokens.ratio if result.tokens else None,
        "sessions": rows,
    }
    if result.ray is not None:
        payload["ray"] = result.ray
    if result.sandbox:
        payload["sandbox"] = result.sandbox
    if written:
        payload["traces"] = [str(run.trace_path) for run in ran.runs]
        payload["results"] = str(written[0])
    if opts.evaluate:
        passed = sum(1 for r in rows if r["eval_passed"])
        payload["pass_rate"] = passed / len(rows) if rows else None
    if evaluation is not None:
        payload["eval"] = str(written[-2])
        payload["eval_mode"] = evaluation.mode
        payload["eval_overall"] = evaluation.overall.model_dump(mode="json")
    return payload


def _print_summary(opts: GenerateOptions, ran: _Ran, rows: list[dict[str, Any]]) -> None:
    """The summary on stdout: each run's table, the sessions' details, the eval and benchmark
    results, the token ratio and the traces."""
    out = Console()
    if not out.is_terminal:
        out = Console(width=140)
    if ran.doc is not None and ran.doc.capacity is not None:  # the answer comes first
        out.print(ran.doc.capacity.answer, markup=False, highlight=False, soft_wrap=True)
    levels = [p.concurrency or 0 for p in ran.doc.points] if ran.doc else opts.levels
    _print_runs(out, opts, ran.runs, levels)
    _print_eval(out, opts, ran, rows)
    if ran.doc is not None:
        _print_results(out, ran.doc, ran.folder, ran.written)
    result = ran.runs[0]
    if result.sandbox:
        out.print(f"sandbox: {result.sandbox}", markup=False, highlight=False, soft_wrap=True)
    if result.tokens is not None:
        out.print(token_line(result.tokens), markup=False, highlight=False, soft_wrap=True)
    from agentload.generate.run import modeled_waits

    waits = modeled_waits(opts, 0)
    if waits is not None:
        how = "slept through (--pace real)" if waits.slept else "recorded, not slept"
        out.print(
            f"modeled waits: {how}; replay plays them (--gaps measured leaves them out); "
            f"fitted to {waits.model.source}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    for run in ran.runs:
        out.print(f"trace: {run.trace_path}", markup=False, highlight=False, soft_wrap=True)


def _print_runs(
    out: Console, opts: GenerateOptions, runs: list[RunResult], levels: list[int]
) -> None:
    """Each run's summary table (headed by its level when there are several), then the detail
    of every session that has one."""
    from agentload.generate.display import summary_table
    from agentload.generate.run import summary_rows

    for run, level in zip(runs, levels, strict=False):
        if len(runs) > 1:
            out.print(f"point: --parallel {level}", highlight=False)
        out.print(summary_table(summary_rows(run), evaluate=opts.evaluate))
    for st in (st for run in runs for st in run.sessions):
        if st.detail:
            out.print(
                f"{st.session_id}: {st.end_reason}: {mask_text(st.detail)}",
                markup=False,
                highlight=False,
                soft_wrap=True,
            )


def _print_eval(out: Console, opts: GenerateOptions, ran: _Ran, rows: list[dict[str, Any]]) -> None:
    """The eval results' table and files, else (``--eval`` without tasks) the pass count."""
    if ran.evaluation is not None:
        from agentload.evals.report import eval_table

        for line in eval_table(ran.evaluation):
            out.print(line, markup=False, highlight=False, soft_wrap=True)
        eval_json, eval_html = ran.written[-2], ran.written[-1]
        out.print(f"eval: {eval_json} ({eval_html.name})", markup=False, highlight=False)
    elif opts.evaluate and rows:
        passed = sum(1 for r in rows if r["eval_passed"])
        out.print(f"eval: {passed}/{len(rows)} sessions pass ({100 * passed / len(rows):.0f}%)")


def _print_results(
    out: Console, doc: ResultsDocument, folder: Path | None, written: list[Path]
) -> None:
    """The live benchmark's text summary, its folder and files, and how to draw the report
    when it was not written."""
    from agentload.measure.report import text_summary  # matplotlib: only when needed

    lines = text_summary(doc)
    for line in lines[1:] if doc.capacity is not None else lines:  # its answer came first
        out.print(line, markup=False, highlight=False, soft_wrap=True)
    shown = ", ".join(p.name for p in written[:3])
    out.print(f"results: {folder} ({shown})", markup=False, highlight=False, soft_wrap=True)
    if folder is not None and folder / "report.html" not in written:
        out.print(
            f"report: agentload report {folder} --out {folder}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )


_BENCH_OPTIONS = (
    "endpoint",
    "gpus",
    "power_watts",
    "power",
    "slo",
    "target_tps_user",
    "capacity",
)
"""Options that ask for the HTML report (matplotlib: seconds): a real target or a benchmark
option (a sweep too); a run on the built-in simulator writes results.json and summary.csv
only."""


def run_command(doc: str, *, evaluate: bool | None = None) -> Callable[..., None]:
    """A command over ``GenerateOptions``' options (``-c`` and ``--json`` besides) that builds
    the options and runs them; ``evaluate`` fixes ``--eval`` (and leaves the option out), None
    offers it."""

    def command(*, config: list[str], json_out: bool, **kw: Any) -> None:
        from agentload.generate.options import GenerateOptions, check_options
        from agentload.options.flags import given, validated
        from agentload.scenarios import load_scenario

        raw = given(kw, GenerateOptions)
        if evaluate is not None:
            raw["evaluate"] = evaluate
        raw["scenario"] = load_scenario(raw["scenario"], config)
        opts = validated(GenerateOptions, raw, {"attempts": "-k"})
        report = len(opts.levels) > 1 or any(kw.get(k) not in (None, False) for k in _BENCH_OPTIONS)
        check_options(opts)  # before anything is created or contacted
        run_generate(opts, json_out=json_out, report=report)

    from agentload.generate.options import GenerateOptions
    from agentload.options.flags import parameters

    kind = inspect.Parameter.KEYWORD_ONLY
    config = typer.Option(
        [], "--config", "-c", help="Scenario override key.path=value (repeatable)."
    )
    json_out = typer.Option(False, "--json", help="Print one JSON object instead of the table.")
    params = parameters(
        GenerateOptions, skip=("evaluate",) if evaluate is not None else (), own_first=True
    )
    at = next(k for k, p in enumerate(params) if p.name == "scenario") + 1
    params.insert(at, inspect.Parameter("config", kind, default=config, annotation=list[str]))
    params.append(inspect.Parameter("json_out", kind, default=json_out, annotation=bool))
    setattr(command, "__signature__", inspect.Signature(params))  # noqa: B010 (typer reads it)
    command.__doc__ = doc
    return command


def register(app: typer.Typer) -> None:
    """Add ``generate`` and ``eval`` to the ``agentload`` command."""
    app.command("generate")(
        run_command(
            "Run agent sessions (orchestrator + sub-agents, real tools) and record one trace."
        )
    )
    app.command("eval")(
        run_command(
            "generate --eval: run sessions, then check that each edited workspace passes its tests.",
            evaluate=True,
        )
    )
