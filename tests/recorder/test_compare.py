"""``trace stats A --compare B`` on two hand-built traces whose statistics are worked out by
hand in the comments (block size 16: a block id stands for 16 prompt tokens)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agentload.cli import main
from agentload.trace import (
    AgentRecord,
    BlobRecord,
    LLMCallRecord,
    SessionRecord,
    TraceWriter,
    load_trace,
)
from agentload.trace.comparison import compare
from agentload.trace.samples import tool_kind, trace_samples

from .conftest import S, header, llm_call, tool_call


def call(
    cid: str,
    sid: str,
    agent: str,
    seq: int,
    submit: float,
    last: float,
    blocks: list[str],
    completion: int,
    base: tuple[str, int] | None = None,
) -> LLMCallRecord:
    """A call whose prompt is its base's blocks plus ``blocks``, 16 tokens each."""
    tokens = 16 * (len(blocks) + (base[1] if base else 0))
    return llm_call(
        cid, agent, seq, submit, last, tokens, blocks,
        completion_ours=completion, base=base, session=sid,
    )  # fmt: skip


def agent(aid: str, sid: str, start: float, parent: str | None = None) -> AgentRecord:
    return AgentRecord(
        id=aid,
        session_id=sid,
        role="orchestrator" if parent is None else "test_runner",
        parent_agent_id=parent,
        parent_tool_call_id="t-del" if parent else None,
        start_ns=int(start * S),
    )


async def write(path: Path, records: list[Any]) -> Path:
    async with TraceWriter(path, header()) as w:
        await w.write(
            BlobRecord(id="b" * 32, kind="message", content={"role": "user", "content": "x"})
        )
        for rec in records:
            await w.write(rec)
    return path


@pytest.fixture
async def trace_a(tmp_path: Path) -> Path:
    """Two sessions. s1 (0-10 s): an orchestrator (3 calls) and one sub-agent (2 calls);
    s2 (20-25 s): an orchestrator (2 calls). Both orchestrators start with blocks S, Y."""
    return await write(
        tmp_path / "a.agentload.jsonl.zst",
        [
            SessionRecord(id="s1", start_ns=0),
            agent("orch", "s1", 0.0),
            call("a1", "s1", "orch", 0, 0.0, 1.0, list("SYAB"), 10),  # 64 tokens
            tool_call("t1", "orch", "a1", "read_file", 1.0, 1.5, session="s1"),
            call("a2", "s1", "orch", 1, 2.0, 3.0, list("CD"), 20, ("a1", 4)),  # 96
            tool_call("t-del", "orch", "a2", "delegate", 3.0, 7.0, child="sub", session="s1"),
            agent("sub", "s1", 3.0, parent="orch"),
            call("b1", "s1", "sub", 0, 3.5, 4.0, ["X1", "X2"], 40),  # 32
            tool_call("t2", "sub", "b1", "run_tests", 4.0, 6.0, session="s1"),
            call("b2", "s1", "sub", 1, 6.0, 6.5, ["X3"], 50, ("b1", 2)),  # 48
            call("a3", "s1", "orch", 2, 8.0, 9.0, list("EF"), 30, ("a2", 6)),  # 128
            SessionRecord(id="s1", start_ns=0, end_ns=10 * S, end_reason="done"),
            SessionRecord(id="s2", start_ns=20 * S),
            agent("orch2", "s2", 20.0),
            call("c1", "s2", "orch2", 0, 20.0, 21.0, list("SYG"), 60),  # 48
            tool_call("t3", "orch2", "c1", "Grep", 21.0, 21.5, session="s2"),
            call("c2", "s2", "orch2", 1, 22.0, 23.0, list("HI"), 70, ("c1", 3)),  # 80
            SessionRecord(id="s2", start_ns=20 * S, end_ns=25 * S, end_reason="done"),
        ],
    )


@pytest.fixture
async def trace_b(tmp_path: Path) -> Path:
    """One session (0-20 s), one agent: 160 tokens, a 3 s bash call, then 320 tokens."""
    return await write(
        tmp_path / "b.agentload.jsonl.zst",
        [
            SessionRecord(id="s9", start_ns=0),
            agent("r", "s9", 0.0),
            call("r1", "s9", "r", 0, 0.0, 2.0, [f"R{i}" for i in range(10)], 100),
            tool_call("t9", "r", "r1", "Bash", 2.0, 5.0, session="s9"),
            call("r2", "s9", "r", 1, 6.0, 7.0, [f"Q{i}" for i in range(10)], 200, ("r1", 10)),
            SessionRecord(id="s9", start_ns=0, end_ns=20 * S, end_reason="done"),
        ],
    )


