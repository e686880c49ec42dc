"""``agentload trace import tracelab``: rounds written here from the published schema (AIPerf's
tracelab_trace / _tracelab_convert: one JSONL row per LLM round) become one session per
``session_id`` with timings from the events, tool calls and block ids built from the prefix split."""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import run, write_jsonl

from agentload.replay.plan import build_plans
from agentload.trace import load_trace
from agentload.trace.stats import compute_stats
from agentload.trace.trace import Trace

S = 1_000_000_000
T0 = datetime.datetime(2025, 10, 1, 12, 0, 0, tzinfo=datetime.UTC)


def ts(seconds: float, z: bool = True) -> str:
    text = (T0 + datetime.timedelta(seconds=seconds)).isoformat()
    return text.replace("+00:00", "Z") if z else text


def row(sid: str, index: int, n_in: int, prefix: int, out: int, events: list[tuple[str, float]],
        tools: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:  # fmt: skip
    return {
        "session_id": sid,
        "round_index": index,
        "input_tokens_total": n_in,
        "prefix_tokens": prefix,
        "newly_append_tokens": n_in - prefix,
        "output_tokens": out,
        "reasoning_output_tokens": extra.pop("reasoning", None),
        "model": extra.pop("model", "claude-sonnet"),
        "timing_events": [{"event_type": k, "timestamp": ts(t)} for k, t in events],
        "tools": tools or [],
        "first_input_event_type": events[0][0] if events else None,
        "provider": sid.split(":")[0],
        **extra,
    }


def rows() -> list[dict[str, Any]]:
    """Session claude:s1 (three rounds, stored out of order, the last after a compaction),
    interleaved with codex:s2 (one round, and one without any timestamp)."""
    r0 = row("claude:s1", 0, 1000, 0, 100, [("user_message", 0), ("text", 3), ("tool_call", 4)],
             [{"tool_name": "Bash", "emitted_at": ts(4), "result_at": ts(6),
               "tool_wall_latency_ms": 2000}], reasoning=20)  # fmt: skip
    r1 = row("claude:s1", 1, 1500, 1000, 50, [("tool_result", 6), ("text", 8)],
             [{"tool_name": "Read", "tool_wall_latency_ms": 500}])  # fmt: skip
    r2 = row("claude:s1", 2, 900, 320, 10, [("user_message", 20), ("text", 21)])
    c0 = row("codex:s2", 0, 200, 0, 7, [("user_message", 2), ("text", 2.5)], model="gpt-5")
    c0["timing_events"][0]["timestamp"] = ts(2, z=False)  # "+00:00" as well as "Z"
    c1 = row("codex:s2", 1, 300, 200, 7, [], model="gpt-5")
    c1["timing_events"] = []
    return [r1, c0, r0, c1, r2]


@pytest.fixture
def imported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Trace, str]:
    src = write_jsonl(tmp_path / "rounds.jsonl", rows())
    out = tmp_path / "t.agentload.jsonl.zst"
    code, stdout, err = run(["trace", "import", "tracelab", str(src), "-o", str(out)], capsys)
    assert code == 0, err
    return load_trace(out), stdout


def test_sessions_calls_and_header(imported: tuple[Trace, str]) -> None:
    trace, stdout = imported
    assert "2 sessions, 2 agents, 4 calls from 1 tracelab file (block size 64)" in stdout
    assert "1 rounds without timestamps left out" in stdout
    h = trace.header
    assert h.redacted and h.block_size == 64 and h.model == "claude-sonnet"
    assert h.source is not None and (h.source.format, h.source.records) == ("tracelab", 5)
    assert h.clock.unix_ns == int(T0.timestamp()) * S  # the first round's wall time
    assert sorted(trace.sessions) == ["claude:s1", "codex:s2"]
    calls = trace.calls_of("claude:s1.main")
    assert [c.seq for c in calls] == [0, 1, 2]
    assert [(c.usage.prompt_tokens_ours, c.usage.completion_tokens) for c in calls] == [
        (1000, 120), (1500, 50), (900, 10)]  # fmt: skip
    assert all(c.messages == [] and c.prefix is not None for c in calls)


