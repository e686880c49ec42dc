"""The acceptance run: the default `coding-session` on the simulator with Docker sandboxes.

Marked slow (one full session: tens of seconds). The numbers are the issue's acceptance
criteria, read with the same `compute_stats` that `agentload trace stats --json` prints.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from agent_runs import run_generate

from agentload import contract
from agentload.trace.stats import compute_stats


@pytest.mark.slow
@pytest.mark.docker
def test_coding_session_acceptance(docker_client: Any, tmp_path: Path) -> None:
    result, trace = run_generate(tmp_path, scenario="coding-session", sandbox="docker")
    stats = compute_stats(trace)
    (orch,) = [a for a in stats["agents"] if a["role"] == contract.ORCHESTRATOR]
    assert 50_000 <= orch["prompt_tokens_first"] <= 70_000
    assert 360_000 <= orch["prompt_tokens_last"] <= 440_000
    subs = [a for a in stats["agents"] if a["role"] != contract.ORCHESTRATOR]
    assert {a["role"] for a in subs} == set(contract.SUBAGENT_ROLES)
    assert all(a["parent"] == orch["id"] for a in subs)
    assert 150 <= stats["output_tokens_per_call"]["p50"] <= 350
    assert 500 <= stats["appended_tokens_per_call"]["p50"] <= 1_500
    assert stats["prefix_reuse_ceiling"] >= 0.9
    assert stats["tool_time_share"] is not None and 0 < stats["tool_time_share"] < 1
    runs = [t for t in trace.tool_calls.values() if t.name == contract.RUN_TESTS]
    assert runs and all(t.sandbox_id and t.exit_code is not None for t in runs)
    assert any(t.exit_code != 0 for t in runs)
    assert trace.sessions["s0-0"].sandbox == "docker"
    assert trace.sessions["s0-0"].end_reason == "context_target"
    assert result.sessions[0].orch_last_prompt == orch["prompt_tokens_last"]
    leftover = docker_client.containers.list(
        all=True, filters={"label": f"agentload.pid={os.getpid()}"}
    )
    assert leftover == []
