"""``agentload trace import|export|redact``: the command lines of ``agentload.interop``.

Every command streams its input, prints one summary line per output on stdout, and turns bad
input into one line on stderr (file, record, field) and exit code 2 (``AgentloadError`` is caught
by the root CLI).
"""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from agentload.errors import ConfigError
from agentload.interop.formats import EXPORTS, IMPORTS, export_format
from agentload.trace.cli import trace_app

__all__ = ["register"]

_FORCE = typer.Option(
    "--force",
    help="Replace -o/--out if it exists (it is written beside and renamed into place when whole; "
    "an input is never an output).",
)


ImportFormat = StrEnum(  # type: ignore[misc]
    "ImportFormat", [(f.name.replace("-", "_"), f.name) for f in IMPORTS] + [("auto", "auto")]
)
"""The formats of ``trace import`` (``formats.IMPORTS``), and ``auto``."""
ExportFormat = StrEnum(  # type: ignore[misc]
    "ExportFormat", [(f.name, f.name) for f in EXPORTS]
)
"""The formats of ``trace export`` (``formats.EXPORTS``)."""
_IMPORT_FILES = "; ".join(f"{f.name}: {f.files}" for f in IMPORTS)
_EXPORT_OUT = "; ".join(f"{f.name}: {f.out}" for f in EXPORTS)


@trace_app.command("import")
def import_(
    fmt: Annotated[ImportFormat, typer.Argument(help="Source format.", metavar="FORMAT")],
    files: Annotated[
        list[Path],
        typer.Argument(
            help=f"Source files or directories ({_IMPORT_FILES}).",
        ),
    ],
    out: Annotated[Path, typer.Option("-o", "--out", help="Output trace (*.agentload.jsonl.zst).")],
    force: Annotated[bool, _FORCE] = False,
) -> None:
    """Import an agent's own logs, an agent dataset or another tool's trace as an agentload
    trace that replay can send: Claude Code and Codex logs, OpenHands, MLPerf and Harbor ATIF
    trajectories and OTel GenAI spans with their full text; Weka, TraceLab and Mooncake
    token-count traces and NVIDIA Dynamo request traces content-free. auto detects the format and says which."""
    from agentload.interop.imports import import_trace

    print(import_trace(fmt.value, files, out, force=force))


@trace_app.command("export")
def export(
    fmt: Annotated[ExportFormat, typer.Argument(help="Target format.", metavar="FORMAT")],
    traces: Annotated[list[Path], typer.Argument(help="agentload traces (or directories).")],
    out: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--out",
            help=_EXPORT_OUT + ".",
        ),
    ] = None,
    content: Annotated[
        bool, typer.Option("--content", help="otel: include message content in the spans.")
    ] = False,
    otlp_endpoint: Annotated[
        str | None,
        typer.Option(
            "--otlp-endpoint",
            help="otel: send the spans over OTLP/HTTP to this URL (e.g. "
            "http://127.0.0.1:4318/v1/traces) instead of writing a file.",
        ),
    ] = None,
    force: Annotated[bool, _FORCE] = False,
) -> None:
    """Export agentload traces to a format other tools read."""
    from agentload.interop.exports import export_trace
    from agentload.trace.paths import trace_files

    chosen = export_format(fmt.value)
    if otlp_endpoint is not None and "endpoint" not in chosen.takes:
        raise ConfigError("--otlp-endpoint: only with the otel format")
    if content and "content" not in chosen.takes:
        raise ConfigError("--content: only with the otel format")
    if out is None and otlp_endpoint is None:
        raise ConfigError("-o/--out: required (or, for otel, --otlp-endpoint)")
    for line in export_trace(
        fmt.value,
        trace_files(traces),
        out,
        content=content,
        otlp_endpoint=otlp_endpoint,
        force=force,
    ):
        print(line)


@trace_app.command("redact")
def redact(
    trace: Annotated[Path, typer.Argument(help="agentload trace to redact.")],
    out: Annotated[Path, typer.Option("-o", "--out", help="Redacted trace to write.")],
    salt_env: Annotated[
        str | None,
        typer.Option(
            "--salt-env",
            help="Environment variable holding the salt of the block ids (the same salt gives "
            "the same ids across traces); default: a random salt, never written.",
        ),
    ] = None,
    hash_tool_names: Annotated[
        bool,
        typer.Option(
            "--hash-tool-names",
            help="Replace tool names by salted pseudonyms too (default: keep them; they are the "
            "tool vocabulary that trace stats counts by).",
        ),
    ] = False,
    force: Annotated[bool, _FORCE] = False,
) -> None:
    """Write the same trace with every text replaced by lengths and salted block ids."""
    from agentload.interop.redact import redact_trace

    if salt_env is not None:
        value = os.environ.get(salt_env)
        if not value:
            raise ConfigError(f"--salt-env {salt_env}: the variable is unset or empty")
        salt = value.encode()
    else:
        salt = os.urandom(32)
    print(redact_trace(trace, out, salt, hash_tool_names=hash_tool_names, force=force))


def register(app: typer.Typer) -> None:
    """The commands live on the ``trace`` group; nothing to add to the root."""
