"""A trace cut anywhere (or a writer killed at any moment) reads back every complete record."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentload.trace import EventRecord, TraceWriter, read_trace
from agentload.trace.events import EventKind

from .conftest import header, write_session


def dumps(records: list[object]) -> list[dict[str, object]]:
    return [r.model_dump(mode="json", by_alias=True) for r in records]  # type: ignore[attr-defined]


@pytest.mark.parametrize("suffix", [".agentload.jsonl.zst", ".jsonl"])
async def test_cut_at_random_offsets_yields_complete_records_and_reports_truncation(
    tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"full{suffix}"
    # Many small frames: a flush after every orchestrator step.
    await write_session(path, orchestrator_calls=12, sub_calls=5, flush_each_call=True)
    data = path.read_bytes()
    full = dumps(list(read_trace(path)))
    assert len(full) > 30
    rnd = random.Random(1234)
    offsets = sorted({rnd.randrange(1, len(data)) for _ in range(50)})
    # For the plain file we also know where each record ends, so check recovery is maximal.
    ends = []
    if suffix == ".jsonl":
        pos = 0
        for line in data.split(b"\n")[:-1]:
            ends.append(pos + len(line))  # a record is complete once its JSON is, newline or not
            pos += len(line) + 1
    # Cuts right at a record's end, and right after its newline, are the edge cases.
    offsets += [e + d for e in ends[3:8] for d in (0, 1)]
    cut = tmp_path / f"cut{suffix}"
    truncated_reports = 0
    for off in offsets:
        cut.write_bytes(data[:off])
        reader = read_trace(cut)
        got = dumps(list(reader))  # never raises
        assert got == full[: len(got)], off
        assert reader.truncated is not None, off
        assert reader.truncated.records == len(got)
        truncated_reports += 1
        if ends:
            assert len(got) == sum(1 for e in ends if e <= off), off
    assert truncated_reports == len(offsets) >= 45


@pytest.mark.slow
async def test_reader_sees_records_older_than_a_second_while_the_writer_is_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "live.agentload.jsonl.zst"
    async with TraceWriter(path, header()) as w:  # default flush interval: 1 s
        written: list[tuple[float, int]] = []
        t0 = time.monotonic()
        i = 0
        checks = 0
        while time.monotonic() - t0 < 3.2:
            await w.write(EventRecord(kind="note", ns=i, details={"i": i}))
            written.append((time.monotonic(), i))
            i += 1
            await asyncio.sleep(0.02)
            if i % 40 == 0:
                now = time.monotonic()
                reader = read_trace(path)
                seen = {r.details["i"] for r in reader if isinstance(r, EventRecord)}
                must = {j for (t, j) in written if t < now - 1.2}
                assert must <= seen, sorted(must - seen)[:5]
                assert reader.truncated is not None  # not closed yet: no trace_end
                checks += 1
        assert checks >= 3
    reader = read_trace(path)
    records = list(reader)
    assert reader.truncated is None
    assert isinstance(records[-1], EventRecord) and records[-1].kind == EventKind.TRACE_END


CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from agentload.trace import EventRecord, TraceWriter, make_header

    async def main():
        async with TraceWriter(sys.argv[1], make_header(model="m")) as w:
            i = 0
            while True:
                await w.write(EventRecord(kind="note", ns=i, details={"i": i, "t": time.time()}))
                if i == 0:
                    print("started", flush=True)
                i += 1
                await asyncio.sleep(0.005)

    asyncio.run(main())
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("suffix", [".agentload.jsonl.zst", ".jsonl"])
def test_writer_killed_mid_run_leaves_a_readable_file(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"killed{suffix}"
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "started"
        time.sleep(2.6)
        killed_at = time.time()
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()
    reader = read_trace(path)
    events = [r for r in reader if isinstance(r, EventRecord)]
    assert reader.truncated is not None  # killed: never closed
    assert [e.details["i"] for e in events] == list(range(len(events)))
    # Frames are complete at least every second: nothing older than ~1.2 s is lost.
    assert events[-1].details["t"] > killed_at - 1.3
