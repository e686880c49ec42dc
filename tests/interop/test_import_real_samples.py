"""Real published files (``tests/interop/samples``, sources in its README) through ``agentload
trace import`` and ``trace validate``: each imports, the trace validates, and what departs from
the format's published schema is accepted, counted in one warning line and in the header. The
expected counts are derived from the sample files here, against the published schemas below
(not from the importers' own tables)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run

from agentload.trace import load_trace
from agentload.trace.trace import Trace

SAMPLES = Path(__file__).parent / "samples"
WEKA = SAMPLES / "weka_sample_trace_with_subagent.json"
TRACELAB = SAMPLES / "tracelab_round_trace.jsonl"
MOONCAKE = SAMPLES / "mooncake_conversation_trace.jsonl"

# The published Weka schema: AIPerf's weka_trace_models (extra="forbid"; subagent_type a string).
WEKA_CONVERSATION = {"id", "models", "block_size", "hash_id_scope", "tool_tokens",
                     "system_tokens", "requests", "totals"}  # fmt: skip
WEKA_CALL = {"t", "type", "model", "in", "out", "hash_ids", "input_types", "output_types",
             "stop", "api_time", "think_time", "ttft"}  # fmt: skip
WEKA_SUBAGENT = {"t", "type", "agent_id", "subagent_type", "duration_ms", "total_tokens",
                 "tool_use_count", "status", "requests", "models", "tool_tokens",
                 "system_tokens"}  # fmt: skip
# Mooncake's FAST'25 traces: four fields a line.
MOONCAKE_KEYS = {"timestamp", "input_length", "output_length", "hash_ids"}


def _import(
    fmt: str, src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Trace, str, str]:
    out = tmp_path / f"{fmt}.agentload.jsonl.zst"
    code, stdout, err = run(["trace", "import", fmt, str(src), "-o", str(out)], capsys)
    assert code == 0, err
    assert "Traceback" not in err
    code, vout, verr = run(["trace", "validate", str(out)], capsys)
    assert code == 0, vout + verr
    assert f"content: imported from {fmt} ({src.name}, block size" in vout
    return load_trace(out), stdout, err


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("agentload: warning: ")]


def _weka_expected(conv: dict[str, Any]) -> dict[str, int]:
    """What the Weka sample does differently from the published schema, counted from the file."""
    found: dict[str, int] = {}

    def add(kind: str) -> None:
        found[kind] = found.get(kind, 0) + 1

    for key in conv.keys() - WEKA_CONVERSATION:
        add(f"{key}: extra key")

    def walk(reqs: list[dict[str, Any]], path: str) -> None:
        for r in reqs:
            if r["type"] == "subagent":
                for key in r.keys() - WEKA_SUBAGENT:
                    add(f"{path}.{key}: extra key")
                if r.get("subagent_type", "") is None:
                    add(f"{path}.subagent_type: null")
                walk(r["requests"], f"{path}.requests[]")
            else:
                for key in r.keys() - WEKA_CALL:
                    add(f"{path}.{key}: extra key")

    walk(conv["requests"], "requests[]")
    return found


def test_weka_kv_cache_tester_conversation_with_subagents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The file the issue reports (``requests[3]: subagent_type: missing``): sub-agents with
    ``"subagent_type": null``, an ``_analysis`` key, ``hash_id_scope`` ``global``."""
    conv = json.loads(WEKA.read_text())
    expected = _weka_expected(conv)
    nulls = expected["requests[].subagent_type: null"]
    assert nulls > 0 and "_analysis: extra key" in expected  # what the sample is shipped for
    trace, stdout, err = _import("weka", WEKA, tmp_path, capsys)

    src = trace.header.source
    assert src is not None and src.hash_id_scope == conv["hash_id_scope"] == "global"
    assert src.deviations == expected
    (line,) = _warnings(err)
    total = sum(expected.values())
    assert f"{total} deviations from the weka schema accepted" in line
    assert f"requests[].subagent_type: null \u00d7{nulls}" in line
    assert "extra keys \u00d71 (_analysis)" in line

    # the agent tree: the main agent and one child per subagent entry, each started by the
    # parent's preceding call and awaited by its next one
    entries = [r for r in conv["requests"] if r["type"] == "subagent"]
    sid = conv["id"]
    main = f"{sid}.main"
    children = {a.id: a for a in trace.agents.values() if a.parent_agent_id == main}
    assert sorted(children) == sorted(f"{sid}.{e['agent_id']}" for e in entries)
    assert len(trace.agents) == 1 + len(entries)
    assert all(a.role == "subagent" for a in children.values())  # no type recorded
    calls = [r for r in conv["requests"] if r["type"] != "subagent"]
    waits: dict[int, list[str]] = {}
    seq, pending = 0, []
    for r in conv["requests"]:
        if r["type"] == "subagent":
            pending.append(f"{sid}.{r['agent_id']}")
        else:
            waits[seq], pending, seq = pending, [], seq + 1
    for n, deps in waits.items():
        assert trace.calls[f"{main}.{n}"].depends_on == deps
    assert any(waits.values())
    for e in entries:
        child = children[f"{sid}.{e['agent_id']}"]
        tool = trace.tool_calls[child.parent_tool_call_id or ""]
        assert tool.name == "delegate" and tool.child_agent_id == child.id
        assert tool.arguments == {"agent_id": e["agent_id"]}  # the parent asked for no type
        assert [c.usage.prompt_tokens for c in trace.calls_of(child.id)] == [
            q["in"] for q in e["requests"]
        ]
    assert [c.usage.prompt_tokens for c in trace.calls_of(main)] == [r["in"] for r in calls]
    n_calls = len(calls) + sum(len(e["requests"]) for e in entries)
    assert f"1 sessions, {1 + len(entries)} agents, {n_calls} calls" in stdout
    # global scope: the sub-agents' shared tool prefix is one set of blocks across agents
    first = [trace.blocks(trace.calls_of(a)[0]) for a in sorted(children)]
    shared = set.intersection(*(set(b) for b in first))
    assert shared and all(not b.startswith("0:") for b in first[0])


