"""``agentload replay``, ``agentload report`` and ``agentload compare``."""

from __future__ import annotations

import asyncio
import inspect
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from agentload.auth import userinfo_warning
from agentload.errortext import one_line
from agentload.measure.results import ResultsDocument
from agentload.options.flags import given, parameters, validated
from agentload.options.replay import ReplayConfig
from agentload.outfile import write_errors

__all__ = ["register", "start_at_note"]


def replay(*, out: Path | None, **kw: Any) -> None:
    """Replay traces against an endpoint: identical agentic traffic, closed loop or on the
    recorded schedule (content-free traces: prompts synthesized from their block ids)."""
    from agentload.measure.files import write_run
    from agentload.measure.report import saturation_warning
    from agentload.measure.results import prepare_out_dir
    from agentload.measure.verdict import ExitCode, verdict
    from agentload.replay.progress import Progress
    from agentload.replay.run import run_replay

    cfg = validated(ReplayConfig, given(kw, ReplayConfig))
    if out is not None:
        prepare_out_dir(out)
    warning = userinfo_warning(cfg.endpoint)
    if warning:
        print(one_line(warning), file=sys.stderr)
    note = start_at_note(cfg) if "start_at" not in cfg.model_fields_set else None
    if note is not None:
        print(note, file=sys.stderr)
    results = asyncio.run(run_replay(cfg, Progress()))
    console = Console()
    _print_summary(console, results)
    saturated = saturation_warning(results)
    if saturated is not None:
        print(one_line(saturated), file=sys.stderr)
    if out is not None:
        paths = write_run(results, out)
        console.print(f"wrote {', '.join(str(p) for p in paths[:3])} and {len(paths) - 3} PNGs")
    end = verdict(results)
    if end.line is not None:
        console.print(end.line, highlight=False, soft_wrap=True)
    if end.code != ExitCode.OK:
        raise typer.Exit(int(end.code))


def _replay_parameters() -> list[inspect.Parameter]:
    """``replay``'s parameters: ``ReplayConfig``'s options, and ``--out`` last."""
    out = typer.Option(None, help="Write results, CSV and report here.")
    kind = inspect.Parameter.KEYWORD_ONLY
    out_param = inspect.Parameter("out", kind, default=out, annotation=Path | None)
    return [*parameters(ReplayConfig), out_param]


setattr(replay, "__signature__", inspect.Signature(_replay_parameters()))  # noqa: B010 (typer reads it)


def start_at_note(cfg: ReplayConfig) -> str | None:
    """One line when the default ``--start-at random`` makes every session of the run join
    its trace mid-flight (``--sessions`` at most the concurrency: each is the first of its
    lane, so none is replayed from its first call); None otherwise."""
    if cfg.start_at != "random" or cfg.schedule != "closed" or cfg.arrival_rate is not None:
        return None
    if cfg.sessions is None or cfg.sessions > min(cfg.levels):
        return None
    which = "the session" if cfg.sessions == 1 else f"each of the {cfg.sessions} sessions"
    return (
        f"agentload: note: --start-at random (the default): {which} joins its trace at a "
        "random recorded time and skips the calls before it (those still needed are sent "
        "once as unmeasured warm-up); --start-at zero replays from the first call"
    )


def _print_summary(console: Console, results: ResultsDocument) -> None:
    from agentload.measure.report import headlines, text_summary

    for line in text_summary(results):
        console.print(line, highlight=False, soft_wrap=True)
    for h in headlines(results):
        console.print(h.text, highlight=False, soft_wrap=True)


def report(
    results: Annotated[
        list[Path], typer.Argument(help="results.json files (or their directories).")
    ],
    out: Annotated[Path, typer.Option(help="Directory for report.html + PNGs.")] = Path("report"),
) -> None:
    """Rebuild the HTML report from results; several runs overlay on one Pareto plot."""
    from agentload.measure.report import write_report
    from agentload.measure.results import load_results, prepare_out_dir

    prepare_out_dir(out)
    runs = [load_results(p) for p in results]
    with write_errors(out, option="--out"):
        paths = write_report(runs, out)
    Console().print(f"wrote {paths[0]} ({len(paths) - 1} PNGs)")


def compare(
    a: Annotated[Path, typer.Argument(help="First results.json or eval.json (or directory).")],
    b: Annotated[Path, typer.Argument(help="Second results.json or eval.json (or directory).")],
) -> None:
    """Say whether two runs received identical traffic, and show metric deltas; for two eval
    runs (eval.json, or their folders), the per-task differences first."""
    from agentload.evals.results import EVAL_FILE

    console = Console()
    evals = [p if p.name == EVAL_FILE else p / EVAL_FILE for p in (a, b)]
    if any(p.name == EVAL_FILE for p in (a, b)) or all(p.is_file() for p in evals):
        from agentload.evals.report import compare_evals
        from agentload.evals.results import load_eval

        for line in compare_evals(load_eval(evals[0]), load_eval(evals[1])):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if not all(p.is_dir() for p in (a, b)):
            return
    from agentload.measure.compare import compare_results
    from agentload.measure.results import load_results

    lines, _ = compare_results(load_results(a), load_results(b))
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``replay``, ``report`` and ``compare`` to the ``agentload`` command."""
    app.command("replay")(replay)
    app.command("report")(report)
    app.command("compare")(compare)
