"""Paths on the command line: trace files as given, directories as the traces inside them
(output places: ``agentload.outfile``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from agentload.errors import ConfigError
from agentload.infile import why_unreadable

__all__ = ["TRACE_SUFFIXES", "trace_files"]

TRACE_SUFFIXES = (".agentload.jsonl.zst", ".agentload.jsonl")
"""The names ``generate`` writes; a directory argument stands for its files named so."""


def trace_files(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """Each file as given (any name), each directory as its ``*.agentload.jsonl[.zst]`` files
    (sorted, not recursive); duplicates dropped, order kept. ``ConfigError`` for no path, a
    missing path, or a directory without traces."""
    if not paths:
        raise ConfigError("give at least one trace file or directory")
    out: dict[Path, None] = {}
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = sorted(
                f for f in p.iterdir() if f.is_file() and f.name.endswith(TRACE_SUFFIXES)
            )
            if not found:
                raise ConfigError(
                    f"{p}: no trace files (*.agentload.jsonl[.zst]) in this directory"
                )
            out.update(dict.fromkeys(found))
        elif p.is_file():
            out[p] = None
        else:
            why = why_unreadable(p)
            raise ConfigError(f"{p}: {why.replace('such file', 'such trace file')}")
    return list(out)
