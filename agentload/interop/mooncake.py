"""Import: Mooncake (``{"timestamp", "input_length", "output_length", "hash_ids"}`` per line).

Mooncake's traces are not sessionized: each line is one request arriving at ``timestamp``
milliseconds, with ``hash_ids`` naming its 512-token blocks across the whole file (global
scope). Each line becomes its own session (one agent, one call) whose recorded submit time is
the timestamp, so replay can run the sessions closed-loop or on the recorded schedule. The file
is read one line at a time and written as it is read.

What departs from the four-field schema without losing meaning (a key it does not name, such as
AIPerf's ``session_id``/``delay`` extensions, which are not read; ``hash_ids`` null; a number as
a string; an integral float for a length) is accepted and counted (``content_free.Deviations``),
one warning line at the end. A file without requests is an error.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentload.errors import TraceFormatError
from agentload.interop.content_free import (
    At,
    Deviations,
    Progress,
    extra_keys,
    need_ids,
    need_time,
    need_tokens,
)
from agentload.interop.import_io import (
    ContentFreeCall,
    count_lines,
    import_header,
    json_lines,
    need_file,
    ns,
    summary,
    write_trace,
)

__all__ = ["BLOCK_SIZE", "import_mooncake"]

BLOCK_SIZE = 512
"""Tokens per Mooncake hash id."""
_KEYS = frozenset(("timestamp", "input_length", "output_length", "hash_ids"))


def import_mooncake(files: list[Path], out: Path, *, deviations: Deviations | None = None) -> str:
    """Import ``files`` into the trace ``out``; returns the summary line. The deviations from
    the schema that were accepted are counted into ``deviations`` when given (the caller shows
    ``deviations.warning()``), else printed as one warning line on stderr; either way they are
    recorded in the header's ``source.deviations``."""
    paths = [need_file(f) for f in files]
    total = sum(count_lines(p) for p in paths)
    if not total:
        raise TraceFormatError(
            f"{paths[0] if len(paths) == 1 else 'the files'}: no requests (an empty file)"
        )
    dev = deviations if deviations is not None else Deviations("mooncake")
    header = import_header("mooncake", paths, BLOCK_SIZE, "global", total)
    progress = Progress("importing mooncake", total=total)
    records = _records(paths, header.clock.mono_ns, progress, dev)
    counts = write_trace(out, header, records, progress, dev)
    if deviations is None and (line := dev.warning()):
        print(line, file=sys.stderr)
    return summary(out, counts, header)


def _records(
    paths: list[Path], t0_ns: int, progress: Progress, dev: Deviations
) -> Iterator[dict[str, Any]]:
    i = 0
    for path in paths:
        name = str(path)
        for lineno, row in json_lines(path):
            at = At(name, f"line {lineno}", dev)
            if len(row) != 4 or row.keys() != _KEYS:
                extra_keys(row, _KEYS, at)
            ts_s = need_time(row, "timestamp", at, unit_s=1e-3)  # milliseconds
            n_in = need_tokens(row, "input_length", at)
            n_out = need_tokens(row, "output_length", at)
            ids = need_ids(row, "hash_ids", at, n_in, BLOCK_SIZE, nullable=False)
            submit = t0_ns + ns(ts_s)
            sid = f"mc{i}"
            aid = f"{sid}.a"
            yield {
                "type": "session",
                "id": sid,
                "start_ns": submit,
                "end_ns": submit,
                "meta": {"source_line": lineno},
            }
            yield {
                "type": "agent",
                "id": aid,
                "session_id": sid,
                "role": "orchestrator",
                "start_ns": submit,
                "end_ns": submit,
            }
            yield ContentFreeCall(
                call_id=f"{aid}.0",
                session_id=sid,
                agent_id=aid,
                seq=0,
                model="unknown",
                n_in=n_in,
                n_out=n_out,
                submit_ns=submit,
                prefix={"blocks": list(map(str, ids))},
            ).record()
            i += 1
            progress.done = i
