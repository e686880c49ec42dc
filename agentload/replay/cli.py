"""``agentload replay``, ``agentload report`` and ``agentload compare``."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from agentload.auth import userinfo_warning
from agentload.errors import ConfigError
from agentload.errortext import one_line
from agentload.outfile import write_errors
from agentload.replay.config import ReplayConfig
from agentload.replay.results import ResultsDocument

__all__ = ["config_from_options", "register"]


def replay(
    traces: Annotated[list[Path], typer.Argument(help="Trace files (.agentload.jsonl[.zst]).")],
    endpoint: Annotated[str, typer.Option(help="OpenAI-compatible base URL (…/v1).")],
    model: Annotated[str, typer.Option(help="Model name the target serves.")],
    concurrency: Annotated[int, typer.Option(help="Sessions kept in flight.")] = 1,
    sweep: Annotated[str | None, typer.Option(help="Concurrency levels, e.g. 1,2,4,8.")] = None,
    arrival_rate: Annotated[
        float | None, typer.Option(help="Start sessions as a Poisson process (sessions/s).")
    ] = None,
    duration: Annotated[
        float | None, typer.Option(help="Seconds of measured load per point.")
    ] = None,
    sessions: Annotated[
        int | None,
        typer.Option(help="Session instances per point (default: max(trace sessions, N))."),
    ] = None,
    gap_scale: Annotated[float, typer.Option(help="Scale recorded waits (0 = none).")] = 1.0,
    salt_at: Annotated[
        str | None,
        typer.Option(
            help="Where each session instance's salt line goes: start (before everything but "
            "the tools), after-system (after the tools and system prompt: shared across "
            "sessions, as in production; the default), off (no salt)."
        ),
    ] = None,
    no_salt: Annotated[bool, typer.Option("--no-salt", help="The same as --salt-at off.")] = False,
    start_at: Annotated[
        str | None,
        typer.Option(
            help="random (the default): join mid-flight after a warm-up; zero: from the start."
        ),
    ] = None,
    slo: Annotated[str | None, typer.Option(help="e.g. ttft=2s,tpot=50ms,e2e=60s.")] = None,
    gpus: Annotated[int | None, typer.Option(help="GPUs behind the endpoint.")] = None,
    power_watts: Annotated[float | None, typer.Option(help="Power draw in W.")] = None,
    power: Annotated[str | None, typer.Option(help="'nvml': measure GPU energy.")] = None,
    scrape_metrics: Annotated[
        str | None, typer.Option(help="Prometheus /metrics URL scraped at 1 Hz.")
    ] = None,
    target_tps_user: Annotated[
        list[float] | None,
        typer.Option(help="Headline target tokens/s per user (repeatable; default 160)."),
    ] = None,
    engine: Annotated[
        str, typer.Option(help="vllm|sglang|trtllm|dynamo|llamacpp|openai (docs/engines.md).")
    ] = "vllm",
    no_extras: Annotated[
        bool, typer.Option("--no-extras", help="Do not send ignore_eos/min_tokens.")
    ] = False,
    session_header: Annotated[
        str | None, typer.Option(help="Header carrying a session id (KV-aware routing).")
    ] = None,
    session_field: Annotated[
        str | None, typer.Option(help="Body field carrying a session id.")
    ] = None,
    max_context: Annotated[
        int | None,
        typer.Option(help="Fit the traces to N tokens per call (prompt + output); see --fit."),
    ] = None,
    fit: Annotated[
        str,
        typer.Option(
            help="cut-session: keep each session up to its first call above --max-context; "
            "drop-session: leave such sessions out."
        ),
    ] = "cut-session",
    timeout: Annotated[
        float, typer.Option(help="Per-request timeout in seconds (the probe: at most 10).")
    ] = 600.0,
    max_error_rate: Annotated[
        float, typer.Option(help="Exit 3 when a larger share of the requests failed.")
    ] = 0.5,
    seed: Annotated[
        int, typer.Option(help="Seed of join points, arrivals and synthesized prompts.")
    ] = 0,
    schedule: Annotated[
        str,
        typer.Option(
            help="closed: a call waits for its predecessors (--concurrency, --arrival-rate); "
            "recorded: open loop, each call at its recorded time offset (x --time-scale)."
        ),
    ] = "closed",
    time_scale: Annotated[
        float,
        typer.Option(
            help="--schedule recorded: multiply the recorded offsets (0.5 = twice as fast)."
        ),
    ] = 1.0,
    api: Annotated[
        str,
        typer.Option(
            help="auto: calls recorded in Responses or Messages (agentload record) go in that "
            "API when the target answers it, else as Chat Completions; chat: all as chat."
        ),
    ] = "auto",
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="Tokenizer of prompts synthesized for content-free traces: o200k_base "
            "(default), cl100k_base, hf:PATH/tokenizer.json."
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="[ADDRESS]",
            help="Run on a Ray cluster: --ray alone starts one on this machine; --ray auto, "
            "--ray HOST:PORT join one (pip install 'agentload\\[ray]'; docs/distributed.md).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Ray workers (default: one per cluster CPU, at most the lanes)."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Write results, CSV and report here.")] = None,
) -> None:
    """Replay traces against an endpoint: identical agentic traffic, closed loop or on the
    recorded schedule (content-free traces: prompts synthesized from their block ids)."""
    from agentload.replay.progress import Progress
    from agentload.replay.report import write_report
    from agentload.replay.results import prepare_out_dir, write_results
    from agentload.replay.run import run_replay
    from agentload.replay.summary import write_summary
    from agentload.replay.verdict import ExitCode, verdict

    cfg = config_from_options(
        {
            "traces": [str(t) for t in traces],
            "endpoint": endpoint,
            "model": model,
            "engine": engine,
            "extras": not no_extras,
            "levels": sweep if sweep is not None else [concurrency],
            "arrival_rate": arrival_rate,
            "duration_s": duration,
            "sessions": sessions,
            "gap_scale": gap_scale,
            **({"salt_at": salt_at} if salt_at is not None else {}),
            **({"salt": False} if no_salt else {}),
            "start_at": start_at or "random",
            "slo": slo,
            "gpus": gpus,
            "power_watts": power_watts,
            "power": power,
            "scrape_metrics": scrape_metrics,
            "target_tps_user": target_tps_user or [160.0],
            "timeout_s": timeout,
            "max_error_rate": max_error_rate,
            "seed": seed,
            "schedule": schedule,
            "time_scale": time_scale,
            "api": api,
            "tokenizer": tokenizer,
            "session_header": session_header,
            "session_field": session_field,
            "max_context": max_context,
            "fit": fit,
            "ray": ray,
            "workers": workers,
        },
        levels_option="--sweep" if sweep is not None else "--concurrency",
    )
    if out is not None:
        prepare_out_dir(out)
    warning = userinfo_warning(cfg.endpoint)
    if warning:
        print(one_line(warning), file=sys.stderr)
    note = start_at_note(cfg) if start_at is None else None
    if note is not None:
        print(note, file=sys.stderr)
    if cfg.ray is not None:
        from agentload.replay.sharded import run_sharded

        results = asyncio.run(run_sharded(cfg, Progress()))
    else:
        results = asyncio.run(run_replay(cfg, Progress()))
    console = Console()
    _print_summary(console, results)
    if out is not None:
        with write_errors(out, option="--out"):
            paths = [write_results(results, out), write_summary(results, out)]
            paths += write_report([results], out)
        console.print(f"wrote {', '.join(str(p) for p in paths[:3])} and {len(paths) - 3} PNGs")
    end = verdict(results)
    if end.line is not None:
        console.print(end.line, highlight=False, soft_wrap=True)
    if end.code != ExitCode.OK:
        raise typer.Exit(int(end.code))


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


# ReplayConfig fields whose option is not ``--`` + the field name with dashes.
_OPTIONS = {"duration_s": "--duration", "timeout_s": "--timeout", "extras": "--no-extras"}
_OPTIONS |= {"salt": "--no-salt", "traces": "TRACES"}


def config_from_options(raw: dict[str, Any], levels_option: str) -> ReplayConfig:
    """The ``ReplayConfig`` of the options given; a bad value is one ``ConfigError`` line that
    names the option and the value as given: ``--sweep '1,x': write the ...``."""
    try:
        return ReplayConfig.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc, msg = err["loc"], err["msg"]
        if not loc:  # a check across options: its message names them
            raise ConfigError(msg) from None
        field = str(loc[0])
        option = levels_option if field == "levels" else _OPTIONS.get(field)
        value = raw.get(field)
        if isinstance(value, list) and len(loc) > 1 and isinstance(loc[1], int):
            value = value[loc[1]]  # one repeated value (or the one --concurrency)
        shown = repr(value) if isinstance(value, str) else str(value)
        raise ConfigError(f"{option or '--' + field.replace('_', '-')} {shown}: {msg}") from None


def _print_summary(console: Console, results: ResultsDocument) -> None:
    from agentload.replay.report import headlines, text_summary

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
    from agentload.replay.report import write_report
    from agentload.replay.results import load_results, prepare_out_dir

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
    from agentload.replay.compare import compare_results
    from agentload.replay.results import load_results

    lines, _ = compare_results(load_results(a), load_results(b))
    for line in lines:
        console.print(line, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``replay``, ``report`` and ``compare`` to the ``agentload`` command."""
    app.command("replay")(replay)
    app.command("report")(report)
    app.command("compare")(compare)
