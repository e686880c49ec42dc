"""``agentload record`` in front of the real engine (llama.cpp's llama-server, Gemma 3 270M):
``generate`` through the proxy writes a trace, and the proxy's trace tells the same story, tool
calls the tiny model cut or botched (and the harness repaired) included; the recorded trace
replays against the engine."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from agentload.generate.options import GenerateOptions
from agentload.generate.run import generate
from agentload.options.replay import ReplayConfig
from agentload.record.server import RecordOptions, RecordServer
from agentload.replay.run import run_replay
from agentload.scenarios.loader import load_scenario
from agentload.trace.trace import load_trace

sys.path.insert(0, str(Path(__file__).parents[1] / "record"))

from equivalence import assert_same_story

pytestmark = pytest.mark.engine

# As tests/engine/test_harness.py: short replies (tool calls often cut mid-arguments), a few calls.
SMALL = [
    "orchestrator.max_tokens=48",
    "subagents.code_search.max_tokens=48",
    "subagents.test_runner.max_tokens=48",
    "subagents.file_reader.max_tokens=48",
    "orchestrator.initial_context_tokens=1500",
    "orchestrator.max_rounds=4",
    "orchestrator.max_parallel_delegations=1",
    "subagents.code_search.max_turns=2",
    "subagents.test_runner.max_turns=2",
    "subagents.file_reader.max_turns=2",
    "wall_budget_s=75",
]


def test_generate_through_the_proxy_in_front_of_the_engine(engine: Any, tmp_path: Path) -> None:
    rs = RecordServer(RecordOptions(upstream=engine.url, out=tmp_path / "rec", port=0)).start()
    try:
        opts = GenerateOptions(
            scenario=load_scenario("quick", SMALL),
            endpoint=rs.url + "/v1",
            model=engine.model,
            sandbox="local",
            retries=1,
            call_timeout_s=60,
            out=tmp_path / "own",
        )
        own_path = asyncio.run(generate(opts)).trace_path
    finally:
        rec_path = rs.stop()
    own, rec = load_trace(own_path), load_trace(rec_path)
    assert own.truncated is None and rec.truncated is None
    assert len(own.calls) == len(rec.calls) >= 1
    assert len(own.sessions) == len(rec.sessions) == 1
    assert_same_story(own, rec, min_tool_calls=0)
    # the engine's own usage is recorded beside our count
    assert all(c.usage.prompt_tokens for c in rec.calls.values() if c.error is None)
    cfg = ReplayConfig(
        traces=[str(rec_path)],
        endpoint=engine.url,
        model=engine.model,
        levels=[1],
        sessions=1,
        start_at="zero",
        gap_scale=0.0,
        timeout_s=120,
    )
    res = asyncio.run(run_replay(cfg))
    reqs = [r for p in res.points for r in p.requests]
    assert len(reqs) == len(rec.calls)
    assert all(r.error is None for r in reqs), [r.error for r in reqs if r.error]
