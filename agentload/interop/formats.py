"""The formats ``trace import`` reads and ``trace export`` writes, one entry each: its name, the
files it takes (the command's help), how ``auto`` tells it from its first object, and its reader
or writer (imported only when used). Adding a format is its module plus its entry here: the
command line, ``auto`` and the dispatch read these tables.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentload.outfile import check_output

__all__ = ["EXPORTS", "IMPORTS", "ExportFormat", "ImportFormat", "export_format", "import_format"]


def _call(target: str) -> Callable[..., Any]:
    """``module:function``, imported now."""
    module, _, name = target.partition(":")
    fn: Callable[..., Any] = getattr(importlib.import_module(module), name)
    return fn


@dataclass(frozen=True)
class ImportFormat:
    """One source format of ``trace import``."""

    name: str
    files: str
    """What to give it (the command's help)."""
    reader: str
    """``module:function``: ``reader(files, out) -> summary line`` (with ``force=`` when
    ``full_text``)."""
    full_text: bool
    """It reads the agents' own text (it checks its output itself, and takes ``force``); else
    it is content-free (token counts, block ids) and its output is checked up front."""
    detector: str | Callable[[dict[str, Any]], bool]
    """``auto``: whether a file's first object is of this format (``module:function`` or a
    function)."""
    marker: re.Pattern[bytes] | None = None
    """``auto`` for a one-object file larger than the peek: its first bytes."""

    def read(self, files: list[Path], out: Path, *, force: bool) -> str:
        """Import ``files`` into the trace ``out``; the summary line."""
        reader = _call(self.reader)
        if self.full_text:
            return str(reader(files, out, force=force))
        check_output(out, files, force=force)
        return str(reader(files, out))

    def detects(self, first: dict[str, Any]) -> bool:
        detect = _call(self.detector) if isinstance(self.detector, str) else self.detector
        return bool(detect(first))


def _weka(first: dict[str, Any]) -> bool:
    return isinstance(first.get("requests"), list)


def _mooncake(first: dict[str, Any]) -> bool:
    return "hash_ids" in first and "input_length" in first


def _tracelab(first: dict[str, Any]) -> bool:
    return "round_index" in first and "input_tokens_total" in first


IMPORTS: tuple[ImportFormat, ...] = (
    ImportFormat(
        "codex",
        "~/.codex/sessions or rollout-*.jsonl",
        "agentload.interop.codex:import_codex",
        True,
        "agentload.interop.codex:looks_like_codex",
    ),
    ImportFormat(
        "claude-code",
        "~/.claude/projects, a project or session logs",
        "agentload.interop.claude_code:import_claude_code",
        True,
        "agentload.interop.claude_code_log:looks_like_claude_code",
    ),
    ImportFormat(
        "otel",
        "OTLP JSON / JSON Lines",
        "agentload.interop.otel_in:import_otel",
        True,
        "agentload.interop.otlp_json:looks_like_otel",
        re.compile(rb'^\s*\{\s*"resourceSpans"\s*:', re.S),
    ),
    ImportFormat(
        "atif",
        "trajectory *.json",
        "agentload.interop.atif:import_atif",
        True,
        "agentload.interop.atif_trajectory:looks_like_atif",
        re.compile(rb'^\s*\{.*"schema_version"\s*:\s*"ATIF-', re.S),
    ),
    ImportFormat(
        "mlperf",
        "*.jsonl",
        "agentload.interop.mlperf:import_mlperf",
        True,
        "agentload.interop.mlperf:looks_like_mlperf",
    ),
    ImportFormat(
        "openhands",
        "*.jsonl or *.json rows",
        "agentload.interop.openhands:import_openhands",
        True,
        "agentload.interop.openhands:looks_like_openhands",
    ),
    ImportFormat(
        "dynamo",
        "*.jsonl, *.jsonl.gz or the DYN_REQUEST_TRACE_OUTPUT_PATH prefix of the segments",
        "agentload.interop.dynamo_import:import_dynamo",
        False,
        "agentload.interop.dynamo_trace:looks_like_dynamo",
    ),
    ImportFormat(
        "weka",
        "*.json",
        "agentload.interop.weka:import_weka",
        False,
        _weka,
        re.compile(rb'^\s*\{.*"requests"\s*:\s*\[.*"hash_ids"\s*:', re.S),
    ),
    ImportFormat(
        "mooncake", "*.jsonl", "agentload.interop.mooncake:import_mooncake", False, _mooncake
    ),
    ImportFormat(
        "tracelab", "*.jsonl", "agentload.interop.tracelab:import_tracelab", False, _tracelab
    ),
)
"""Every import format, in the order ``auto`` tries them."""


@dataclass(frozen=True)
class ExportFormat:
    """One target format of ``trace export``."""

    name: str
    out: str
    """What ``-o/--out`` is for it (the command's help)."""
    writer: str
    """``module:function``: ``writer(traces, out, **options) -> summary lines``."""
    takes: frozenset[str] = frozenset()
    """The options its writer takes besides ``traces`` and ``out``: ``force``, ``content``,
    ``endpoint`` (the others are refused on the command line)."""
    out_optional: bool = False
    """It may send instead of writing (``--otlp-endpoint``)."""

    def write(self, traces: Sequence[Path], out: Path | None, **options: Any) -> list[str]:
        mine = {k: v for k, v in options.items() if k in self.takes}
        lines: list[str] = _call(self.writer)(traces, out, **mine)
        return lines


EXPORTS: tuple[ExportFormat, ...] = (
    ExportFormat(
        "weka", "a directory (one JSON file per session)", "agentload.interop.weka_out:export_weka"
    ),
    ExportFormat(
        "mooncake",
        "a .jsonl file",
        "agentload.interop.mooncake_out:export_mooncake",
        frozenset({"force"}),
    ),
    ExportFormat(
        "otel",
        "an OTLP JSON file",
        "agentload.interop.otel:export_otel",
        frozenset({"force", "content", "endpoint"}),
        out_optional=True,
    ),
)
"""Every export format."""


def import_format(name: str) -> ImportFormat:
    return next(f for f in IMPORTS if f.name == name)


def export_format(name: str) -> ExportFormat:
    return next(f for f in EXPORTS if f.name == name)
