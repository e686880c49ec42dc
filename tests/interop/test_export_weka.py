"""``agentload trace export weka``: files checked against the Weka schema as AIPerf 0.13.0 reads
it (no field beyond the schema's, ``hash_id_scope: "local"``, at most ceil(in / 64) ids), the
sub-agent nesting, prefix sharing, timings, and bad input through the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import one_line_exit_2
from typer.testing import CliRunner

from agentload.cli import app
from agentload.trace import Trace, load_trace
from agentload.trace.prefix import common_blocks

# The Weka schema's fields (extra fields are rejected by its readers).
TOP = {"id", "models", "block_size", "hash_id_scope", "tool_tokens", "system_tokens"}
TOP |= {"requests", "totals"}
REQ = {"t", "type", "model", "in", "out", "hash_ids", "input_types", "output_types", "stop"}
REQ |= {"api_time", "think_time"}
SUB = {"t", "type", "agent_id", "subagent_type", "duration_ms", "total_tokens"}
SUB |= {"tool_use_count", "status", "requests", "models", "tool_tokens", "system_tokens"}


def check_request(r: dict[str, Any]) -> None:
    assert r["type"] in ("n", "s")
    allowed = REQ | ({"ttft"} if r["type"] == "s" else set())
    assert set(r) <= allowed, set(r) - allowed
    assert {"t", "type", "model", "in", "out"} <= set(r)
    assert isinstance(r["t"], float) and r["t"] >= 0
    assert isinstance(r["in"], int) and isinstance(r["out"], int)
    assert all(isinstance(h, int) for h in r["hash_ids"])
    assert len(r["hash_ids"]) <= math.ceil(r["in"] / 64)
    for key in ("api_time", "think_time", "ttft"):
        assert r.get(key) is None or (isinstance(r[key], float) and r[key] >= 0)


def check_weka(doc: dict[str, Any]) -> None:
    """The facts of the Weka schema as AIPerf 0.13.0's loader reads it."""
    assert set(doc) <= TOP, set(doc) - TOP
    assert {"id", "models", "block_size", "hash_id_scope", "requests"} <= set(doc)
    assert doc["block_size"] == 64 and doc["hash_id_scope"] == "local"
    assert isinstance(doc["id"], str) and all(isinstance(m, str) for m in doc["models"])
    for r in doc["requests"]:
        if r["type"] == "subagent":
            assert set(r) <= SUB, set(r) - SUB
            assert {"t", "agent_id", "subagent_type", "status", "requests", "models"} <= set(r)
            assert r["duration_ms"] is None or isinstance(r["duration_ms"], int)
            for q in r["requests"]:
                check_request(q)
                assert q["t"] >= r["t"]  # inner times are absolute, not relative to the spawn
        else:
            check_request(r)
    ts = [r["t"] for r in doc["requests"] if r["type"] != "subagent"]
    assert ts == sorted(ts)


def export(traces: list[Path], out: Path) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["trace", "export", "weka", *map(str, traces), "-o", str(out)])
    return res.exit_code, res.output


def load_dir(out: Path) -> dict[str, dict[str, Any]]:
    docs = {}
    for p in sorted(out.glob("*.json")):
        doc = json.loads(p.read_text())
        check_weka(doc)
        assert p.name == f"{doc['id']}.json"
        docs[doc["id"]] = doc
    return docs