def test_tracelab_published_example_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TraceLab's example rows (a Claude Code and a Codex session) keep to the format: no
    warning, nothing recorded; every round a call, every tool a tool call."""
    rows = [json.loads(line) for line in TRACELAB.read_text().splitlines()]
    trace, stdout, err = _import("tracelab", TRACELAB, tmp_path, capsys)
    assert _warnings(err) == []
    src = trace.header.source
    assert src is not None and src.deviations == {} and src.records == len(rows)
    assert sorted(trace.sessions) == sorted({r["session_id"] for r in rows})
    assert len(trace.calls) == len(rows)
    assert len(trace.tool_calls) == sum(len(r["tools"]) for r in rows)
    by_session: dict[str, list[int]] = {}
    for r in sorted(rows, key=lambda r: r["round_index"]):
        out = r["output_tokens"] + (r["reasoning_output_tokens"] or 0)
        by_session.setdefault(r["session_id"], []).append(out)
    for sid, outs in by_session.items():
        assert [c.usage.completion_tokens for c in trace.calls_of(f"{sid}.main")] == outs
    assert "rounds without timestamps" not in stdout


def test_tracelab_sample_with_deviations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same real rows, each with a number as a string and a key TraceLab does not write:
    imported as the original, both counted once a row."""
    rows = [json.loads(line) for line in TRACELAB.read_text().splitlines()]
    for r in rows:
        r["input_tokens_total"] = str(r["input_tokens_total"])
        r["_note"] = "added here"
    src = tmp_path / "changed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    trace, _, err = _import("tracelab", src, tmp_path, capsys)
    n = len(rows)
    assert trace.header.source is not None
    assert trace.header.source.deviations == {
        "_note: extra key": n,
        "input_tokens_total: number as string": n,
    }
    (line,) = _warnings(err)
    assert f"{2 * n} deviations from the tracelab schema accepted" in line
    assert f"input_tokens_total: number as string \u00d7{n}" in line
    assert sorted(c.usage.prompt_tokens for c in trace.calls.values()) == sorted(
        int(r["input_tokens_total"]) for r in rows
    )


def test_mooncake_fast25_conversation_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = [json.loads(line) for line in MOONCAKE.read_text().splitlines()]
    assert all(set(row) == MOONCAKE_KEYS for row in lines)
    trace, stdout, err = _import("mooncake", MOONCAKE, tmp_path, capsys)
    assert _warnings(err) == []
    assert trace.header.source is not None and trace.header.source.deviations == {}
    assert f"{len(lines)} sessions, {len(lines)} agents, {len(lines)} calls" in stdout
    calls = [trace.calls[f"mc{i}.a.0"] for i in range(len(lines))]
    m = trace.header.clock.mono_ns
    for c, row in zip(calls, lines, strict=True):
        assert c.timings.submit_ns - m == row["timestamp"] * 1_000_000
        assert (c.usage.prompt_tokens, c.request.max_tokens) == (
            row["input_length"],
            row["output_length"],
        )
        assert trace.blocks(c) == [str(x) for x in row["hash_ids"]]


def test_mooncake_sample_with_deviations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real lines with AIPerf's session fields added, lengths as integral floats and
    timestamps as strings: imported as the originals, each deviation counted."""
    lines = [json.loads(line) for line in MOONCAKE.read_text().splitlines()]
    changed = []
    for i, row in enumerate(lines):
        changed.append(
            {**row, "timestamp": str(row["timestamp"]), "output_length": float(row["output_length"]),
             "session_id": f"s{i % 3}"}
        )  # fmt: skip
    src = tmp_path / "changed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in changed))
    trace, _, err = _import("mooncake", src, tmp_path, capsys)
    n = len(lines)
    assert trace.header.source is not None
    assert trace.header.source.deviations == {
        "output_length: integral float": n,
        "session_id: extra key": n,
        "timestamp: number as string": n,
    }
    (line,) = _warnings(err)
    assert f"{3 * n} deviations from the mooncake schema accepted" in line
    assert f"extra keys \u00d7{n} (session_id)" in line
    assert [trace.calls[f"mc{i}.a.0"].request.max_tokens for i in range(n)] == [
        row["output_length"] for row in lines
    ]
