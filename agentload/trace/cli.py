"""``agentload trace validate|stats|inspect``.

* ``validate FILE...``: record counts per type, and for a content-free trace where it came
  from (``content: imported from ...`` / ``content: redacted ...``); exit 0 when every file is whole, 1 when one is
  readable but truncated (a killed run), 2 when one is damaged (one line on stderr naming
  ``file:line``, the field and the reason).
* ``stats FILE... [--json] [--plot PNG]``: the numbers of ``agentload.trace.stats``, per
  file (``--json``: one object per file, one per line).
* ``stats FILE... --compare OTHER... [--labels A,B] [--tolerance T] [--json] [--plot PNG]``:
  the FILEs pooled against the OTHER traces pooled, statistic by statistic
  (``agentload.trace.comparison``); ``--plot`` draws the distributions overlaid.

A directory given as FILE stands for its ``*.agentload.jsonl[.zst]`` files.
* ``inspect FILE [--agent ID] [--call N]``: the agent tree and one agent's calls, or one call
  in full, blob references resolved.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import orjson
import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentload.errors import ConfigError
from agentload.outfile import check_output
from agentload.trace.schema import Header

__all__ = ["register", "trace_app"]

trace_app = typer.Typer(
    name="trace",
    help="Validate, summarise and inspect trace files (*.agentload.jsonl.zst, *.jsonl).",
    no_args_is_help=True,
)

FileArg = Annotated[Path, typer.Argument(help="Trace file (*.agentload.jsonl.zst or *.jsonl).")]
FilesArg = Annotated[
    list[Path],
    typer.Argument(
        help="Trace files (*.agentload.jsonl.zst or *.jsonl), or directories holding them."
    ),
]


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:  # pipes and CI logs: wide enough for the tables
        console = Console(highlight=False, width=max(console.width, 160))
    return console


@trace_app.command()
def validate(files: FilesArg) -> None:
    """Read each whole file and report record counts.

    Exit code 0: all whole. 1: one is readable but truncated (every complete record is
    usable). 2: one is damaged (one line on stderr: file:line, field, reason).
    """
    from agentload.trace.paths import trace_files

    truncated = [_validate_one(f) for f in trace_files(files)]
    if any(truncated):
        raise typer.Exit(1)


def _validate_one(file: Path) -> bool:
    """Print one file's counts; True when it is truncated."""
    from agentload.trace.validate import validate_trace

    report = validate_trace(file)
    console = _console()
    console.print(f"[bold]{escape(str(file))}[/]")
    table = Table()
    table.add_column("record type")
    table.add_column("count", justify="right")
    for rtype, n in sorted(report.counts.items()):
        table.add_row(escape(rtype), str(n))
    table.add_row("[bold]total[/]", f"[bold]{report.records}[/]")
    console.print(table)
    if report.header is not None:
        console.print(
            f"schema {escape(report.header.schema_)}, "
            f"written by agentload {escape(report.header.tool_version)}"
        )
        content = content_line(report.header)
        if content is not None:
            console.print(escape(content))
    if report.truncated is not None:
        console.print(f"TRUNCATED: {escape(str(report.truncated))}")
        return True
    for warning in report.warnings:
        console.print(escape(warning))
    console.print("OK: whole file")
    return False


def content_line(header: Header) -> str | None:
    """What ``validate`` says of a trace's content when it is not one ``generate`` or ``record``
    wrote (None for those): ``content: imported from FORMAT (FILES, block size N), no message
    text``, ``content: imported from FORMAT (FILES), message text as logged; derived: ...`` or
    ``content: redacted (no message text)``."""
    src = header.source
    if src is not None:
        names = [Path(f).name for f in src.files]
        total = src.files_total or len(names)
        more = total - min(3, len(names))
        shown = ", ".join(names[:3]) + (f" and {more:,} more" if more > 0 else "")
        if header.redacted:
            size = f", block size {src.block_size}" if src.block_size else ""
            return f"content: imported from {src.format} ({shown}{size}), no message text"
        derived = "; derived: " + ", ".join(sorted(src.derived)) if src.derived else ""
        return f"content: imported from {src.format} ({shown}), message text as logged{derived}"
    if header.redacted:
        return "content: redacted (no message text)"
    return None


JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]
PlotOpt = Annotated[
    Path | None,
    typer.Option(
        "--plot",
        help="Write a PNG of prompt tokens vs call index per agent "
        "(several files: NAME-1.png, NAME-2.png, ...); with --compare, the distributions "
        "of both sides overlaid, one panel per statistic.",
    ),
]
CompareOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--compare",
        help="Compare the FILEs (pooled) with these traces (pooled; files or directories, "
        "the option repeated for more): p10/p50/p90 per statistic, the ratio of the "
        "medians and the Kolmogorov-Smirnov distance.",
    ),
]
LabelsOpt = Annotated[
    str | None,
    typer.Option("--labels", help="Names of the two sides, 'A,B' (default: file names)."),
]
ToleranceOpt = Annotated[
    float,
    typer.Option(
        "--tolerance", min=0.0, help="A ratio of medians within 1 ± this counts as matching."
    ),
]
ForceOpt = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace the --plot PNG(s) if they exist (written beside and renamed into "
        "place when whole).",
    ),
]