def calls_of_doc(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = [r for r in doc["requests"] if r["type"] != "subagent"]
    return out + [q for r in doc["requests"] if r["type"] == "subagent" for q in r["requests"]]


@pytest.fixture(scope="module")
def exported(generated_trace: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp("weka") / "out"
    code, output = export([generated_trace], out)
    assert code == 0, output
    return load_trace(generated_trace), load_dir(out), output


def test_one_valid_file_per_session_with_every_call(exported: Any) -> None:
    trace, docs, output = exported
    assert set(docs) == set(trace.sessions)
    assert sum(len(calls_of_doc(d)) for d in docs.values()) == len(trace.calls)
    assert f"{len(docs)} Weka file(s), {len(trace.calls)} requests" in output
    for doc in docs.values():
        assert doc["totals"]["requests"] == len(calls_of_doc(doc))


def test_sub_agents_are_nested_after_the_call_that_spawned_them(exported: Any) -> None:
    trace, docs, _ = exported
    n_entries = 0
    for sid, doc in docs.items():
        agents = {a.id: a for a in trace.agents_of(sid)}
        roots = [a for a in agents.values() if a.parent_agent_id is None]
        assert len(roots) == 1
        root_calls = trace.calls_of(roots[0].id)
        top = [r for r in doc["requests"] if r["type"] != "subagent"]
        assert [r["in"] for r in top] == [trace.prompt_tokens(c) for c in root_calls]
        for i, r in enumerate(doc["requests"]):
            if r["type"] != "subagent":
                continue
            n_entries += 1
            agent = agents[r["agent_id"]]
            assert agent.parent_agent_id == roots[0].id
            assert r["subagent_type"] == agent.role and r["status"] == "completed"
            own = trace.calls_of(agent.id)
            assert [q["in"] for q in r["requests"]] == [trace.prompt_tokens(c) for c in own]
            assert r["total_tokens"] == sum(q["in"] + q["out"] for q in r["requests"])
            tools = [t for t in trace.tool_calls.values() if t.agent_id == agent.id]
            assert r["tool_use_count"] == len(tools)
            # The preceding top-level call is the one whose delegate tool call spawned it.
            spawner = trace.tool_calls[agent.parent_tool_call_id or ""].llm_call_id
            before = [q for q in doc["requests"][:i] if q["type"] != "subagent"]
            assert before[-1]["t"] == pytest.approx(
                (trace.calls[spawner].timings.submit_ns - min_submit(trace, sid)) / 1e9, abs=1e-6
            )
    with_calls = {c.agent_id for c in trace.calls.values()}
    assert n_entries == sum(
        1 for a in trace.agents.values() if a.parent_agent_id and a.id in with_calls
    )
    assert n_entries >= 4


def min_submit(trace: Trace, sid: str) -> int:
    return min(c.timings.submit_ns for c in trace.calls.values() if c.session_id == sid)


def test_shared_prefix_gives_shared_ids_exactly(exported: Any) -> None:
    """Over every pair of calls in a file (the conversation and its sub-agents), the ids two
    calls share from the start are exactly their shared whole 64-token blocks."""
    trace, docs, _ = exported
    for sid, doc in docs.items():
        calls = sorted(
            (c for c in trace.calls.values() if c.session_id == sid),
            key=lambda c: c.timings.submit_ns,
        )
        t0 = calls[0].timings.submit_ns
        by_t = {round((c.timings.submit_ns - t0) / 1e9, 6): c for c in calls}
        reqs = [(by_t[r["t"]], r["hash_ids"]) for r in calls_of_doc(doc)]
        for i, (a, ids_a) in enumerate(reqs):
            for b, ids_b in reqs[i + 1 :]:
                want = min(
                    common_blocks(trace.blocks(a), trace.blocks(b)) // 4, len(ids_a), len(ids_b)
                )
                got = next(
                    (k for k, (x, y) in enumerate(zip(ids_a, ids_b, strict=False)) if x != y),
                    min(len(ids_a), len(ids_b)),
                )
                assert got == want, (a.id, b.id)


def test_calls_of_one_agent_and_same_role_sub_agents_share_leading_ids(exported: Any) -> None:
    _, docs, _ = exported
    shared: list[list[list[int]]] = []
    for doc in docs.values():
        top = [r for r in doc["requests"] if r["type"] != "subagent"]
        assert top[1]["hash_ids"][:100] == top[0]["hash_ids"][:100]  # the orchestrator's history
        first_ids: dict[str, list[list[int]]] = {}
        for r in doc["requests"]:
            if r["type"] == "subagent":
                first_ids.setdefault(r["subagent_type"], []).append(r["requests"][0]["hash_ids"])
        shared.extend(ids for ids in first_ids.values() if len(ids) > 1)
    # how many sub-agents of a kind a session delegates is the simulated model's (seeded) choice:
    # over the two sessions some kind is delegated twice
    assert shared, "no two sub-agents of one role in any session"
    for ids in shared:  # the same system prompt: the same leading 64-token blocks
        assert ids[0][:2] == ids[1][:2] and len(ids[0]) >= 2


def test_timings_and_token_counts(exported: Any) -> None:
    trace, docs, _ = exported
    for sid, doc in docs.items():
        t0 = min_submit(trace, sid)
        for agent in trace.agents_of(sid):
            own = trace.calls_of(agent.id)
            if agent.parent_agent_id is None:
                reqs = [r for r in doc["requests"] if r["type"] != "subagent"]
            else:
                entry = next(r for r in doc["requests"] if r.get("agent_id") == agent.id)
                reqs = entry["requests"]
                assert entry["t"] == pytest.approx((agent.start_ns - t0) / 1e9, abs=1e-6)
                assert agent.end_ns is not None
                assert entry["duration_ms"] == round((agent.end_ns - agent.start_ns) / 1e6)
            prev = None
            for c, r in zip(own, reqs, strict=True):
                tm = c.timings
                assert r["t"] == pytest.approx((tm.submit_ns - t0) / 1e9, abs=1e-6)
                assert tm.last_token_ns and tm.first_token_ns
                assert r["api_time"] == pytest.approx(
                    (tm.last_token_ns - tm.submit_ns) / 1e9, abs=1e-6
                )
                assert r["ttft"] == pytest.approx(
                    (tm.first_token_ns - tm.submit_ns) / 1e9, abs=1e-6
                )
                if prev is None:
                    assert r["think_time"] is None
                else:
                    gap = tm.submit_ns - (prev.timings.last_token_ns or 0)
                    assert r["think_time"] == pytest.approx(gap / 1e9, abs=1e-6)
                assert r["type"] == "s" and r["model"] == c.request.model
                assert r["in"] == c.usage.prompt_tokens and r["out"] == c.usage.completion_tokens
                assert (
                    r["stop"]
                    == {"tool_calls": "tool_use", "stop": "end_turn", "length": "max_tokens"}[
                        c.response.finish_reason or ""
                    ]
                )
                assert r["input_types"] == (["tool_result"] if c.depends_on else ["text"])
                prev = c


def test_content_free_trace_keeps_its_64_token_ids(build: Any, tmp_path: Path) -> None:
    b = build(block_size=64, imported=True)
    b.session("c0")
    b.agent("c0.a", "c0", 0, 100)
    b.call("c0.a.0", "c0.a", "c0", 0, 0, ["0:7", "0:8"], 100)  # a partial last block
    b.call("c0.a.1", "c0.a", "c0", 1, 50, ["0:7", "0:8", "0:9"], 190)
    b.call("c0.a.2", "c0.a", "c0", 2, 80, ["0:7", "0:5", "0:6"], 900)  # fewer ids than in / 64
    code, output = export([b.write(tmp_path / "cf.agentload.jsonl")], tmp_path / "out")
    assert code == 0, output
    (doc,) = load_dir(tmp_path / "out").values()
    assert [r["hash_ids"] for r in doc["requests"]] == [[0, 1], [0, 1, 2], [0, 3, 4]]


def test_nested_and_early_sub_agents_become_top_level_entries(build: Any, tmp_path: Path) -> None:
    b = build()
    b.session("s")
    b.agent("root", "s", 0, 1000)
    b.agent("early", "s", 1, 30, parent="root")  # spawned before the root's first call
    b.agent("child", "s", 20, 500, parent="root")
    b.agent("grand", "s", 40, 200, parent="child")
    b.agent("idle", "s", 50, 60, parent="root")  # no calls: no entry
    blocks = [f"{k:016x}" for k in range(12)]
    b.call("e0", "early", "s", 0, 2, blocks[:4], 70)
    b.call("r0", "root", "s", 0, 10, blocks[:8], 140)
    b.call("c0", "child", "s", 0, 30, blocks[:4], 70)
    b.call("g0", "grand", "s", 0, 50, blocks[:4], 70, out=None, api_ms=None, error="boom")
    b.call("r1", "root", "s", 1, 600, blocks, 200, stream=False)
    code, output = export([b.write(tmp_path / "n.agentload.jsonl")], tmp_path / "out")
    assert code == 0, output
    (doc,) = load_dir(tmp_path / "out").values()
    shape = [(r["type"], r.get("agent_id"), r["t"]) for r in doc["requests"]]
    assert shape == [
        ("s", None, 0.009),  # t counts from the first event: the spawn of "early" at 1 ms
        ("subagent", "early", 0.0),  # moved after the first root call, keeps its t
        ("subagent", "child", 0.019),
        ("subagent", "grand", 0.039),
        ("n", None, 0.599),
    ]
    grand = doc["requests"][3]
    assert grand["requests"][0]["out"] == 0 and grand["requests"][0]["api_time"] is None
    assert "ttft" not in doc["requests"][4] and doc["requests"][4]["hash_ids"] == [0, 1, 2]
    assert doc["requests"][0]["hash_ids"] == [0, 1]
    assert [r["requests"][0]["hash_ids"] for r in doc["requests"][1:4]] == [[0], [0], [0]]


def test_sessions_of_two_traces_with_one_id_get_two_files(build: Any, tmp_path: Path) -> None:
    paths = []
    for i in range(2):
        b = build()
        b.session("s0")
        b.agent("a", "s0", 0, 10)
        b.call("a.0", "a", "s0", 0, 0, [], 10)
        paths.append(b.write(tmp_path / f"t{i}.agentload.jsonl"))
    code, output = export(paths, tmp_path / "out")
    assert code == 0, output
    assert sorted(load_dir(tmp_path / "out")) == ["s0", "s0-2"]


def test_bad_input_is_one_line_and_exit_2(
    build: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def weka(trace: Path, out: Path) -> str:
        return one_line_exit_2(["trace", "export", "weka", str(trace), "-o", str(out)], capsys)

    line = weka(tmp_path / "missing.agentload.jsonl.zst", tmp_path / "o")
    assert "missing.agentload.jsonl.zst" in line and "no such" in line
    damaged = tmp_path / "damaged.agentload.jsonl"
    good = build().write(tmp_path / "good.agentload.jsonl").read_text().splitlines()
    damaged.write_text(good[0] + "\n" + '{"type": "llm_call", "id": 3}\n')
    line = weka(damaged, tmp_path / "o")
    assert "damaged.agentload.jsonl:2" in line and "llm_call" in line
    b48 = build(block_size=48, imported=True).write(tmp_path / "b48.agentload.jsonl")
    line = weka(b48, tmp_path / "o")
    assert "b48.agentload.jsonl" in line and "48" in line and "64" in line
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "old.json").write_text("{}")
    assert "already holds 1 .json file" in weka(
        tmp_path / "good.agentload.jsonl", tmp_path / "full"
    )
    assert "not a directory" in weka(tmp_path / "good.agentload.jsonl", damaged)
