"""``generate --agent NAME`` and ``eval --agent NAME --oracle`` with the real products: Claude
Code, Codex CLI, mini-swe-agent, aider, Qwen Code, opencode and Gemini CLI, pinned and installed
by ``scripts/agents.sh``, each run in a Docker sandbox against the built-in simulator through the
recording proxy; the Node (and Bun) ones also in the local sandbox, under its memory cap.

A product's session must leave a trace of that product's calls (at least five; aider, which
edits through text, at least three: asking for the file, the edit, the answer to the test run
it did after the edit), its sub-agents where it has them (with calls and tool calls of their
own), its tool calls (aider has none: its edit and its test run are in its next request), a
session that ended ``done`` with exit code 0, and no container. With ``--oracle`` on an eval
task the simulator applies the task's reference fix through the product's own edit tools, and
the task's check must pass."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ready_file import skip_or_fail
from real_agents import AIDER, CLAUDE_CODE, CODEX, MINI_SWE_AGENT, REQUIRE_AGENTS, agent_exe

from agentload.trace.trace import Trace, load_trace

PRODUCTS = {"claude-code": CLAUDE_CODE[0], "codex": CODEX[0], "mini-swe-agent": MINI_SWE_AGENT,
            "aider": AIDER, "qwen-code": "qwen-code@0.15.10", "opencode": "opencode@1.18.33",
            "gemini-cli": "gemini-cli@0.61.0"}  # fmt: skip
SUBAGENTS = {"claude-code", "codex", "qwen-code", "opencode", "gemini-cli"}
TEXT_EDITS = {"aider"}
LOCAL = ("qwen-code", "opencode", "gemini-cli")
"""Run in the local sandbox too: V8 and Bun reserve far more address space than they use."""
TASK = "calendar-leapdays"


def _needs_rg() -> None:
    """opencode's grep and glob run ripgrep, which it downloads on first use (offline:
    ``ripgrep execution failed``, so the oracle cannot find the line to fix);
    ``scripts/agents.sh install`` installs it. Skips without it, or fails in CI."""
    if shutil.which("rg", path="/usr/local/bin:/usr/bin:/bin") is None:
        why = "opencode needs ripgrep in /usr/bin (scripts/agents.sh install: apt-get install ripgrep)"
        skip_or_fail(why, REQUIRE_AGENTS)


def _run(
    command: str, name: str, tmp_path: Path, *extra: str, sandbox: str = "docker"
) -> dict[str, Any]:
    agent_exe(PRODUCTS[name])  # installed by scripts/agents.sh (skips, or fails in CI)
    argv = [sys.executable, "-m", "agentload", command, "--agent", name, "--sandbox", sandbox,
            "-o", str(tmp_path / "out"), "--json", *extra]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _container_gone(docker_client: Any, trace: Trace) -> None:
    from docker.errors import NotFound

    for s in trace.sessions.values():
        with pytest.raises(NotFound):
            docker_client.containers.get(s.meta["sandbox_id"])


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_generate_runs_the_real_product_in_its_sandbox_through_the_proxy(
    name: str, docker_client: Any, tmp_path: Path
) -> None:
    out = _run("generate", name, tmp_path, "-s", "quick")
    row = out["sessions"][0]
    assert row["end_reason"] == "done", row
    trace = load_trace(Path(out["trace"]))
    assert trace.header.generator["agent"] == name  # type: ignore[index]
    assert trace.header.generator["agent_version"] == PRODUCTS[name]  # type: ignore[index]
    [session] = trace.sessions.values()
    assert session.end_reason == "done" and session.meta["exit_code"] == 0
    calls = [c for c in trace.calls.values() if c.session_id == session.id]
    assert len(calls) >= (3 if name in TEXT_EDITS else 5), len(calls)
    assert row["calls"] == len(calls)
    tools = [t for t in trace.tool_calls.values() if t.session_id == session.id]
    if name in TEXT_EDITS:
        # one agent, though it rebuilds every request (aider may also summarize its history in
        # a conversation of its own, at its end: another agent)
        first = min(calls, key=lambda c: c.timings.submit_ns)
        mine = [c for c in calls if c.agent_id == first.agent_id]
        assert len(mine) >= 3, [(c.id, c.agent_id) for c in calls]
        last = max(mine, key=lambda c: c.seq)
        sent = [trace.blobs[m].content.get("content") for m in last.messages]
        assert any("I ran this command" in str(t) for t in sent), "no test run after the edit"
    else:
        assert tools and row["tool_calls"] == len(tools)
    subs = [a for a in trace.agents_of(session.id) if a.parent_agent_id is not None]
    if name in SUBAGENTS:
        assert subs, "no sub-agent recorded"
        sub_ids = {a.id for a in subs}
        assert any(c.agent_id in sub_ids for c in calls)
        assert any(t.agent_id in sub_ids for t in tools), "no sub-agent made a tool call"
    _container_gone(docker_client, trace)


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_eval_with_the_oracle_passes_the_task_through_the_product(
    name: str, docker_client: Any, tmp_path: Path
) -> None:
    if name == "opencode":
        _needs_rg()
    out = _run("eval", name, tmp_path, "--tasks", TASK, "--oracle")
    [row] = out["sessions"]
    assert row["eval_passed"] is True, row
    assert out["eval_overall"]["pass_at_1"] == 1.0, out["eval_overall"]
    trace = load_trace(Path(out["trace"]))
    [session] = trace.sessions.values()
    assert session.eval_passed is True and session.meta["task"] == TASK
    _container_gone(docker_client, trace)


@pytest.mark.parametrize("name", LOCAL)
def test_a_node_product_runs_in_the_local_sandbox_under_its_memory_cap(
    name: str, tmp_path: Path
) -> None:
    """Under the old address-space cap (RLIMIT_AS = the scenario's 2g) these died at start
    (``WebAssembly.instantiate(): Out of memory``); the cap is now on resident memory."""
    out = _run("generate", name, tmp_path, "-s", "quick", sandbox="local")
    assert out["sandbox"] == "local (--sandbox local)"
    [row] = out["sessions"]
    assert row["end_reason"] == "done", row
    trace = load_trace(Path(out["trace"]))
    [session] = trace.sessions.values()
    assert session.sandbox == "local" and session.meta["exit_code"] == 0
    assert row["calls"] >= 3 and row["tool_calls"] >= 1, row
