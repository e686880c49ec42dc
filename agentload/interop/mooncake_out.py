"""``agentload trace export mooncake``: one Mooncake JSON line per call.

A line is ``{timestamp, input_length, output_length, hash_ids}``: ``timestamp`` the call's
recorded submit time (on the modeled timeline: with the trace's modeled waits, ``trace.timeline``)
in integer milliseconds from its trace's first call (several traces are
overlaid, each starting at 0), lines sorted by it; ``hash_ids`` 512-token block numbers in one
namespace over the whole file (Mooncake's ids are global), so any two calls that share a prompt
prefix share its ids, across sessions and traces. Agents, order dependencies and timings other
than the submit time are not in the format. Every field is mapped in docs/trace-formats.md
("Export: Mooncake").
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from pathlib import Path

import orjson

from agentload.interop.blockids import BlockNumbers, group_factor, max_ids
from agentload.outfile import atomic_output
from agentload.trace.stats import completion_tokens
from agentload.trace.timeline import GapMode, describe_waits, has_waits, with_gaps
from agentload.trace.trace import load_trace

__all__ = ["BLOCK_SIZE", "export_mooncake"]

BLOCK_SIZE = 512


def _lines(
    path: Path, index: int, numbers: BlockNumbers, notes: list[str]
) -> Iterator[tuple[int, int, bytes]]:
    """(ms, order, line) of each call of one trace, in submit order."""
    trace = load_trace(path)
    if trace.truncated is not None:
        notes.append(f"{path}: {trace.truncated} (exported the records before it)")
    if has_waits(trace):
        notes.append(f"{path}: timestamps include modeled waits ({describe_waits(trace)})")
    trace = with_gaps(trace, GapMode.MODELED)
    factor = group_factor(trace, BLOCK_SIZE)
    scope = str(index) if trace.header.source is not None else ""
    calls = sorted(trace.calls.values(), key=lambda c: (c.timings.submit_ns, c.id))
    if not calls:
        return
    t0 = calls[0].timings.submit_ns
    for order, call in enumerate(calls):
        inp = trace.prompt_tokens(call)
        ms = (call.timings.submit_ns - t0) // 1_000_000
        line = {
            "timestamp": ms,
            "input_length": inp,
            # Readers reject 0 (a call that produced no token, e.g. an error): at least 1.
            "output_length": max(1, completion_tokens(call)),
            "hash_ids": numbers.number(
                trace.blocks(call), factor, max_ids(inp, BLOCK_SIZE), scope=scope
            ),
        }
        yield ms, order, orjson.dumps(line) + b"\n"


def export_mooncake(traces: Sequence[Path], out: Path, *, force: bool = False) -> list[str]:
    """Write every call of ``traces`` as one Mooncake line to the file ``out``; returns the
    summary line."""
    numbers = BlockNumbers()
    notes: list[str] = []
    n = 0
    # ``out`` is checked (an input, a directory, exists unasked) before any trace is read.
    with atomic_output(out, traces, force=force) as tmp, tmp.open("wb") as fh:
        # Each trace's lines are computed (and its trace dropped) before the next is read;
        # the lines of all traces are then merged by timestamp.
        per_trace = [list(_lines(p, i, numbers, notes)) for i, p in enumerate(traces)]
        for _, _, line in heapq.merge(*per_trace, key=lambda it: (it[0], it[1])):
            fh.write(line)
            n += 1
    return [
        f"{out}: {n} Mooncake lines, {len(numbers)} distinct {BLOCK_SIZE}-token blocks, "
        f"from {len(traces)} trace(s)",
        *notes,
    ]
