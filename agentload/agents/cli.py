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
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import typer
from rich.console import Console

from agentload.agents.limits import DEFAULT_CALL_TIMEOUT_S
from agentload.auth import userinfo_warning
from agentload.errors import ConfigError
from agentload.errortext import one_line
from agentload.masking import mask_text
from agentload.replay.cli import config_from_options
from agentload.replay.config import ReplayConfig
from agentload.replay.results import ResultsDocument

if TYPE_CHECKING:  # the agents' modules load langgraph, langchain and openai (seconds): only
    # the commands that run agents import them, so `agentload --help`, `record`, `replay` ... start fast
    from agentload.agents.calibrate import TokenRatio
    from agentload.agents.run import GenerateOptions, RunResult

__all__ = ["FAILED_REASONS", "register", "run_command", "run_generate"]

FAILED_REASONS = ("endpoint_error", "error")
"""End reasons of a session that did not work; when every session ends so, the exit code is 1."""


class SandboxChoice(StrEnum):
    auto = "auto"
    docker = "docker"
    local = "local"


def token_line(t: TokenRatio) -> str:
    """The summary's token-unit line: the measured server/ours ratio, or why it is 1."""
    if t.error is not None:
        return f"tokens: server/ours 1 (not measured: {t.error})"
    return (
        f"tokens: server/ours {t.ratio:.3f} ({t.sample_tokens_server:,} server tokens for "
        f"{t.sample_tokens_ours:,} of ours); scenario sizes are server tokens"
    )


def run_generate(
    opts: GenerateOptions,
    *,
    json_out: bool = False,
    bench: ReplayConfig | None = None,
    report: bool = True,
) -> RunResult:
    """Run ``generate`` with progress, signals and the summary (what the commands call); with
    ``bench`` (the live benchmark's options: levels, GPUs, power), one run per level and the
    benchmark files beside the traces (``agents.live``; report.html only with ``report``).
    Returns the (first) run."""
    from agentload.agents.live import run_points
    from agentload.agents.progress import make_progress, summary_table
    from agentload.agents.raygen import generate
    from agentload.agents.run import summary_rows

    err = Console(stderr=True)
    warning = userinfo_warning(opts.endpoint) if opts.endpoint else None
    if warning:
        print(one_line(warning), file=sys.stderr)
    progress = make_progress(err, opts.scenario.context_target)

    async def main() -> tuple[list[RunResult], ResultsDocument | None, Path | None, list[Path]]:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if task is not None:
            loop.add_signal_handler(signal.SIGTERM, task.cancel)
        try:
            async with progress:
                if bench is None:
                    return [await generate(opts, progress)], None, None, []
                return await run_points(opts, bench, progress, report)
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        runs, doc, folder, written = asyncio.run(main())
    except asyncio.CancelledError:
        print("agentload: terminated", file=sys.stderr)
        raise typer.Exit(143) from None
    result = runs[0]
    rows = [row for run in runs for row in summary_rows(run)]
    evaluation = None
    if opts.evaluate and opts.task_names() is not None:
        from agentload.agents.evalrun import eval_document, write_eval_files
        from agentload.agents.live import results_dir

        gpus = bench.gpus if bench is not None else None
        watts = bench.power_watts if bench is not None else None
        evaluation = eval_document(result, opts, gpus, watts)
        written += write_eval_files(evaluation, folder or results_dir(result.trace_path))
    if json_out:
        payload = {
            "trace": str(result.trace_path),
            "endpoint": result.endpoint,
            "model": result.model,
            "wall_s": result.wall_ns / 1e9,
            "token_ratio": result.tokens.ratio if result.tokens else None,
            "sessions": rows,
        }
        if result.ray is not None:
            payload["ray"] = result.ray
        if written:
            payload["traces"] = [str(run.trace_path) for run in runs]
            payload["results"] = str(written[0])
        if opts.evaluate:
            passed = sum(1 for r in rows if r["eval_passed"])
            payload["pass_rate"] = passed / len(rows) if rows else None
        if evaluation is not None:
            payload["eval"] = str(written[-2])
            payload["eval_mode"] = evaluation.mode
            payload["eval_overall"] = evaluation.overall.model_dump(mode="json")
        sys.stdout.write(orjson.dumps(payload).decode() + "\n")
    else:
        out = Console()
        if not out.is_terminal:
            out = Console(width=140)
        levels = bench.levels if bench is not None else [opts.parallel]
        for run, level in zip(runs, levels, strict=False):
            if len(runs) > 1:
                out.print(f"point: --parallel {level}", highlight=False)
            out.print(summary_table(summary_rows(run), evaluate=opts.evaluate))
        for st in (st for run in runs for st in run.sessions):
            if st.detail:
                out.print(
                    f"{st.session_id}: {st.end_reason}: {mask_text(st.detail)}",
                    markup=False, highlight=False, soft_wrap=True,
                )  # fmt: skip
        if evaluation is not None:
            from agentload.evals.report import eval_table

            for line in eval_table(evaluation):
                out.print(line, markup=False, highlight=False, soft_wrap=True)
            out.print(f"eval: {written[-2]} ({written[-1].name})", markup=False, highlight=False)
        elif opts.evaluate and rows:
            passed = sum(1 for r in rows if r["eval_passed"])
            out.print(f"eval: {passed}/{len(rows)} sessions pass ({100 * passed / len(rows):.0f}%)")
        if doc is not None:
            from agentload.replay.report import text_summary  # matplotlib: only when needed

            for line in text_summary(doc):
                out.print(line, markup=False, highlight=False, soft_wrap=True)
            shown = ", ".join(p.name for p in written[:3])
            out.print(f"results: {folder} ({shown})", markup=False, highlight=False, soft_wrap=True)
            if folder is not None and folder / "report.html" not in written:
                out.print(
                    f"report: agentload report {folder} --out {folder}",
                    markup=False, highlight=False, soft_wrap=True,
                )  # fmt: skip
        if result.tokens is not None:
            out.print(token_line(result.tokens), markup=False, highlight=False, soft_wrap=True)
        for run in runs:
            out.print(f"trace: {run.trace_path}", markup=False, highlight=False, soft_wrap=True)
    sessions = [st for run in runs for st in run.sessions]
    failed = [st for st in sessions if st.end_reason in FAILED_REASONS]
    if failed and len(failed) == len(sessions):
        raise typer.Exit(1)
    return result


