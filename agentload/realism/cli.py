"""``agentload realism TRACES... --against CORPUS... [--json] [--markdown] [--plot PNG]
[--html FILE] [--gaps modeled|measured] [--strict]`` and ``agentload realism --against CORPUS
--fit``.

The table: one row per statistic (``agentload.realism.statistics``), ours beside the corpus,
the verdict and the distance (``judge``). ``--json`` prints the ``agentload.realism/1``
document as the last line; ``--markdown`` the table as docs/realism.md holds it; ``--strict``
exits 1 when a statistic is out of band (a by-design departure the scenario declares is not).
``--fit`` prints the modeled waits and the simulator's pacing fitted to the corpus, as a
scenario's ``waits:`` and ``pacing:`` blocks. The options are ``RealismOptions``'s fields.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path
from typing import Annotated, Any, Literal

import orjson
import typer
from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from agentload.errors import ConfigError
from agentload.options.flags import Flag, given, parameters, validated
from agentload.outfile import check_output
from agentload.trace.timeline import GapMode

__all__ = ["RealismOptions", "register"]


class RealismOptions(BaseModel):
    """What ``agentload realism`` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    traces: Annotated[
        list[str],
        Flag(
            "Our traces (*.agentload.jsonl.zst, or directories holding them).",
            argument=True,
            reads=list[str] | None,
        ),
    ] = Field(default_factory=list)
    against: Annotated[
        list[str],
        Flag(
            "The corpus: traces, or anything `trace import` reads (a Weka directory, TraceLab, "
            "Claude Code logs, Codex rollouts ...). Repeat for several paths.",
            reads=list[str] | None,
        ),
    ] = Field(default_factory=list)
    json_: Annotated[
        bool, Flag("Print the result as one JSON object (last line).", name="--json")
    ] = False
    markdown: Annotated[bool, Flag("Print the table as Markdown.")] = False
    plot: Annotated[Path | None, Flag("Write each statistic's CDFs to this PNG.")] = None
    html: Annotated[Path | None, Flag("Write the table and the CDFs to this HTML file.")] = None
    gaps: Annotated[
        Literal["modeled", "measured"],
        Flag(
            "Times on the modeled timeline (measured + the traces' modeled waits) or the "
            "measured one."
        ),
    ] = "modeled"
    labels: Annotated[str | None, Flag("Names of the two sides, 'OURS,CORPUS'.")] = None
    strict: Annotated[
        bool, Flag("Exit 1 when a statistic is out of band (not a by-design departure).")
    ] = False
    fit: Annotated[
        bool,
        Flag("Print the modeled waits and pacing fitted to the corpus (a scenario's blocks)."),
    ] = False
    source: Annotated[str | None, Flag("With --fit: how the corpus is named in the blocks.")] = None
    min_calls: Annotated[
        int | None,
        Flag(
            "With --fit: fit the pacing to the sessions whose root agent makes at least N "
            "calls (the class of session a scenario stands for).",
            metavar="N",
        ),
    ] = Field(default=None, ge=1)
    force: Annotated[bool, Flag("Replace an existing --plot/--html file.")] = False

    def pair(self) -> tuple[str, str] | None:
        """``--labels`` as (ours, corpus); None when not given."""
        if self.labels is None:
            return None
        names = [n.strip() for n in self.labels.split(",")]
        if len(names) != 2 or not all(names):
            raise ConfigError(f"--labels {self.labels!r}: give two names, 'OURS,CORPUS'")
        return names[0], names[1]


def _console() -> Console:
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=max(console.width, 170))
    return console


def realism(**kw: Any) -> None:
    """How real our traces look: each statistic of docs/realism.md, ours against a corpus of
    real sessions (the band: the corpus's p25-p75)."""
    opts = validated(RealismOptions, given(kw, RealismOptions))
    if not opts.against:
        raise ConfigError("--against: give the corpus to compare with (traces or a directory)")
    if opts.fit:
        _fit(opts.against, opts.source, opts.min_calls)
        return
    if not opts.traces:
        raise ConfigError("give our traces (or --fit to fit the corpus's waits)")
    _compare(opts)


def _compare(opts: RealismOptions) -> None:
    from agentload.realism.judge import Verdict
    from agentload.realism.render import markdown, render
    from agentload.realism.run import compare_paths

    pair = opts.pair()
    inputs = [Path(p) for p in [*opts.traces, *opts.against]]
    for out, option in ((opts.plot, "--plot"), (opts.html, "--html")):
        if out is not None:
            check_output(out, inputs, option=option, force=opts.force)
    result = compare_paths(opts.traces, opts.against, mode=GapMode(opts.gaps), labels=pair)
    doc = result.doc
    if opts.markdown:
        sys.stdout.write(markdown(doc))
    elif not opts.json_:
        render(doc, _console())
    if opts.plot is not None or opts.html is not None:
        from agentload.realism.figure import write_html, write_png

        if opts.plot is not None:
            path = write_png(doc, result.ours, result.corpus, opts.plot, force=opts.force)
            print(f"plot written to {path}", file=sys.stderr)
        if opts.html is not None:
            path = write_html(doc, result.ours, result.corpus, opts.html, force=opts.force)
            print(f"report written to {path}", file=sys.stderr)
    if opts.json_:
        data = doc.model_dump(mode="json", by_alias=True)
        sys.stdout.write(orjson.dumps(data).decode() + "\n")
    if opts.strict and any(r.verdict is Verdict.OUT for r in doc.rows):
        raise typer.Exit(1)


def _fit(corpus: list[str], source: str | None, min_calls: int | None) -> None:
    from agentload.realism.fit import fit_pacing, fit_waits, fitted_yaml
    from agentload.realism.sides import load_side

    with load_side(corpus) as traces:
        sessions = sum(len(t.sessions) for t in traces)
        name = f"{source or ', '.join(corpus)} ({sessions} sessions); agentload realism --fit"
        waits = fit_waits(traces, name)
        pacing = fit_pacing(traces, name, min_calls)
    sys.stdout.write(fitted_yaml(waits, pacing))


setattr(realism, "__signature__", inspect.Signature(parameters(RealismOptions)))  # noqa: B010 (typer reads it)


def register(app: typer.Typer) -> None:
    app.command("realism")(realism)