# Worked out by hand: (n, p10, p50, p90) per statistic; percentiles interpolate linearly
# between closest ranks (rank = q/100 * (n-1)).
EXPECTED_A: dict[str, tuple[int, float | None, float | None, float | None]] = {
    # outputs 10..70: p10 at rank 0.6 -> 16, p90 at rank 5.4 -> 64
    "output_tokens_per_call": (7, 16.0, 40.0, 64.0),
    # orch +32 +32, sub +16, orch2 +32 -> [16, 32, 32, 32]; p10 at rank 0.3 -> 20.8
    "appended_tokens_per_call": (4, 20.8, 32.0, 32.0),
    "first_prompt_tokens_root": (2, 49.6, 56.0, 62.4),  # [48, 64]
    "first_prompt_tokens_sub": (1, 32.0, 32.0, 32.0),
    "last_prompt_tokens_root": (2, 84.8, 104.0, 123.2),  # [80, 128]
    "calls_per_agent": (3, 2.0, 2.0, 2.8),  # [2, 2, 3]
    "subagents_per_session": (2, 0.1, 0.5, 0.9),  # [0, 1]
    "subagent_call_share": (2, 0.04, 0.2, 0.36),  # s1: 2 of 5 calls, s2: 0 of 2 -> [0, 0.4]
    # orch 2-1 = 1, 8-3 = 5; sub 6-4 = 2; orch2 22-21 = 1 -> [1, 1, 2, 5]
    "gap_s": (4, 1.0, 1.5, 4.1),
    "tool_latency_s.exec": (1, 2.0, 2.0, 2.0),  # run_tests 4-6
    "tool_latency_s.read": (1, 0.5, 0.5, 0.5),  # read_file
    "tool_latency_s.search": (1, 0.5, 0.5, 0.5),  # Grep
    # s1: read 0.5 s + run_tests 2 s over 10 s (delegate is sub-agent time); s2: 0.5 / 5
    "tool_time_share": (2, 0.115, 0.175, 0.235),  # [0.1, 0.25]
    # s1: a2 sees 4 blocks, b2 2, a3 6 -> 192 of 368 tokens; s2: c2 sees 3 -> 48 of 128
    "prefix_reuse": (2, 0.375 + 0.1 * (192 / 368 - 0.375), None, None),
    # the orchestrators' first prompts share S, Y: 32 tokens each way
    "cross_session_prefix_tokens": (2, 32.0, 32.0, 32.0),
    "session_wall_s": (2, 5.5, 7.5, 9.5),  # [5, 10]
}
EXPECTED_B: dict[str, tuple[int, float | None, float | None, float | None]] = {
    "output_tokens_per_call": (2, 110.0, 150.0, 190.0),
    "appended_tokens_per_call": (1, 160.0, 160.0, 160.0),
    "first_prompt_tokens_root": (1, 160.0, 160.0, 160.0),
    "first_prompt_tokens_sub": (0, None, None, None),
    "last_prompt_tokens_root": (1, 320.0, 320.0, 320.0),
    "calls_per_agent": (1, 2.0, 2.0, 2.0),
    "subagents_per_session": (1, 0.0, 0.0, 0.0),
    "subagent_call_share": (1, 0.0, 0.0, 0.0),
    "gap_s": (1, 4.0, 4.0, 4.0),
    "tool_latency_s.exec": (1, 3.0, 3.0, 3.0),  # Bash
    "tool_latency_s.read": (0, None, None, None),
    "tool_latency_s.search": (0, None, None, None),
    "tool_time_share": (1, 0.15, 0.15, 0.15),
    "prefix_reuse": (1, 1 / 3, 1 / 3, 1 / 3),  # r2 sees 10 blocks: 160 of 480
    "cross_session_prefix_tokens": (0, None, None, None),  # one session: nothing to share with
    "session_wall_s": (1, 20.0, 20.0, 20.0),
}


def check_side(side: dict[str, Any], expected: tuple[Any, ...]) -> None:
    n, p10, p50, p90 = expected
    assert side["n"] == n
    for key, want in (("p10", p10), ("p50", p50), ("p90", p90)):
        if want is None:
            continue
        assert side[key] == pytest.approx(want), key