_SCENARIO = typer.Option(
    "coding-session", "--scenario", "-s", help="Preset name or YAML file.", show_default=True
)
_CONFIG = typer.Option([], "--config", "-c", help="Scenario override key.path=value (repeatable).")
_ENDPOINT = typer.Option(
    None,
    "--endpoint",
    help="OpenAI-compatible base URL (e.g. http://host:8000/v1); default: the built-in "
    "simulator. The API key comes from AGENTLOAD_API_KEY or OPENAI_API_KEY.",
)
_MODEL = typer.Option(None, "--model", help="Model name (default: the endpoint's first model).")
_SESSIONS = typer.Option(1, "--sessions", "-n", min=1, help="Sessions to run.")
_PARALLEL = typer.Option(1, "--parallel", "-p", min=1, help="Sessions running at once.")
_SEED = typer.Option(None, "--seed", help="Run seed (default: the scenario's).")
_OUT = typer.Option(Path("traces"), "--out", "-o", help="Directory of the trace file.")
_SANDBOX = typer.Option(
    None, "--sandbox", help="Where tools run (default: the scenario's, normally auto)."
)
_CALL_TIMEOUT = typer.Option(
    DEFAULT_CALL_TIMEOUT_S,
    "--call-timeout",
    metavar="SECONDS",
    help="The most one call attempt may take: connecting, the first byte, every gap between "
    "chunks and the whole stream. A stream that stalls, drips or never ends is cut there.",
)
_RETRIES = typer.Option(
    3, "--retries", metavar="N", help="Retries of a failed call (0: give up at once)."
)
_RAY = typer.Option(
    None,
    "--ray",
    metavar="[ADDRESS]",
    help="Run the sessions on a Ray cluster: --ray alone starts one on this machine; auto "
    "joins this machine's cluster; HOST:PORT joins that one (pip install 'agentload\\[ray]').",
)
_WORKERS = typer.Option(
    None,
    "--workers",
    metavar="N",
    help="Ray workers, one CPU each (default: one per cluster CPU, at most --sessions and "
    "--parallel); needs --ray.",
)
_KEEP = typer.Option(False, "--keep-workspaces", help="Keep the sessions' workspace copies.")
_JSON = typer.Option(False, "--json", help="Print one JSON object instead of the table.")


