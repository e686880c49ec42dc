"""The two sides of ``agentload realism``: traces (ours) and a corpus (anything agentload
imports), loaded into ``Trace`` objects the statistics read.

A path that is an agentload trace (``*.agentload.jsonl[.zst]``, or a directory holding such
files) is read as it is. Anything else is imported first (``trace import auto``: a Weka
directory, TraceLab, Mooncake, Claude Code logs, Codex rollouts ...) into a temporary trace that
is removed afterwards; the detected format is said on stderr.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from agentload.errors import ConfigError
from agentload.trace.paths import TRACE_SUFFIXES, trace_files
from agentload.trace.timeline import describe_waits
from agentload.trace.trace import Trace, load_trace

__all__ = ["by_design", "load_side", "waits_of"]


def _is_trace_path(p: Path) -> bool:
    if p.is_dir():
        return any(f.is_file() and f.name.endswith(TRACE_SUFFIXES) for f in p.iterdir())
    return p.name.endswith(TRACE_SUFFIXES)


@contextmanager
def load_side(paths: Sequence[str]) -> Iterator[list[Trace]]:
    """The traces of ``paths`` (module docstring); an import's temporary file lives as long as
    the context."""
    if not paths:
        raise ConfigError("give at least one trace or corpus path")
    missing = [p for p in paths if not Path(p).exists()]
    if missing:
        raise ConfigError(f"{missing[0]}: no such file or directory")
    given = [Path(p) for p in paths]
    traces = [p for p in given if _is_trace_path(p)]
    others = [p for p in given if not _is_trace_path(p)]
    out = [load_trace(f) for f in trace_files(traces)] if traces else []
    if not others:
        yield out
        return
    from agentload.interop.imports import import_trace

    with tempfile.TemporaryDirectory(prefix="agentload-realism-") as tmp:
        target = Path(tmp) / "corpus.agentload.jsonl.zst"
        line = import_trace("auto", others, target)
        print(f"realism: imported {line.split(': ', 1)[-1]}", file=sys.stderr)
        out.append(load_trace(target))
        yield out


def by_design(traces: Sequence[Trace]) -> dict[str, str]:
    """The statistics the traces' scenarios depart from on purpose (``by_design``), and why."""
    out: dict[str, str] = {}
    for t in traces:
        cfg = t.header.scenario_config or {}
        declared = cfg.get("by_design") or {}
        if isinstance(declared, dict):
            out.update({str(k): str(v) for k, v in declared.items()})
    return out


def waits_of(traces: Sequence[Trace]) -> list[str]:
    """What the traces' modeled waits were drawn from (one line per distinct model)."""
    seen: dict[str, None] = {}
    for t in traces:
        if t.header.waits is not None:
            seen[describe_waits(t)] = None
    return list(seen)