@trace_app.command()
def stats(
    files: FilesArg,
    json_: JsonOpt = False,
    plot: PlotOpt = None,
    compare: CompareOpt = None,
    labels: LabelsOpt = None,
    tolerance: ToleranceOpt = 0.25,
    force: ForceOpt = False,
) -> None:
    """Summary numbers per file: agents, calls, tool times, gaps, token growth, prefix reuse,
    wall time; or, with --compare, two sets of traces side by side."""
    from agentload.trace.paths import trace_files

    if plot is not None and plot.suffix.lower() != ".png":
        raise ConfigError(f"--plot {plot}: the plot is written as PNG; name it *.png")
    paths = trace_files(files)
    others = trace_files(compare) if compare else []
    targets = _plot_targets(plot, 1 if compare else len(paths))
    for target in targets:  # before any trace is read: a bad --plot is one line at once
        check_output(target, [*paths, *others], option="--plot", force=force)
    if compare:
        _compare(paths, others, json_, plot, labels, tolerance, force)
        return
    if labels is not None:
        raise ConfigError("--labels names the two sides of --compare; give --compare too")
    for i, path in enumerate(paths, 1):
        png = targets[i - 1] if plot is not None else None
        _stats_one(path, many=len(paths) > 1, json_=json_, plot=png, force=force)


def _stats_one(path: Path, *, many: bool, json_: bool, plot: Path | None, force: bool) -> None:
    """One trace's numbers, as tables or one JSON line (``many``: named, being one of several),
    and its context-growth PNG written to ``plot``, if given."""
    from agentload.trace.stats import compute_stats
    from agentload.trace.trace import load_trace

    trace = load_trace(path)
    result = compute_stats(trace)
    if json_:
        result = {"file": str(path), **result} if many else result
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        console = _console()
        if many:
            console.print(f"[bold]{escape(str(path))}[/]")
        from agentload.trace.view import render_stats

        render_stats(result, console)
    if plot is not None:
        from agentload.trace.plot import plot_context_growth

        out = plot_context_growth(trace, plot, force=force)
        which = f" ({path})" if many else ""
        print(f"plot written to {out}{which}", file=sys.stderr)


def _side_label(paths: list[Path]) -> str:
    if len(paths) == 1:
        return paths[0].name.split(".")[0]
    parents = {p.parent for p in paths}
    folder = parents.pop().name if len(parents) == 1 else "traces"
    return f"{folder} ({len(paths)} files)"


def _plot_targets(plot: Path | None, n: int) -> list[Path]:
    """The PNGs ``--plot`` stands for: itself for one plot, ``NAME-1.png`` ... for several."""
    if plot is None:
        return []
    if n == 1:
        return [plot]
    return [plot.with_name(f"{plot.stem}-{i}{plot.suffix}") for i in range(1, n + 1)]


def _compare(
    a_paths: list[Path],
    b_paths: list[Path],
    json_: bool,
    plot: Path | None,
    labels: str | None,
    tolerance: float,
    force: bool,
) -> None:
    from agentload.trace.comparison import compare, render_comparison
    from agentload.trace.samples import Samples, trace_samples
    from agentload.trace.trace import load_trace

    if labels is not None:
        names = [n.strip() for n in labels.split(",")]
        if len(names) != 2 or not all(names):
            raise ConfigError(f"--labels {labels!r}: give two names, 'A,B'")
        pair = (names[0], names[1])
    else:
        pair = (_side_label(a_paths), _side_label(b_paths))
        if pair[0] == pair[1]:
            pair = (f"A: {pair[0]}", f"B: {pair[1]}")
    sides = []
    for paths in (a_paths, b_paths):
        pooled = Samples()
        for path in paths:
            pooled.extend(trace_samples(load_trace(path)))
        sides.append(pooled)
    result = compare(sides[0], sides[1], tolerance=tolerance)
    if json_:
        out = {
            "a": {"label": pair[0], "files": [str(p) for p in a_paths]},
            "b": {"label": pair[1], "files": [str(p) for p in b_paths]},
            **result,
        }
        sys.stdout.write(orjson.dumps(out).decode() + "\n")
    else:
        render_comparison(result, _console(), pair)
    if plot is not None:
        from agentload.trace.compare_plot import plot_comparison

        written = plot_comparison(sides[0], sides[1], result, plot, pair, force=force)
        print(f"plot written to {written}", file=sys.stderr)


@trace_app.command()
def inspect(
    file: FileArg,
    agent: Annotated[
        str | None,
        typer.Option(help="Agent id (or unique prefix); default: the first orchestrator."),
    ] = None,
    call: Annotated[
        int | None, typer.Option(help="Show call N (its seq within the agent) in full.", min=0)
    ] = None,
) -> None:
    """Human view: the agent tree and one agent's calls (roles, tokens, tool calls, gaps)."""
    from agentload.trace.trace import load_trace
    from agentload.trace.view import render_agent, render_call, render_overview, resolve_agent

    trace = load_trace(file)
    console = _console()
    agent_id = resolve_agent(trace, agent)
    if call is None:
        render_overview(trace, console)
        render_agent(trace, agent_id, console)
        return
    calls = trace.calls_of(agent_id)
    match = [c for c in calls if c.seq == call]
    if not match:
        raise ConfigError(
            f"agent {agent_id} has no call {call} (calls: "
            + (f"0..{calls[-1].seq})" if calls else "none)")
        )
    render_call(trace, match[0], console)


def register(app: typer.Typer) -> None:
    """Add the ``trace`` command group to the root CLI."""
    app.add_typer(trace_app, name="trace")
