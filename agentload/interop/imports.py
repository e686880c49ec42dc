"""``agentload trace import``: dispatch to the format's importer, or detect the format (``auto``).

``auto`` reads the first object of the first source file (a directory: its first ``*.jsonl``,
else its first ``*.json``) and picks the format it belongs to: a Codex rollout line
(``session_meta`` with a ``payload``), a Claude Code log entry (``sessionId``), OTLP JSON
(``resourceSpans``), a Harbor ATIF trajectory (``schema_version`` ``ATIF-...``), an MLPerf
agentic row (``conversation_id``, ``turn``, ``role``), an OpenHands / SWE-rebench row (a
``trajectory`` of messages), a Weka file (an object with ``requests``), a Mooncake line
(``hash_ids`` and ``input_length``), a TraceLab round (``round_index`` and
``input_tokens_total``) or a Dynamo request-trace record (``schema``
``dynamo.request.trace...``, bare or as a file sink's ``event``). It says which on stderr.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import ConfigError
from agentload.infile import why_unreadable
from agentload.outfile import check_output

__all__ = ["FORMATS", "detect_format", "import_trace"]

FORMATS = (
    "claude-code",
    "codex",
    "openhands",
    "mlperf",
    "atif",
    "otel",
    "weka",
    "tracelab",
    "mooncake",
    "dynamo",
)
_PEEK = 1 << 20  # bytes read to find a JSON file's first object (a Weka file is one object)


def import_trace(fmt: str, files: list[Path], out: Path, *, force: bool = False) -> str:
    """Import ``files`` of ``fmt`` (or ``auto``) into the trace ``out``; returns the summary
    line. ``out`` is refused up front when it is one of ``files`` or exists (without
    ``force``)."""
    if fmt == "auto":
        fmt, why = detect_format(files)
        print(f"auto: {fmt} ({why})", file=sys.stderr)
    if fmt == "claude-code":
        from agentload.interop.claude_code import import_claude_code

        return import_claude_code(files, out, force=force)
    if fmt == "codex":
        from agentload.interop.codex import import_codex

        return import_codex(files, out, force=force)
    if fmt == "openhands":
        from agentload.interop.openhands import import_openhands

        return import_openhands(files, out, force=force)
    if fmt == "mlperf":
        from agentload.interop.mlperf import import_mlperf

        return import_mlperf(files, out, force=force)
    if fmt == "atif":
        from agentload.interop.atif import import_atif

        return import_atif(files, out, force=force)
    if fmt == "otel":
        from agentload.interop.otel_in import import_otel

        return import_otel(files, out, force=force)
    check_output(out, files, force=force)
    if fmt == "weka":
        from agentload.interop.weka import import_weka

        return import_weka(files, out)
    if fmt == "tracelab":
        from agentload.interop.tracelab import import_tracelab

        return import_tracelab(files, out)
    if fmt == "mooncake":
        from agentload.interop.mooncake import import_mooncake

        return import_mooncake(files, out)
    if fmt == "dynamo":
        from agentload.interop.dynamo_import import import_dynamo

        return import_dynamo(files, out)
    raise AssertionError(fmt)


def _first_file(paths: list[Path]) -> Path:
    for p in paths:
        if p.is_file():
            return p
        if p.is_dir():
            for pattern in ("*.jsonl", "*.json", "*.jsonl.gz"):
                found = next((q for q in sorted(p.rglob(pattern)) if q.is_file()), None)
                if found is not None:
                    return found
        elif not p.is_file():
            raise ConfigError(f"{p}: {why_unreadable(p)}")
    raise ConfigError(
        f"{', '.join(map(str, paths))}: no *.jsonl or *.json file to detect the format from"
    )


def _first_object(path: Path) -> Any:
    import gzip

    opener: Any = gzip.open if path.name.endswith(".gz") else open
    try:
        with opener(path, "rb") as f:
            head = f.read(_PEEK)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    for line in head.splitlines():
        if line.strip():
            try:
                return orjson.loads(line)
            except orjson.JSONDecodeError:
                break
    try:
        return orjson.loads(head)
    except orjson.JSONDecodeError:
        return _large_object(head)


_MARKERS = (
    ("weka", re.compile(rb'^\s*\{.*"requests"\s*:\s*\[.*"hash_ids"\s*:', re.S)),
    ("otel", re.compile(rb'^\s*\{\s*"resourceSpans"\s*:', re.S)),
    ("atif", re.compile(rb'^\s*\{.*"schema_version"\s*:\s*"ATIF-', re.S)),
)


def _large_object(head: bytes) -> Any:
    """A one-object file larger than the peek (a real Weka conversation runs to megabytes):
    the format its first bytes show, as ``{"format": NAME}``, else None."""
    for name, pattern in _MARKERS:
        if pattern.match(head):
            return {_LARGE: name}
    return None


_LARGE = "\0large-object-format"


def detect_format(paths: list[Path]) -> tuple[str, str]:
    """The format of ``paths`` and why (see the module docstring); a one-line error when it is
    none of them."""
    from agentload.interop.atif import looks_like_atif
    from agentload.interop.claude_code import looks_like_claude_code
    from agentload.interop.codex import looks_like_codex
    from agentload.interop.dynamo_trace import looks_like_dynamo
    from agentload.interop.mlperf import looks_like_mlperf
    from agentload.interop.openhands import looks_like_openhands
    from agentload.interop.otel_in import looks_like_otel

    path = _first_file(paths)
    obj = _first_object(path)
    if isinstance(obj, list) and obj:  # a JSON array of rows (OpenHands)
        obj = obj[0]
    found: str | None = None
    if isinstance(obj, dict) and _LARGE in obj:
        found = str(obj[_LARGE])
    elif isinstance(obj, dict):
        if looks_like_codex(obj):
            found = "codex"
        elif looks_like_claude_code(obj):
            found = "claude-code"
        elif looks_like_otel(obj):
            found = "otel"
        elif looks_like_atif(obj):
            found = "atif"
        elif looks_like_mlperf(obj):
            found = "mlperf"
        elif looks_like_openhands(obj):
            found = "openhands"
        elif looks_like_dynamo(obj):
            found = "dynamo"
        elif isinstance(obj.get("requests"), list):
            found = "weka"
        elif "hash_ids" in obj and "input_length" in obj:
            found = "mooncake"
        elif "round_index" in obj and "input_tokens_total" in obj:
            found = "tracelab"
    if found is None:
        raise ConfigError(
            f"{path}: not a format trace import reads ({', '.join(FORMATS)}); name the format"
        )
    return found, f"detected from {path}"
