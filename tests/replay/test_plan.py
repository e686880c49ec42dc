"""Plans rebuilt from a hand-built trace: gaps, dependencies, bodies, digests, ceilings."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_helpers import plans_of
from replay_traces import MS, Shape, agentic_trace

from agentload.errors import ReplayError
from agentload.hashing import canonical_json, sha256_hex
from agentload.recorder import load_trace
from agentload.replay.run import load_plans


def test_edges_carry_the_recorded_gaps(trace_path: Path) -> None:
    (plan,) = plans_of(trace_path)
    c = plan.calls
    assert plan.n_agents == 3
    assert [(e.pred, e.gap_ns) for e in c["s0-c1"].preds] == [("s0-c0", 150 * MS)]
    # sub-agents start after the delegating call, with the recorded spawn delay
    for k in (1, 2):
        assert [(e.pred, e.gap_ns) for e in c[f"s0-sub{k}-c0"].preds] == [("s0-c1", 20 * MS)]
        assert [(e.pred, e.gap_ns) for e in c[f"s0-sub{k}-c1"].preds] == [
            (f"s0-sub{k}-c0", 100 * MS)
        ]
    # the final orchestrator call waits for both children, then the recorded post gap
    preds = {e.pred: e.gap_ns for e in c["s0-c2"].preds}
    assert preds == {"s0-c1": 0, "s0-sub1-c1": 80 * MS, "s0-sub2-c1": 80 * MS}
    assert plan.max_width == 2


def test_traffic_is_the_recorded_request_with_pinned_length(trace_path: Path) -> None:
    trace = load_trace(trace_path)
    (plan,) = plans_of(trace_path)
    for call in trace.calls.values():
        p = plan.calls[call.id]
        assert p.traffic["messages"] == trace.messages(call)
        assert p.traffic["tools"] == trace.tools(call)
        assert p.traffic["temperature"] == 0.0
        assert p.traffic["max_tokens"] == p.expected_tokens == 8
        assert "model" not in p.traffic and "stream_options" not in p.traffic
        assert p.digest == sha256_hex(canonical_json(p.traffic))


def test_ceiling_counts_blocks_seen_earlier_in_the_session(trace_path: Path) -> None:
    trace = load_trace(trace_path)
    (plan,) = plans_of(trace_path)
    c0, c1 = trace.calls["s0-c0"], trace.calls["s0-c1"]
    assert plan.calls["s0-c0"].ceiling_tokens == 0
    b0, b1 = trace.blocks(c0), trace.blocks(c1)
    shared = (
        next(i for i, (x, y) in enumerate(zip(b0, b1, strict=False)) if x != y)
        if any(x != y for x, y in zip(b0, b1, strict=False))
        else min(len(b0), len(b1))
    )
    assert shared > 0
    assert plan.calls["s0-c1"].ceiling_tokens == shared * trace.header.block_size


def test_max_context_leaves_sessions_out(tmp_path: Path) -> None:
    small = agentic_trace(tmp_path / "small.jsonl", shape=Shape(system_words=10))
    big = agentic_trace(tmp_path / "big.jsonl", shape=Shape(system_words=3000))
    plans, info = load_plans([str(small), str(big)], max_context=1500)
    assert len(plans) == 1 and info["excluded_sessions"] == ["1:s0"]
    with pytest.raises(ReplayError, match="every session"):
        load_plans([str(big)], max_context=50)


def test_a_cyclic_call_graph_is_rejected(tmp_path: Path) -> None:
    import asyncio

    from agentload.recorder import CallCapture, TraceWriter, make_header
    from agentload.recorder.schema import AgentRecord, Timings, ToolCallRecord
    from agentload.tokenizer import ChatTokenCounter

    path = tmp_path / "cycle.jsonl"

    async def write() -> None:
        async with TraceWriter(path, make_header()) as w:
            cap = CallCapture(w, ChatTokenCounter())
            await w.write(AgentRecord(id="a", session_id="s", role="orchestrator", start_ns=0))
            await w.write(
                AgentRecord(
                    id="b",
                    session_id="s",
                    role="code_search",
                    start_ns=0,
                    parent_agent_id="a",
                    parent_tool_call_id="d",
                )
            )
            for cid, agent, seq, t, deps in (
                ("a0", "a", 0, 0, []),
                ("a1", "a", 1, 10, ["b"]),
                ("b0", "b", 0, 20, []),
            ):
                body = {"model": "m", "messages": [{"role": "user", "content": cid}]}
                await cap.llm_call(
                    call_id=cid,
                    session_id="s",
                    agent_id=agent,
                    seq=seq,
                    body=body,
                    content="x",
                    tool_calls=None,
                    finish_reason="stop",
                    usage=None,
                    timings=Timings(submit_ns=t, last_token_ns=t + 1),
                    depends_on=deps,
                )
            # a1 both delegates to b and waits for b: impossible to replay
            await w.write(
                ToolCallRecord(
                    id="d",
                    session_id="s",
                    agent_id="a",
                    llm_call_id="a1",
                    name="delegate",
                    arguments={},
                    start_ns=11,
                    end_ns=30,
                    child_agent_id="b",
                )
            )

    asyncio.run(write())
    with pytest.raises(ReplayError, match="cycle"):
        plans_of(path)
