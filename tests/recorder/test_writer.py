"""TraceWriter: concurrent writers, snapshots at write time, errors in the caller."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentload.trace import EventRecord, TraceWriter, load_trace, read_trace

from .conftest import header


async def test_many_concurrent_agents_all_records_land_in_order(tmp_path: Path) -> None:
    path = tmp_path / "conc.agentload.jsonl.zst"
    async with TraceWriter(path, header(), flush_interval_s=0.05) as w:

        async def agent(a: int) -> None:
            for i in range(200):
                await w.write(EventRecord(kind="note", ns=i, agent_id=f"a{a}", details={"i": i}))
                if i % 17 == 0:
                    await asyncio.sleep(0.001)
                if i % 50 == 0:
                    await w.flush()

        await asyncio.gather(*(agent(a) for a in range(20)))
    trace = load_trace(path)
    assert trace.truncated is None
    per_agent: dict[str, list[int]] = {}
    for e in trace.events:
        if e.agent_id:
            per_agent.setdefault(e.agent_id, []).append(e.details["i"])
    assert len(per_agent) == 20
    assert all(v == list(range(200)) for v in per_agent.values())
    assert w.records_written == 20 * 200 + 2  # + header + trace_end


async def test_record_is_snapshotted_when_written(tmp_path: Path) -> None:
    path = tmp_path / "snap.jsonl"
    async with TraceWriter(path, header()) as w:
        details = {"state": "before"}
        await w.write(EventRecord(kind="note", ns=1, details=details))
        details["state"] = "after"  # the caller reuses its dict
        bid = await w.blob("message", {"role": "user", "content": "x"})
        assert await w.blob("message", {"role": "user", "content": "x"}) == bid  # once
    events = [r for r in read_trace(path) if isinstance(r, EventRecord) and r.kind == "note"]
    assert events[0].details == {"state": "before"}
    assert path.read_bytes().count(b'"type":"blob"') == 1


async def test_unserializable_record_fails_in_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    async with TraceWriter(path, header()) as w:
        with pytest.raises(TypeError):
            await w.write({"type": "event", "kind": "note", "ns": 1, "details": {"x": object()}})
        await w.write(EventRecord(kind="note", ns=2))
    assert load_trace(path).truncated is None


async def test_closed_writer_refuses_records_and_close_is_idempotent(tmp_path: Path) -> None:
    w = TraceWriter(tmp_path / "c.jsonl", header())
    await w.open()
    await w.close()
    await w.close()
    with pytest.raises(RuntimeError, match="not open"):
        await w.write(EventRecord(kind="note", ns=1))


async def test_lines_teed_from_two_writers_merge_into_one_with_each_blob_once(
    tmp_path: Path,
) -> None:
    """``tee`` + ``write_encoded``: what ``generate --ray``'s driver does with its workers'."""
    merged_path = tmp_path / "merged.agentload.jsonl.zst"
    async with TraceWriter(merged_path, header()) as merged:
        for name in ("a", "b"):
            lines: list[tuple[bytes, str | None]] = []
            own = tmp_path / f"{name}.agentload.jsonl"
            async with TraceWriter(
                own, header(), tee=lambda ln, b, out=lines: out.append((ln, b))
            ) as w:
                shared = await w.blob("text", "the same system prompt")
                mine = await w.blob("text", f"only {name}")
                await w.write(EventRecord(kind="note", ns=1, agent_id=name))
            assert [b for _, b in lines] == [shared, mine, None]
            for line, blob_id in lines:
                merged.write_encoded(line, blob_id)
    trace = load_trace(merged_path)
    assert trace.truncated is None
    assert sorted(b.content for b in trace.blobs.values()) == [
        "only a",
        "only b",
        "the same system prompt",
    ]
    assert sorted(str(e.agent_id) for e in trace.events if e.kind == "note") == ["a", "b"]
    assert merged.records_written == 2 + 3 + 1 + 1  # header, blobs, events, trace_end
