"""Stats on a hand-built trace whose answers are worked out by hand in the comments."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentload.trace import (
    AgentRecord,
    BlobRecord,
    SessionRecord,
    TraceWriter,
    load_trace,
)
from agentload.trace.stats import STATS_KEYS, compute_stats

from .conftest import S, header, llm_call, tool_call

call, tool = llm_call, tool_call


@pytest.fixture
async def known_trace(tmp_path: Path) -> Path:
    path = tmp_path / "known.agentload.jsonl.zst"
    async with TraceWriter(path, header()) as w:
        for rec in [
            SessionRecord(id="s1", start_ns=0),
            AgentRecord(id="orch", session_id="s1", role="orchestrator", start_ns=0),
            BlobRecord(id="b" * 32, kind="message", content={"role": "user", "content": "x"}),
            # o0: 64 of our tokens (blocks ABCD), server 1000 prompt / 50 completion.
            call("o0", "orch", 0, 0.0, 0.5, 64, list("ABCD"), server=1000, completion=50, cached=0),
            tool("t1", "orch", "o0", "search_code", 0.6, 1.6),
            # o1 extends o0: blocks ABCD + EF.
            call(
                "o1",
                "orch",
                1,
                2.0,
                2.5,
                96,
                list("EF"),
                server=1500,
                completion=30,
                base=("o0", 4),
                cached=900,
            ),
            tool("t2", "orch", "o1", "delegate", 2.6, 6.6, child="sub"),
            tool("t3", "orch", "o1", "read_file", 2.6, 3.1),
            AgentRecord(
                id="sub",
                session_id="s1",
                parent_agent_id="orch",
                parent_tool_call_id="t2",
                role="code_search",
                start_ns=int(2.6 * S),
            ),
            # The sub-agent has no server usage: our counts stand in.
            call("s0", "sub", 0, 2.7, 3.0, 32, list("XY"), completion_ours=20),
            tool("t4", "sub", "s0", "run_tests", 3.1, 3.9),
            call("s1", "sub", 1, 4.0, 4.5, 48, list("Z"), completion_ours=10, base=("s0", 2)),
            call(
                "o2",
                "orch",
                2,
                7.0,
                7.2,
                128,
                list("GH"),
                server=2000,
                completion=40,
                base=("o1", 6),
                cached=1400,
            ),
            SessionRecord(id="s1", start_ns=0, end_ns=10 * S, end_reason="done"),
        ]:
            await w.write(rec)
    return path


def test_stats_known_answers(known_trace: Path) -> None:
    st = compute_stats(load_trace(known_trace))
    assert set(STATS_KEYS) <= set(st)
    assert st["sessions"] == 1
    assert st["llm_calls"] == 5
    assert st["agents"] == [
        {
            "id": "orch",
            "role": "orchestrator",
            "parent": None,
            "session": "s1",
            "calls": 3,
            "prompt_tokens_first": 1000,
            "prompt_tokens_last": 2000,
            "completion_tokens_total": 120,
            "tool_calls": 3,
        },
        {
            "id": "sub",
            "role": "code_search",
            "parent": "orch",
            "session": "s1",
            "calls": 2,
            "prompt_tokens_first": 32,
            "prompt_tokens_last": 48,
            "completion_tokens_total": 30,
            "tool_calls": 1,
        },
    ]
    assert st["tool_calls_by_name"] == {
        "delegate": {"count": 1, "p50_s": 4.0, "p90_s": 4.0},
        "read_file": {"count": 1, "p50_s": 0.5, "p90_s": 0.5},
        "run_tests": {"count": 1, "p50_s": pytest.approx(0.8), "p90_s": pytest.approx(0.8)},
        "search_code": {"count": 1, "p50_s": 1.0, "p90_s": 1.0},
    }
    # Gaps: orch 2.0-0.5=1.5 and 7.0-2.5=4.5; sub 4.0-3.0=1.0 -> sorted [1.0, 1.5, 4.5].
    assert st["gaps_s"]["p50"] == pytest.approx(1.5)
    assert st["gaps_s"]["p90"] == pytest.approx(1.5 + 0.8 * 3.0)
    assert st["gaps_s"]["max"] == pytest.approx(4.5)
    # Outputs [50, 30, 20, 10, 40] -> p50 30, p90 at rank 3.6 -> 46.
    assert st["output_tokens_per_call"] == {"p50": 30.0, "p90": pytest.approx(46.0)}
    # Appended: orch 500, 500; sub 16.
    assert st["appended_tokens_per_call"] == {"p50": 500.0, "p90": 500.0}
    # Prefix reuse: o1 sees ABCD (64 tokens), s1 sees XY (32), o2 sees ABCDEF (96);
    # 192 reused of 64+96+32+48+128 = 368 prompt tokens.
    assert st["prefix_reuse_ceiling"] == pytest.approx(192 / 368)
    # Tool time: search 0.6-1.6 (1.0) + union of read_file 2.6-3.1 and run_tests 3.1-3.9 (1.3);
    # the delegate call is sub-agent time, not tool time. Session wall 10 s.
    assert st["tool_time_share"] == pytest.approx(0.23)
    assert st["wall_s"] == pytest.approx(10.0)
    assert st["truncated"] is None
    assert st["cached_tokens_total"] == 2300
    # Server/ours over the calls with both counts: (1000+1500+2000) / (64+96+128); the header
    # (written as before generate calibrated) has no calibration.
    assert st["prompt_tokens_server_per_ours"] == pytest.approx(4500 / 288)
    assert st["token_calibration"] is None
    assert st["roles"]["orchestrator"]["prompt_tokens_max"] == 2000
    assert st["roles"]["code_search"] == {
        "agents": 1,
        "calls": 2,
        "prompt_tokens_max": 48,
        "completion_tokens_total": 30,
    }


def test_plot_is_a_readable_png(known_trace: Path, tmp_path: Path) -> None:
    from matplotlib import image

    from agentload.trace.plot import plot_context_growth

    out = plot_context_growth(load_trace(known_trace), tmp_path / "plots" / "growth.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = image.imread(out)
    assert img.shape[0] >= 600 and img.shape[1] >= 1000  # README-sized
    assert (img[..., :3] < 0.2).all(axis=-1).sum() > 500  # the dark orchestrator line is drawn


def test_long_prefix_chains_resolve_without_recursion() -> None:
    from agentload.trace import Trace

    trace = Trace(path="mem", header=header())
    prev = None
    for i in range(5000):  # e.g. a long run whose calls each extend the previous one
        c = call(
            f"c{i}",
            "a",
            i,
            float(i),
            float(i) + 0.5,
            16 * (i + 1),
            [f"{i:016x}"],
            base=(prev, i) if prev else None,
        )
        trace.calls[c.id] = c
        prev = c.id
    blocks = trace.blocks(trace.calls["c4999"])
    assert blocks == [f"{i:016x}" for i in range(5000)]
    assert compute_stats(trace)["prefix_reuse_ceiling"] == pytest.approx(
        sum(16 * i for i in range(5000)) / sum(16 * (i + 1) for i in range(5000))
    )


async def test_stats_of_a_truncated_trace(tmp_path: Path) -> None:
    from .conftest import write_session

    path = tmp_path / "t.jsonl"
    await write_session(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    st = compute_stats(load_trace(path))
    assert st["truncated"] and "incomplete last line" in st["truncated"]
    assert st["llm_calls"] > 0 and set(STATS_KEYS) <= set(st)
