"""Which files a Dynamo request-trace import reads (``sources``): the files given, a directory's
``*.jsonl`` and ``*.jsonl.gz``, or the numbered segments of a ``jsonl_gz`` sink's prefix (its
``DYN_REQUEST_TRACE_OUTPUT_PATH``), in order."""

from __future__ import annotations

import re
from pathlib import Path

from agentload.errors import ConfigError
from agentload.infile import why_unreadable

__all__ = ["sources"]

_SUFFIXES = (".jsonl", ".jsonl.gz")
_SEGMENT = re.compile(r"^(.*)\.([0-9]+)\.jsonl(?:\.gz)?$")


def _segment_key(p: Path) -> tuple[str, int, str]:
    m = _SEGMENT.match(p.name)
    return (m.group(1), int(m.group(2)), p.name) if m else (p.name, -1, p.name)


def _segments(prefix: Path) -> list[Path]:
    """The ``PREFIX.NNNNNN.jsonl.gz`` segments of a ``jsonl_gz`` sink's prefix, in order."""
    parent = prefix.parent
    if not parent.is_dir():
        return []
    name = prefix.name.removesuffix(".gz").removesuffix(".jsonl")
    found = [p for p in parent.glob(f"{name}.*.jsonl.gz") if _SEGMENT.match(p.name)]
    return sorted((p for p in found if _segment_key(p)[0] == name), key=_segment_key)


def sources(files: list[Path]) -> list[Path]:
    """The files to import: ``files``; a directory stands for its ``*.jsonl`` and
    ``*.jsonl.gz``, a path that is not there for the segments it is the prefix of (the
    ``DYN_REQUEST_TRACE_OUTPUT_PATH`` of a ``jsonl_gz`` sink)."""
    out: list[Path] = []
    for f in files:
        if f.is_dir():
            found = [p for p in f.iterdir() if p.is_file() and p.name.endswith(_SUFFIXES)]
            if not found:
                raise ConfigError(f"{f}: no Dynamo request traces (*.jsonl, *.jsonl.gz) here")
            out.extend(sorted(found, key=_segment_key))
        elif f.is_file():
            out.append(f)
        elif segs := _segments(f):
            out.extend(segs)
        else:
            raise ConfigError(f"{f}: {why_unreadable(f)}")
    return out
