"""generate --ray's driver side without a cluster: a worker's records moved onto the
driver's clock, its session counters copied into the driver's."""

from __future__ import annotations

import orjson

from agentload.agents.tracing import LiveCall, SessionStats
from agentload.generate.ray_actor import stats_from_wire, stats_wire
from agentload.generate.ray_driver import shift_line
from agentload.trace.schema import LLMCallRecord, ToolCallRecord
from agentload.trace.writer import encode_record


def test_shift_line_moves_every_monotonic_time_and_nothing_else() -> None:
    call = {
        "type": "llm_call", "id": "s0-0.orch.0", "session_id": "s0-0", "agent_id": "s0-0.orch",
        "seq": 0, "request": {"model": "m"}, "messages": [], "response": {},
        "usage": {"prompt_tokens_ours": 10}, "timings": {"submit_ns": 1000, "first_token_ns": 1500,
                                 "last_token_ns": 1900, "chunk_offsets_ns": [500, 900]},
    }  # fmt: skip
    line = encode_record(LLMCallRecord.model_validate(call))
    moved = orjson.loads(shift_line(line, 400))
    assert moved["timings"] == {
        "submit_ns": 600, "first_token_ns": 1100, "last_token_ns": 1500,
        "chunk_offsets_ns": [500, 900],  # relative to submit: unchanged
    }  # fmt: skip
    LLMCallRecord.model_validate(moved)
    tool = ToolCallRecord(
        id="t", session_id="s", agent_id="a", llm_call_id="c", name="read_file", arguments={},
        start_ns=5000, end_ns=7000,
    )  # fmt: skip
    assert orjson.loads(shift_line(encode_record(tool), -1000))["start_ns"] == 6000
    blob = b'{"type":"blob","id":"x","kind":"text","content":"start_ns"}\n'
    assert shift_line(blob, 400) == blob


def test_stats_cross_over_with_their_times_on_the_drivers_clock() -> None:
    st = SessionStats(session_id="s1-0", start_ns=10_000, end_ns=50_000, calls=3)
    st.live["c"] = LiveCall(start_ns=20_000, chunks=7)
    st.tool_intervals.append((30_000, 40_000))
    mirror = SessionStats(session_id="s1-0", start_ns=0)
    stats_from_wire(mirror, orjson.loads(orjson.dumps(stats_wire(st))), shift_ns=10_000)
    assert (mirror.start_ns, mirror.end_ns, mirror.calls) == (0, 40_000, 3)
    assert mirror.live == {"c": LiveCall(start_ns=10_000, chunks=7)}
    assert mirror.tool_intervals == [(20_000, 30_000)]
    assert mirror.wall_ns == st.wall_ns and mirror.tool_busy_ns == st.tool_busy_ns
