"""Import: NVIDIA Dynamo's request trace into a trace: ``dynamo_trace`` reads the records,
``dynamo_tree`` builds the sessions, agents, calls and tool calls, this writes them."""

from __future__ import annotations

import sys
from pathlib import Path

from agentload.errors import TraceFormatError
from agentload.interop.content_free import Deviations, Progress
from agentload.interop.dynamo_files import sources
from agentload.interop.dynamo_trace import DEFAULT_BLOCK_SIZE, block_size_of, read_rows
from agentload.interop.dynamo_tree import Clock, build_records
from agentload.interop.import_io import import_header, summary, write_trace
from agentload.trace.schema import ClockAnchor

__all__ = ["import_dynamo"]


def import_dynamo(files: list[Path], out: Path, *, deviations: Deviations | None = None) -> str:
    """Import ``files`` into the trace ``out``; returns the summary line. The deviations from
    the schema that were accepted are counted into ``deviations`` when given (the caller shows
    ``deviations.warning()``), else printed as one warning line on stderr; either way they are
    recorded in the header's ``source.deviations``."""
    paths = sources(files)
    dev = deviations if deviations is not None else Deviations("dynamo")
    rows = read_rows(paths, dev)
    if not rows.requests:
        what = "no request_end records" if rows.lines else "no records (an empty file)"
        raise TraceFormatError(f"{paths[0] if len(paths) == 1 else 'the files'}: {what}")
    block_size = block_size_of(rows.requests, DEFAULT_BLOCK_SIZE)
    model = next((r.model for r in rows.requests if r.model), None)
    header = import_header("dynamo", paths, block_size, "global", rows.lines, model)
    t0_ms = min(r.received_ms for r in rows.requests)
    mono = header.clock.mono_ns
    header.clock = ClockAnchor(
        unix_ns=round(t0_ms * 1e6), mono_ns=mono
    )  # the first request's wall time
    progress = Progress("importing dynamo", total=len(rows.requests))
    records = build_records(rows, Clock(mono, t0_ms), progress)
    counts = write_trace(out, header, records, progress, dev)
    if deviations is None and (line := dev.warning()):
        print(line, file=sys.stderr)
    notes = "".join(f"; {n:,} {why}" for why, n in sorted(rows.left_out.items()))
    return summary(out, counts, header) + notes
