"""``agentload trace import weka``: conversations written here from the published schema (AIPerf's
weka_trace_models: ``n``/``s`` requests, ``subagent`` entries with nested requests) become
content-free traces with the agent tree, dependencies, gaps and block ids of the source."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_helpers import run

from agentload.replay.plan import build_plans
from agentload.trace import load_trace
from agentload.trace.stats import compute_stats
from agentload.trace.trace import Trace

S = 1_000_000_000


def conv_a() -> dict[str, Any]:
    """A main agent of three calls; a parallel pair of sub-agents after its second call (one
    with absolute inner ``t``, one with ``t`` relative to the spawn); streaming and normal
    requests; think_time on the second call only."""
    return {
        "id": "conv-a",
        "models": ["claude-opus"],
        "block_size": 64,
        "hash_id_scope": "local",
        "tool_tokens": 1000,
        "system_tokens": 2000,
        "requests": [
            {"t": 0.0, "type": "s", "model": "claude-opus", "in": 200, "out": 50,
             "hash_ids": [1, 2, 3], "input_types": ["text"], "output_types": ["tool_use"],
             "stop": "tool_use", "api_time": 2.0, "ttft": 0.5},
            {"t": 5.0, "type": "n", "model": "claude-opus", "in": 300, "out": 40,
             "hash_ids": [1, 2, 3, 4, 5], "stop": "tool_use", "api_time": 1.0, "think_time": 1.5},
            {"t": 6.0, "type": "subagent", "agent_id": "agent_001", "subagent_type": "Explore",
             "duration_ms": 4000, "total_tokens": 330, "tool_use_count": 2, "status": "completed",
             "models": ["claude-haiku"], "tool_tokens": 0, "system_tokens": 0,
             "requests": [
                 {"t": 6.1, "type": "n", "model": "claude-haiku", "in": 100, "out": 20,
                  "hash_ids": [1, 90], "api_time": 1.0},
                 {"t": 7.5, "type": "s", "model": "claude-haiku", "in": 180, "out": 30,
                  "hash_ids": [1, 90, 91], "api_time": 1.0, "ttft": 0.2, "think_time": 0.4},
             ]},
            {"t": 6.0, "type": "subagent", "agent_id": "agent_002", "subagent_type": "Plan",
             "duration_ms": 3000, "status": "completed", "models": ["claude-haiku"],
             "requests": [
                 {"t": 0.2, "type": "n", "model": "claude-haiku", "in": 64, "out": 10,
                  "hash_ids": [7], "api_time": 0.5},
             ]},
            {"t": 11.0, "type": "n", "model": "claude-opus", "in": 500, "out": 60,
             "hash_ids": [1, 2, 3, 4, 5, 6, 7, 8], "stop": "end_turn", "api_time": 2.0},
        ],
    }  # fmt: skip


def conv_b() -> dict[str, Any]:
    """The same hash ids as conv-a (another namespace); an async sub-agent that does not block,
    holding a sub-agent of its own; no think_time anywhere."""
    return {
        "id": "conv-b",
        "models": ["claude-opus"],
        "block_size": 64,
        "hash_id_scope": "local",
        "requests": [
            {"t": 0.0, "type": "n", "model": "claude-opus", "in": 128, "out": 5,
             "hash_ids": [1, 2], "api_time": 1.0},
            {"t": 1.5, "type": "subagent", "agent_id": "bg", "subagent_type": "general",
             "duration_ms": None, "status": "async_launched", "models": ["claude-opus"],
             "requests": [
                 {"t": 1.6, "type": "n", "model": "claude-opus", "in": 64, "out": 5,
                  "hash_ids": [1], "api_time": 0.5},
                 {"t": 2.5, "type": "subagent", "agent_id": "deep", "subagent_type": "Explore",
                  "duration_ms": 1000, "status": "completed", "models": ["claude-opus"],
                  "requests": [{"t": 2.6, "type": "n", "model": "claude-opus", "in": 10,
                                "out": 3, "api_time": 0.2}]},
             ]},
            {"t": 3.0, "type": "n", "model": "claude-opus", "in": 192, "out": 7,
             "hash_ids": [1, 2, 3], "api_time": 0.5},
        ],
    }  # fmt: skip


def write(path: Path, obj: Any) -> Path:
    path.write_bytes(orjson.dumps(obj))
    return path


@pytest.fixture
def imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Trace, str]:
    src = tmp_path / "weka"
    src.mkdir()
    write(src / "a.json", conv_a())
    write(src / "b.json", conv_b())
    out = tmp_path / "w.agentload.jsonl.zst"
    code, stdout, err = run(["trace", "import", "weka", str(src), "-o", str(out)], capsys)
    assert code == 0, err
    return load_trace(out), stdout


def test_summary_and_header(imported: tuple[Trace, str], tmp_path: Path) -> None:
    trace, stdout = imported
    assert stdout.strip() == (
        f"wrote {tmp_path / 'w.agentload.jsonl.zst'}: 2 sessions, 6 agents, 10 calls "
        "from 2 weka files (block size 64)"
    )
    h = trace.header
    assert h.redacted and h.block_size == 64
    assert h.source is not None
    assert h.source.format == "weka" and h.source.block_size == 64
    assert h.source.hash_id_scope == "local" and h.source.records == 2
    assert [Path(f).name for f in h.source.files] == ["a.json", "b.json"]
    assert trace.truncated is None and not trace.blobs
    assert trace.sessions["conv-a"].meta["system_tokens"] == 2000


def test_agent_tree_and_delegation(imported: tuple[Trace, str]) -> None:
    trace, _ = imported
    a = trace.agents
    assert a["conv-a.main"].parent_agent_id is None and a["conv-a.main"].role == "orchestrator"
    for name, kind, task in (("agent_001", "Explore", 0), ("agent_002", "Plan", 1)):
        child = a[f"conv-a.{name}"]
        assert (child.parent_agent_id, child.role) == ("conv-a.main", kind)
        assert child.parent_tool_call_id == f"conv-a.main.1.task{task}"
        tc = trace.tool_calls[child.parent_tool_call_id]
        assert (tc.llm_call_id, tc.child_agent_id, tc.name) == (
            "conv-a.main.1",
            child.id,
            "delegate",
        )
        assert tc.start_ns - trace.header.clock.mono_ns == 6 * S
    assert trace.tool_calls["conv-a.main.1.task0"].end_ns - trace.header.clock.mono_ns == 10 * S
    parent = trace.calls["conv-a.main.1"]
    assert [t.id for t in parent.response.tool_calls] == [
        "conv-a.main.1.task0",
        "conv-a.main.1.task1",
    ]
    assert parent.response.finish_reason == "tool_calls"
    # the parallel pair: the parent's next call waits for both; the async one blocks nothing
    assert trace.calls["conv-a.main.2"].depends_on == ["conv-a.agent_001", "conv-a.agent_002"]
    assert trace.calls["conv-b.main.1"].depends_on == []
    assert a["conv-b.deep"].parent_agent_id == "conv-b.bg"
    assert a["conv-b.deep"].parent_tool_call_id == "conv-b.bg.0.task0"
    assert [c.id for c in trace.calls_of("conv-a.main")] == [f"conv-a.main.{i}" for i in range(3)]
    assert [c.seq for c in trace.calls_of("conv-a.agent_001")] == [0, 1]


def test_lengths_timings_and_gaps(imported: tuple[Trace, str]) -> None:
    trace, _ = imported
    t0 = trace.header.clock.mono_ns
    c0, c1, c2 = trace.calls_of("conv-a.main")
    assert (c0.usage.prompt_tokens_ours, c0.usage.prompt_tokens, c0.usage.completion_tokens) == (
        200, 200, 50)  # fmt: skip
    assert c0.request.max_tokens == 50 and c0.messages == [] and c0.request.stream
    assert not c1.request.stream and c2.response.finish_reason == "stop"
    assert c0.timings.submit_ns == t0
    assert c0.timings.first_token_ns == t0 + S // 2 and c0.timings.last_token_ns == t0 + 2 * S
    assert c1.timings.submit_ns == t0 + 3_500_000_000  # previous end (2.0 s) + think_time 1.5 s
    assert c2.timings.submit_ns == t0 + 11 * S  # no think_time: t
    e0, e1 = trace.calls_of("conv-a.agent_001")
    assert e0.timings.submit_ns == t0 + 6_100_000_000  # absolute inner t
    assert e1.timings.submit_ns == e0.timings.last_token_ns + 400_000_000  # think_time 0.4
    (p0,) = trace.calls_of("conv-a.agent_002")
    assert p0.timings.submit_ns == t0 + 6_200_000_000  # t relative to the spawn at 6.0


def test_block_ids(imported: tuple[Trace, str]) -> None:
    trace, _ = imported
    calls = trace.calls
    assert trace.blocks(calls["conv-a.main.0"]) == ["0:1", "0:2", "0:3"]
    assert trace.blocks(calls["conv-a.main.1"]) == [f"0:{i}" for i in (1, 2, 3, 4, 5)]
    prefix = calls["conv-a.main.1"].prefix
    assert prefix is not None and (prefix.base, prefix.base_blocks, prefix.blocks) == (
        "conv-a.main.0", 3, ["0:4", "0:5"])  # fmt: skip
    # a sub-agent shares its conversation's namespace: its block 1 is the parent's block 1
    assert trace.blocks(calls["conv-a.agent_001.1"]) == ["0:1", "0:90", "0:91"]
    # another conversation's id 1 is another block
    assert trace.blocks(calls["conv-b.main.0"]) == ["1:1", "1:2"]
    assert trace.blocks(calls["conv-b.deep.0"]) == []


def test_plan_edges_and_stats(imported: tuple[Trace, str]) -> None:
    trace, _ = imported
    plans = {p.session_id: p for p in build_plans([trace], salt_at="off")}
    a = plans["conv-a"].calls
    edges = {c: {(e.pred, e.gap_ns) for e in a[c].preds} for c in a}
    assert edges["conv-a.main.1"] == {("conv-a.main.0", 1_500_000_000)}
    assert edges["conv-a.agent_001.0"] == {("conv-a.main.1", 1_600_000_000)}  # 6.1 - 4.5
    # the call after the pair waits for both children's last calls: 11.0 - 8.5 (the later end)
    assert edges["conv-a.main.2"] == {
        ("conv-a.main.1", 0),
        ("conv-a.agent_001.1", 2_500_000_000),
        ("conv-a.agent_002.0", 2_500_000_000),
    }
    assert a["conv-a.main.2"].expected_tokens == 60
    stats = compute_stats(trace)
    assert stats["sessions"] == 2 and stats["llm_calls"] == 10
    assert stats["tool_calls_by_name"]["delegate"]["count"] == 4
    assert stats["prompt_tokens_total"] == sum(
        c.usage.prompt_tokens_ours for c in trace.calls.values()
    )


def test_jsonl_of_conversations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "convs.jsonl"
    src.write_bytes(orjson.dumps(conv_a()) + b"\n" + orjson.dumps(conv_a()) + b"\n")
    out = tmp_path / "j.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "weka", str(src), "-o", str(out)], capsys)
    assert code == 0, err
    trace = load_trace(out)
    assert sorted(trace.sessions) == ["conv-a", "conv-a#1"]
    assert trace.blocks(trace.calls["conv-a#1.main.0"]) == ["1:1", "1:2", "1:3"]


def _bad(conv: dict[str, Any], path: list[Any], value: Any) -> dict[str, Any]:
    conv = copy.deepcopy(conv)
    d: Any = conv
    for k in path[:-1]:
        d = d[k]
    d[path[-1]] = value
    return conv


@pytest.mark.parametrize(
    ("path", "value", "expect"),
    [
        (["requests", 1, "in"], "300 tokens", "a.json:requests[1]: in: expected an integer"),
        (["requests", 1, "in"], -3, "a.json:requests[1]: in: expected an integer >= 0, got -3"),
        (["requests", 1, "out"], [40], "a.json:requests[1]: out: expected an integer, got [40]"),
        (["requests", 1, "type"], "x", "a.json:requests[1]: type: unknown request type \"x\""),
        (["requests", 2, "requests", 1, "hash_ids"], [1, 2, 3, 4],
         "a.json:requests[2].requests[1]: hash_ids: 4 block ids do not fit 180 input tokens"),
        (["requests", 3, "requests", 0, "t"], None, "a.json:requests[3].requests[0]: t: missing"),
        (["requests", 0, "hash_ids"], [1, "two"], "a.json:requests[0]: hash_ids[1]: expected an integer"),
        (["requests"], [], "a.json: requests: empty (a conversation without requests)"),
        (["hash_id_scope"], "per-file", "a.json: hash_id_scope: expected 'local' or 'global'"),
    ],
)  # fmt: skip
def test_bad_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: list[Any], value: Any, expect: str
) -> None:
    src = write(tmp_path / "a.json", _bad(conv_a(), path, value))
    out = tmp_path / "bad.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "weka", str(src), "-o", str(out)], capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert expect in err, err
    assert not out.exists()


def test_truncated_and_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "cut.json"
    src.write_bytes(orjson.dumps(conv_a())[:300])
    out = tmp_path / "x.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "weka", str(src), "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cut.json: invalid JSON" in err
    code, _, err = run(
        ["trace", "import", "weka", str(tmp_path / "nope.json"), "-o", str(out)], capsys
    )
    assert code == 2 and "nope.json: no such file" in err and len(err.strip().splitlines()) == 1