def test_timings_tools_and_gaps(imported: tuple[Trace, str]) -> None:
    trace, _ = imported
    m = trace.header.clock.mono_ns
    c0, c1, _ = trace.calls_of("claude:s1.main")
    assert (c0.timings.submit_ns, c0.timings.last_token_ns) == (m, m + 4 * S)
    assert (c1.timings.submit_ns, c1.timings.last_token_ns) == (m + 6 * S, m + 8 * S)
    assert trace.calls["codex:s2.main.0"].timings.submit_ns == m + 2 * S
    bash = trace.tool_calls["claude:s1.main.0.t0"]
    assert (bash.name, bash.start_ns, bash.end_ns) == ("Bash", m + 4 * S, m + 6 * S)
    read = trace.tool_calls["claude:s1.main.1.t0"]  # no stamps: after the round, its latency
    assert (read.start_ns, read.end_ns) == (m + 8 * S, m + 8_500_000_000)
    assert c1.depends_on == ["claude:s1.main.0.t0"] and c0.response.finish_reason == "tool_calls"
    (plan,) = [p for p in build_plans([trace], salt_at="off") if p.session_id == "claude:s1"]
    edges = {c: [(e.pred, e.gap_ns) for e in plan.calls[c].preds] for c in plan.calls}
    assert edges["claude:s1.main.1"] == [("claude:s1.main.0", 2 * S)]
    assert edges["claude:s1.main.2"] == [("claude:s1.main.1", 12 * S)]
    stats = compute_stats(trace)
    assert stats["tool_calls_by_name"]["Bash"] == {"count": 1, "p50_s": 2.0, "p90_s": 2.0}
    assert stats["gaps_s"]["max"] == 12.0


def test_block_ids_from_prefix_split(imported: tuple[Trace, str]) -> None:
    trace, _ = imported
    b0, b1, b2 = (trace.blocks(c) for c in trace.calls_of("claude:s1.main"))
    assert b0 == [f"0:{i}" for i in range(15)]  # 1000 // 64 whole blocks, all fresh
    assert b1[:15] == b0 and b1[15:] == [f"0:{i}" for i in range(15, 23)]  # 1000 cached
    assert b2[:5] == b0[:5] and len(b2) == 14 and not set(b2[5:]) & set(b1)  # compacted
    assert trace.blocks(trace.calls["codex:s2.main.0"]) == ["1:0", "1:1", "1:2"]


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        ({"input_tokens_total": "many"}, "rounds.jsonl:line 2: input_tokens_total: expected an integer"),
        ({"timing_events": [{"event_type": "text", "timestamp": "yesterday"}]},
         "rounds.jsonl:line 2: timing_events[0].timestamp: not an ISO-8601 timestamp"),
        ({"session_id": None}, "rounds.jsonl:line 2: session_id: missing"),
        ({"tools": [{"tool_name": 3}]}, "rounds.jsonl:line 2 tools[0]: tool_name: expected a string"),
        ({"output_tokens": -1}, "rounds.jsonl:line 2: output_tokens: expected an integer >= 0"),
        ({"input_tokens_total": [1500]}, "rounds.jsonl:line 2: input_tokens_total: expected an integer, got [1500]"),
        ({"tools": {"tool_name": "Read"}}, "rounds.jsonl:line 2: tools: expected a list of objects"),
    ],
)  # fmt: skip
def test_bad_fields(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], change: dict[str, Any], expect: str
) -> None:
    items = rows()
    items[1].update(change)
    src = write_jsonl(tmp_path / "rounds.jsonl", items)
    out = tmp_path / "bad.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "tracelab", str(src), "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert expect in err, err
    assert not out.exists()


def test_truncated_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "rounds.jsonl"
    data = write_jsonl(src, rows()).read_bytes()
    src.write_bytes(data[: len(data) - 40])
    code, _, err = run(
        ["trace", "import", "tracelab", str(src), "-o", str(tmp_path / "x.agentload.jsonl.zst")],
        capsys,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "rounds.jsonl:line 5: invalid JSON (the file ends inside it: cut short?)" in err