_EVAL = typer.Option(False, "--eval", help="Run the scenario's success check after each session.")
_TASKS = typer.Option(
    None,
    "--tasks",
    metavar="all|NAME,...",
    help="Eval tasks of the shipped suite (`agentload scenarios tasks`): all, names or "
    "packages; each runs -k times in its own workspace and sandbox (default: the scenario's).",
)
_ATTEMPTS = typer.Option(1, "--attempts", "-k", help="Attempts per task (pass@k).")
_ORACLE = typer.Option(
    False,
    "--oracle",
    help="Test mode: the built-in simulator applies each task's reference fix once it has read "
    "the faulty code (refused with --endpoint).",
)
_SWEEP = typer.Option(
    None,
    "--sweep",
    metavar="P1,P2,...",
    help="Live benchmark points: one run of --sessions per parallelism level, e.g. 1,4,16 "
    "(instead of --parallel).",
)
_GPUS = typer.Option(None, "--gpus", min=1, help="GPUs behind the endpoint (per-GPU figures).")
_POWER_WATTS = typer.Option(
    None, "--power-watts", metavar="W", help="Power draw of the target in W (per-MW figures)."
)
_POWER = typer.Option(None, "--power", metavar="nvml", help="'nvml': measure the GPUs' energy.")


def _param(name: str, annotation: Any, option: Any) -> inspect.Parameter:
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
    )


# The options generate and eval share, in the order --help lists them (eval has no --eval).
_RUN_OPTIONS = (
    _param("scenario", str, _SCENARIO),
    _param("config", list[str], _CONFIG),
    _param("endpoint", str | None, _ENDPOINT),
    _param("model", str | None, _MODEL),
    _param("sessions", int, _SESSIONS),
    _param("parallel", int, _PARALLEL),
    _param("seed", int | None, _SEED),
    _param("out", Path, _OUT),
    _param("sandbox", SandboxChoice | None, _SANDBOX),
    _param("ray", str | None, _RAY),
    _param("workers", int | None, _WORKERS),
    _param("call_timeout_s", float, _CALL_TIMEOUT),
    _param("retries", int, _RETRIES),
    _param("evaluate", bool, _EVAL),
    _param("tasks", str | None, _TASKS),
    _param("attempts", int, _ATTEMPTS),
    _param("oracle", bool, _ORACLE),
    _param("keep_workspaces", bool, _KEEP),
    _param("json_out", bool, _JSON),
    _param("sweep", str | None, _SWEEP),
    _param("gpus", int | None, _GPUS),
    _param("power_watts", float | None, _POWER_WATTS),
    _param("power", str | None, _POWER),
)


def bench_config(kw: dict[str, Any]) -> ReplayConfig:
    """The live benchmark's options (popped from ``kw``), checked as replay checks its own:
    a bad ``--sweep``, ``--gpus`` or ``--power`` is one line naming the option."""
    sweep = kw.pop("sweep")
    raw = {"traces": [], "endpoint": "", "model": "", "engine": "openai", "extras": False}
    raw |= {"salt_at": "off", "start_at": "zero", "sessions": kw["sessions"]}
    raw |= {k: kw.pop(k) for k in ("gpus", "power_watts", "power")}
    raw["levels"] = sweep if sweep is not None else [kw["parallel"]]
    return config_from_options(raw, "--sweep" if sweep is not None else "--parallel")


def run_command(doc: str, *, evaluate: bool | None = None) -> Callable[..., None]:
    """A command over the shared run options that builds one ``GenerateOptions`` and runs it;
    ``evaluate`` fixes ``--eval`` (and leaves the option out), None offers it."""

    def command(**kw: Any) -> None:
        from agentload.agents.run import GenerateOptions, check_options
        from agentload.scenarios import load_scenario

        json_out = kw.pop("json_out")
        sandbox = kw.pop("sandbox")
        kw.setdefault("evaluate", evaluate)
        # The HTML report (matplotlib: seconds) for a real target or a benchmark option; a
        # run on the built-in simulator writes results.json and summary.csv only.
        report = kw["endpoint"] is not None or any(
            kw[k] is not None for k in ("sweep", "gpus", "power_watts", "power")
        )
        bench = bench_config(kw)
        tasks = kw.pop("tasks")
        opts = GenerateOptions(
            scenario=load_scenario(kw.pop("scenario"), kw.pop("config")),
            sandbox=sandbox.value if sandbox is not None else None,
            tasks=tasks.split(",") if tasks is not None else None,
            **kw,
        )
        if opts.task_names() is not None and len(bench.levels) > 1:
            raise ConfigError("--tasks with --sweep: one eval per run; run it once per -p")
        check_options(opts)  # before anything is created or contacted
        run_generate(opts, json_out=json_out, bench=bench, report=report)

    params = [p for p in _RUN_OPTIONS if evaluate is None or p.name != "evaluate"]
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
