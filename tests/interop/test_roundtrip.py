"""Round trips: ``trace import`` of ``trace export`` gives back the call graph, the lengths and
the prefix sharing of the original (Weka), and its lengths, times and sharing (Mooncake, which
has no call graph). Both run the real CLI on a real generated trace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cli_helpers import ok

from agentload.replay.plan import build_plans
from agentload.trace.prefix import common_blocks
from agentload.trace.schema import AgentRecord, LLMCallRecord
from agentload.trace.trace import Trace, load_trace


def _blocks_at(trace: Trace, call: LLMCallRecord, size: int) -> list[str]:
    """The call's block ids at ``size`` tokens a block: every k-th of a chained list."""
    have = trace.header.block_size
    if have == size:
        return trace.blocks(call)
    step = size // have
    return trace.blocks(call)[step - 1 :: step]


def _children(trace: Trace, agent: AgentRecord) -> list[AgentRecord]:
    kids = [a for a in trace.agents.values() if a.parent_agent_id == agent.id]
    return sorted(kids, key=lambda a: (trace.calls_of(a.id)[0].timings.submit_ns, a.role))


def _walk(trace: Trace, agent: AgentRecord) -> Iterator[AgentRecord]:
    yield agent
    for kid in _children(trace, agent):
        yield from _walk(trace, kid)


def _shape(trace: Trace, agent: AgentRecord) -> tuple[Any, ...]:
    """An agent's calls (lengths, which children each waits for) and its children, by position:
    ids differ across formats, the structure may not."""
    calls = trace.calls_of(agent.id)
    kids = _children(trace, agent)
    index = {k.id: i for i, k in enumerate(kids)}
    spawned = {}
    for k in kids:
        parent_call = next(
            t.llm_call_id for t in trace.tool_calls.values() if t.id == k.parent_tool_call_id
        )
        spawned[k.id] = [c.id for c in calls].index(parent_call)
    rows = tuple(
        (
            trace.prompt_tokens(c),
            c.usage.completion_tokens,
            tuple(sorted(index[d] for d in c.depends_on if d in index)),
        )
        for c in calls
    )
    return (
        agent.role,
        rows,
        tuple((spawned[k.id], _shape(trace, k)) for k in kids),
    )


def _roots(trace: Trace) -> list[AgentRecord]:
    roots = [a for a in trace.agents.values() if a.parent_agent_id is None]
    # by session id (a Weka file is named by it): imported conversations all start at 0
    return sorted(roots, key=lambda a: a.session_id)


def _session_calls(trace: Trace, root: AgentRecord) -> list[LLMCallRecord]:
    return [c for a in _walk(trace, root) for c in trace.calls_of(a.id)]


def _sharing(trace: Trace, calls: list[LLMCallRecord], size: int) -> list[int]:
    blocks = [_blocks_at(trace, c, size) for c in calls]
    return [common_blocks(a, b) for i, a in enumerate(blocks) for b in blocks[i + 1 :]]


def _edges(trace: Trace) -> list[list[list[tuple[int, int]]]]:
    """Per session, per call in walk order: (pred's position, gap in ns) of every edge."""
    out = []
    plans = {p.session_id: p for p in build_plans([trace], salt_at="off")}
    for root in _roots(trace):
        order = [c.id for c in _session_calls(trace, root)]
        pos = {cid: i for i, cid in enumerate(order)}
        by_id = plans[root.session_id].calls
        out.append(
            [
                sorted((pos[e.pred], round(e.gap_ns / 1e6)) for e in by_id[cid].preds)
                for cid in order
            ]
        )
    return out


def test_weka_round_trip_keeps_the_call_graph_lengths_and_sharing(
    generated_trace: Path, tmp_path: Path
) -> None:
    orig = load_trace(generated_trace)
    ok("trace", "export", "weka", str(generated_trace), "-o", str(tmp_path / "weka"))
    back_path = tmp_path / "back.agentload.jsonl.zst"
    ok("trace", "import", "weka", str(tmp_path / "weka"), "-o", str(back_path))
    back = load_trace(back_path)
    assert back.header.redacted and back.header.source is not None
    assert back.header.source.block_size == 64

    o_roots, b_roots = _roots(orig), _roots(back)
    assert len(o_roots) == len(b_roots) == len(orig.sessions) == 2
    assert len(back.calls) == len(orig.calls) and len(back.agents) == len(orig.agents)
    for o_root, b_root in zip(o_roots, b_roots, strict=True):
        assert _shape(back, b_root) == _shape(orig, o_root)
        o_calls, b_calls = _session_calls(orig, o_root), _session_calls(back, b_root)
        o_share, b_share = _sharing(orig, o_calls, 64), _sharing(back, b_calls, 64)
        assert b_share == o_share
        assert sum(o_share) > 0  # the sharing compared is real
    # replay's plan: the same edges with the same recorded gaps (to the ms)
    edges, got = _edges(orig), _edges(back)
    # the same preds, with the same gaps to 10 us (Weka's times are float seconds)
    assert [[[p for p, _ in c] for c in s] for s in got] == [
        [[p for p, _ in c] for c in s] for s in edges
    ]
    for s_got, s_want in zip(got, edges, strict=True):
        for c_got, c_want in zip(s_got, s_want, strict=True):
            for (_, g), (_, w) in zip(c_got, c_want, strict=True):
                assert abs(g - w) < 10_000, (g, w)
    assert any(len(p) > 1 for s in edges for p in s)  # joins on children are compared
    assert any(gap > 0 for s in edges for p in s for _, gap in p)  # and recorded gaps


def test_mooncake_round_trip_keeps_lengths_times_and_sharing(
    generated_trace: Path, tmp_path: Path
) -> None:
    orig = load_trace(generated_trace)
    out = tmp_path / "mc.jsonl"
    ok("trace", "export", "mooncake", str(generated_trace), "-o", str(out))
    back_path = tmp_path / "back.agentload.jsonl.zst"
    ok("trace", "import", "mooncake", str(out), "-o", str(back_path))
    back = load_trace(back_path)
    assert back.header.source is not None and back.header.source.block_size == 512

    o_calls = sorted(orig.calls.values(), key=lambda c: c.timings.submit_ns)
    b_calls = sorted(back.calls.values(), key=lambda c: c.timings.submit_ns)
    assert len(b_calls) == len(o_calls) and len(back.sessions) == len(o_calls)
    t0o, t0b = o_calls[0].timings.submit_ns, b_calls[0].timings.submit_ns
    for o, b in zip(o_calls, b_calls, strict=True):
        assert back.prompt_tokens(b) == orig.prompt_tokens(o)
        assert b.usage.completion_tokens == max(1, o.usage.completion_tokens or 0)
        # Mooncake's timestamps are whole ms
        assert abs((b.timings.submit_ns - t0b) - (o.timings.submit_ns - t0o)) < 1_000_000
    o_share, b_share = _sharing(orig, o_calls, 512), _sharing(back, b_calls, 512)
    assert b_share == o_share and sum(o_share) > 0
