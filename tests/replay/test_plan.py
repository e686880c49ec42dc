"""Plans rebuilt from a hand-built trace: gaps, dependencies, bodies, digests, ceilings."""

from __future__ import annotations

from pathlib import Path

import pytest
from replay_helpers import plans_of
from replay_traces import MS, Shape, agentic_trace

from agentload.errors import ReplayError
from agentload.hashing import canonical_json, sha256_hex
from agentload.replay.run import load_plans
from agentload.replay.salt import SaltAt
from agentload.trace import load_trace


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

    from agentload.tokenizer import ChatTokenCounter
    from agentload.trace import CallCapture, ObservedCall, TraceWriter, make_header
    from agentload.trace.schema import AgentRecord, Timings, ToolCallRecord

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
                await cap.record(
                    ObservedCall(
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


@pytest.mark.parametrize("at", ["start", "after-system"])
def test_salted_ceilings_match_real_salts(tmp_path: Path, at: SaltAt) -> None:
    """The salted ceiling (computed once per recorded session with representative salts) is
    what a brute force over real instances' salted prompts finds: exact for what an instance
    shares with itself, an upper bound of what other instances share, in either salted mode."""
    import random

    from agentload.replay.salt import make_salt, salt_messages
    from agentload.tokenizer import ChatTokenCounter
    from agentload.trace.prefix import PrefixHasher, hash_prompt

    path = agentic_trace(tmp_path / "t.jsonl", sessions=2, shape=Shape(system_words=37))
    trace = load_trace(path)
    plans = plans_of(path, salt_at=at)
    counter, block = ChatTokenCounter(trace.header.tokenizer), trace.header.block_size
    rng = random.Random(7)
    salts = [make_salt(f"{rng.randrange(10**9):09d}", rng.randrange(10**6)) for _ in range(3)]
    # every call of every recorded session, sent by three instances
    sent: dict[tuple[int, str], list[str]] = {}
    for i, salt in enumerate(salts):
        for pl in plans:
            for c in pl.calls.values():
                msgs = salt_messages(c.traffic["messages"], salt, at)
                pp = hash_prompt(PrefixHasher(block), counter, msgs, c.traffic.get("tools"))
                sent[(i, c.key)] = list(pp.state.blocks)

    def lcp(a: list[str], b: list[str]) -> int:
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        return n

    for pl in plans:
        after: dict[str, set[str]] = {}  # each call's successors, transitively
        for cid in reversed(pl.order):
            succs = pl.calls[cid].succs
            after[cid] = set(succs).union(*(after[s] for s in succs))
        for c in pl.calls.values():
            mine = sent[(0, c.key)]
            # the same instance's calls that may run before it: all but itself and its successors
            before = [o for o in pl.calls.values() if o.id != c.id and o.id not in after[c.id]]
            within = max((lcp(mine, sent[(0, o.key)]) for o in before), default=0)
            cross = max(lcp(mine, sent[(i, k)]) for (i, k) in sent if i != 0)
            assert c.within_tokens == within * block, c.key
            assert c.cross_tokens is not None and c.cross_tokens >= cross * block, c.key
            assert c.ceiling() == max(c.within_tokens, c.cross_tokens)
            if c.seq > 0:  # an agent's later call: its own history is the most it can reuse
                assert c.ceiling() == within * block >= c.ceiling_tokens
            else:  # an agent's first call: the tool schemas and the salt's head, at least
                assert c.ceiling() >= cross * block > 0
            if at == "after-system":  # the tools and the whole system prompt, across sessions
                system = [m for m in c.traffic["messages"] if m["role"] == "system"]
                shared = len(counter.ids_for_tools(c.traffic["tools"])) + sum(
                    len(counter.ids_for_message(m)) for m in system
                )
                assert c.cross_tokens >= shared // block * block, c.key


def test_a_tokenizer_that_cannot_load_keeps_the_unsalted_ceiling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = agentic_trace(tmp_path / "t.jsonl")
    header, rest = path.read_bytes().split(b"\n", 1)
    assert b'"tokenizer":"o200k_base"' in header
    missing = b'"tokenizer":"hf:' + str(tmp_path / "nope.json").encode() + b'"'
    path.write_bytes(header.replace(b'"tokenizer":"o200k_base"', missing) + b"\n" + rest)
    plans, _ = load_plans([str(path)], max_context=None)
    calls = [c for pl in plans for c in pl.calls.values()]
    assert calls and all(c.within_tokens is None for c in calls)
    assert all(c.ceiling() == c.within() == c.ceiling_tokens for c in calls)
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"{path}: tokenizer hf:" in err and "cannot be loaded" in err
    plans, _ = load_plans([str(path)], max_context=None, salt_at="off")  # nothing to warn about
    assert capsys.readouterr().err == ""
    # unsalted, the ceilings need no tokenizer: the trace's blocks say them
    calls = [c for pl in plans for c in pl.calls.values()]
    assert all(c.within_tokens is not None and c.within_tokens >= c.ceiling_tokens for c in calls)


def test_every_salt_has_the_same_token_layout() -> None:
    import random

    from agentload.replay.salt import REPRESENTATIVE_SALTS, make_salt
    from agentload.tokenizer import get_tokenizer

    rng = random.Random(3)
    salts = [make_salt(f"{rng.randrange(10**9):09d}", rng.randrange(10**9)) for _ in range(300)]
    for name in ("o200k_base", "cl100k_base"):
        tok = get_tokenizer(name)
        layouts = {len(tok.encode(s)) for s in [*salts, *REPRESENTATIVE_SALTS]}
        assert len(layouts) == 1, (name, layouts)
        a, b = (tok.encode(s) for s in REPRESENTATIVE_SALTS)
        assert a[:-2] == b[:-2] and a[-2] != b[-2] and a[-1] == b[-1]  # only the last digits
    for nonce, index in (("abc", 1), ("0123456789", 1), ("012345678", 10**9)):
        with pytest.raises(ValueError):
            make_salt(nonce, index)