def check(result: dict[str, Any]) -> None:
    stats = result["statistics"]
    assert list(stats) == list(EXPECTED_A)  # table order, tool kinds expanded by name
    for stat, want in EXPECTED_A.items():
        check_side(stats[stat]["a"], want)
        check_side(stats[stat]["b"], EXPECTED_B[stat])
    reuse = stats["prefix_reuse"]
    assert reuse["a"]["p50"] == pytest.approx((192 / 368 + 48 / 128) / 2)
    assert reuse["a"]["pooled"] == pytest.approx(240 / 496)
    assert reuse["b"]["pooled"] == pytest.approx(1 / 3)
    # ratios of the medians, and whether they are within ±25%
    assert stats["output_tokens_per_call"]["ratio"] == pytest.approx(40 / 150)
    assert stats["output_tokens_per_call"]["within"] is False
    assert stats["calls_per_agent"]["ratio"] == 1.0
    assert stats["calls_per_agent"]["within"] is True
    assert stats["tool_time_share"]["ratio"] == pytest.approx(0.175 / 0.15)
    assert stats["tool_time_share"]["within"] is True
    assert stats["subagents_per_session"]["ratio"] is None  # B's median is 0, A's is not
    assert stats["first_prompt_tokens_sub"]["ratio"] is None  # B has no sample
    # KS: the 7 outputs of A all lie below B's 2 -> D = 1; the exact two-sided p-value is the
    # share of the C(9, 2) = 36 orderings as extreme: both of B first or both last -> 2/36.
    ks = stats["output_tokens_per_call"]["ks"]
    assert ks["d"] == 1.0
    assert ks["p"] == pytest.approx(2 / 36)
    assert stats["gap_s"]["ks"] is None  # B has one sample
    assert result["tolerance"] == 0.25


def test_compare_known_answers(trace_a: Path, trace_b: Path) -> None:
    a = trace_samples(load_trace(trace_a))
    b = trace_samples(load_trace(trace_b))
    check(compare(a, b))


def test_compare_cli_json_and_plot(
    trace_a: Path, trace_b: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    png = tmp_path / "cmp.png"
    argv = ["trace", "stats", str(trace_a), "--compare", str(trace_b), "--json", "--plot", str(png)]
    with pytest.raises(SystemExit) as exc:
        main([*argv, "--labels", "ours,theirs"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    result = orjson.loads(out)
    check(result)
    assert result["a"] == {"label": "ours", "files": [str(trace_a)]}
    assert result["b"]["files"] == [str(trace_b)]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 20_000  # 15 panels drawn
    assert f"plot written to {png}" in err


async def test_compare_pools_files_and_directories(
    trace_a: Path, trace_b: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several files on a side are pooled; a directory stands for its traces. A and B pooled
    against their own directory: the same samples on both sides."""
    with pytest.raises(SystemExit) as exc:
        main(["trace", "stats", str(trace_a), "--compare", str(trace_b)])
    out, _ = capsys.readouterr()
    assert exc.value.code == 0
    # the human table: one row per statistic, the pooled reuse line
    assert "prefix reuse over all sessions (token-weighted): a 0.48, b 0.33" in out
    assert "tool latency (s): search" in out
    with pytest.raises(SystemExit):
        main(["trace", "stats", str(trace_a), str(trace_b), "--compare", str(tmp_path), "--json"])
    result = orjson.loads(capsys.readouterr()[0])
    assert result["b"]["files"] == [str(trace_a), str(trace_b)]
    outputs = result["statistics"]["output_tokens_per_call"]
    assert (outputs["a"]["n"], outputs["a"]["p50"]) == (9, 50.0)  # 10..70, 100, 200
    for stat, row in result["statistics"].items():
        assert row["a"] == row["b"], stat
        assert row["ratio"] in (1.0, None), stat
        assert row["ks"] is None or row["ks"]["d"] == 0.0, stat


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--compare", "missing.agentload.jsonl.zst"], "missing.agentload.jsonl.zst"),
        (["--labels", "onlyone", "--compare", "B"], "--labels 'onlyone': give two names"),
        (["--labels", "a,b"], "--labels names the two sides of --compare"),
        (["--compare", "B", "--plot", "x.svg"], "--plot x.svg: the plot is written as PNG"),
    ],
)
def test_compare_bad_input_is_one_line(
    trace_a: Path,
    trace_b: Path,
    extra: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = [str(trace_b) if x == "B" else x for x in extra]
    with pytest.raises(SystemExit) as exc:
        main(["trace", "stats", str(trace_a), *argv])
    _, err = capsys.readouterr()
    assert exc.value.code == 2
    assert message in err
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("read_file", "read"),
        ("Read", "read"),
        ("search_code", "search"),
        ("Glob", "search"),
        ("run_tests", "exec"),
        ("Bash", "exec"),
        ("exec_command", "exec"),
        ("apply_patch", "edit"),
        ("MultiEdit", "edit"),
        ("WebFetch", "web"),
        ("mcp__files__read_file", "read"),
        ("frobnicate", "other"),
    ],
)
def test_tool_kinds(name: str, kind: str) -> None:
    assert tool_kind(name) == kind
