"""A real agent product against the real engine: ``generate --agent mini-swe-agent`` in a Docker
sandbox, through the recording proxy, against llama.cpp serving Gemma 3 270M. The tiny model
may well not do the task; the session must end for a recorded reason and leave a valid trace
holding the engine's answers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "record"))
from real_agents import MINI_SWE_AGENT, agent_exe

from agentload.trace import load_trace
from agentload.trace.validate import validate_trace

pytestmark = pytest.mark.engine

REASONS = {"done", "error", "wall_budget"}


def test_mini_swe_agent_on_the_engine_ends_for_a_reason_and_leaves_a_valid_trace(
    engine: Any, docker_client: Any, tmp_path: Path
) -> None:
    agent_exe(MINI_SWE_AGENT)
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", "mini-swe-agent",
            "-s", "quick", "-c", "wall_budget_s=90",
            "-c", "task=Run ls, then finish.", "--agent-max-tokens", "48", "--endpoint", engine.url,
            "--model", engine.model, "--sandbox", "docker", "-o", str(tmp_path), "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    [row] = out["sessions"]
    assert row["end_reason"] in REASONS, row
    path = Path(out["trace"])
    report = validate_trace(path)  # raises on a damaged file
    assert report.truncated is None and report.counts["llm_call"] >= 1, report
    trace = load_trace(path)
    [session] = trace.sessions.values()
    assert session.end_reason == row["end_reason"]
    answered = [c for c in trace.calls.values() if c.timings.first_token_ns is not None]
    assert answered, f"no call answered: {done.stderr[-2000:]}"
    assert all(c.usage.prompt_tokens for c in answered)  # the engine's own counts
