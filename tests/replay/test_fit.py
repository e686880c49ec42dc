"""Fitting a trace to a smaller server: ``--max-context N --fit cut-session|drop-session``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from replay_helpers import plans_of, run_cli
from replay_traces import Shape, agentic_trace

from agentload.errors import ReplayError
from agentload.replay.run import load_plans


def _total(trace: Path, call: str) -> int:
    """Prompt + pinned output of one recorded call: what --max-context compares."""
    c = next(p.calls[call] for p in plans_of(trace) if call in p.calls)
    return c.prompt_tokens + c.expected_tokens


def test_cut_session_keeps_each_session_up_to_its_first_call_above_the_limit(
    trace_path: Path,
) -> None:
    # the orchestrator's last call (reading both children) is the only one above the limit
    limit = _total(trace_path, "s0-c1")
    assert _total(trace_path, "s0-c2") > limit
    (plan,), info = load_plans([str(trace_path)], max_context=limit, fit="cut-session")
    assert set(plan.calls) == {"s0-c0", "s0-c1", "s0-sub1-c0", "s0-sub1-c1", "s0-sub2-c0"} | {
        "s0-sub2-c1"
    }
    assert info["cut_sessions"] == [{"session": "s0", "kept_calls": 6, "dropped_calls": 1}]
    assert info["excluded_sessions"] == [] and info["dropped_calls"] == 1
    # the prefix structure is kept: every kept call still waits for its recorded predecessors
    assert [e.pred for e in plan.calls["s0-sub1-c0"].preds] == ["s0-c1"]
    assert all(e.pred in plan.calls for c in plan.calls.values() for e in c.preds)
    assert plan.calls["s0-c1"].succs == ["s0-sub1-c0", "s0-sub2-c0"]


def test_calls_that_depend_on_a_cut_call_go_too(trace_path: Path) -> None:
    # the delegating call is above the limit: the sub-agents it starts (small prompts, well
    # within the limit) and the call that reads their results depend on it and go with it
    limit = _total(trace_path, "s0-c0")
    assert _total(trace_path, "s0-sub1-c1") < limit < _total(trace_path, "s0-c1")
    (plan,), info = load_plans([str(trace_path)], max_context=limit)
    assert list(plan.calls) == ["s0-c0"] and plan.n_agents == 1
    assert info["fit"] == "cut-session"
    assert info["cut_sessions"] == [{"session": "s0", "kept_calls": 1, "dropped_calls": 6}]


def test_drop_session_leaves_out_whole_sessions(tmp_path: Path) -> None:
    small = agentic_trace(tmp_path / "small.jsonl", shape=Shape(system_words=10))
    big = agentic_trace(tmp_path / "big.jsonl", shape=Shape(system_words=3000))
    limit = _total(small, "s0-c2")
    plans, info = load_plans([str(small), str(big)], max_context=limit, fit="drop-session")
    assert [p.key for p in plans] == ["0:s0"] and len(plans[0].calls) == 7
    assert info["excluded_sessions"] == ["1:s0"] and info["cut_sessions"] == []
    # a session whose first call is above the limit has nothing left either way
    for fit in ("drop-session", "cut-session"):
        with pytest.raises(ReplayError, match="every session has a"):
            load_plans([str(big)], max_context=limit, fit=fit)  # type: ignore[arg-type]


def test_a_cut_replay_is_reported_in_the_summary_and_results(
    simulator: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shape = Shape(tool_gap_s=0.01, child_gap_s=0.01, post_gap_s=0.01)
    trace = agentic_trace(tmp_path / "t.jsonl", sessions=2, shape=shape)
    limit = max(_total(trace, "s0-c1"), _total(trace, "s1-c1"))
    assert min(_total(trace, "s0-c2"), _total(trace, "s1-c2")) > limit
    out = tmp_path / "r"
    argv = ["replay", str(trace), "--endpoint", simulator.base_url, "--model", simulator.model]
    argv += ["--max-context", str(limit), "--start-at", "zero", "--out", str(out)]
    assert run_cli(argv) == 0
    printed = capsys.readouterr().out
    line = f"--max-context {limit} (--fit cut-session): 2 session(s) cut (2 calls dropped)"
    assert line in printed
    res = orjson.loads((out / "results.json").read_bytes())
    plan = res["plan"]
    assert plan["fit"] == "cut-session" and plan["sessions"] == 2 and plan["calls"] == 12
    assert [c["dropped_calls"] for c in plan["cut_sessions"]] == [1, 1]
    assert plan["dropped_calls"] == 2 and plan["excluded_sessions"] == []
    (point,) = res["points"]
    assert {r["call"] for r in point["requests"]}.isdisjoint({"s0-c2", "s1-c2"})
    assert all(r["error_kind"] is None for r in point["requests"])
    assert line in (out / "report.html").read_text()


def test_a_bad_fit_is_one_line(
    simulator: Any, trace_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay", str(trace_path), "--endpoint", simulator.base_url, "--model", "x"]
    assert run_cli([*argv, "--max-context", "100", "--fit", "trim"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--fit 'trim': choose cut-session or drop-session") and "\n" not in err
