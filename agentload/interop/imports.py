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

import sys
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import ConfigError
from agentload.infile import why_unreadable
from agentload.interop.formats import IMPORTS, import_format

__all__ = ["FORMATS", "detect_format", "import_trace"]

FORMATS = tuple(f.name for f in IMPORTS)
_PEEK = 1 << 20  # bytes read to find a JSON file's first object (a Weka file is one object)


def import_trace(fmt: str, files: list[Path], out: Path, *, force: bool = False) -> str:
    """Import ``files`` of ``fmt`` (or ``auto``) into the trace ``out``; returns the summary
    line. ``out`` is refused up front when it is one of ``files`` or exists (without
    ``force``)."""
    if fmt == "auto":
        fmt, why = detect_format(files)
        print(f"auto: {fmt} ({why})", file=sys.stderr)
    return import_format(fmt).read(files, out, force=force)


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


def _large_object(head: bytes) -> Any:
    """A one-object file larger than the peek (a real Weka conversation runs to megabytes):
    the format its first bytes show, as ``{"format": NAME}``, else None."""
    for f in IMPORTS:
        if f.marker is not None and f.marker.match(head):
            return {_LARGE: f.name}
    return None


_LARGE = "\0large-object-format"


def detect_format(paths: list[Path]) -> tuple[str, str]:
    """The format of ``paths`` and why (see the module docstring); a one-line error when it is
    none of them."""
    path = _first_file(paths)
    obj = _first_object(path)
    if isinstance(obj, list) and obj:  # a JSON array of rows (OpenHands)
        obj = obj[0]
    found: str | None = None
    if isinstance(obj, dict) and _LARGE in obj:
        found = str(obj[_LARGE])
    elif isinstance(obj, dict):
        found = next((f.name for f in IMPORTS if f.detects(obj)), None)
    if found is None:
        raise ConfigError(
            f"{path}: not a format trace import reads ({', '.join(FORMATS)}); name the format"
        )
    return found, f"detected from {path}"
