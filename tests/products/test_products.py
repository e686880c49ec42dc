"""``generate --agent NAME`` and ``eval --agent NAME --oracle`` with the real products: Claude
Code, Codex CLI, mini-swe-agent and aider, pinned and installed by ``scripts/agents.sh``, each
run in a Docker sandbox against the built-in simulator through the recording proxy.

A product's session must leave a trace of that product's calls (at least five; aider, which
edits through text, at least three: asking for the file, the edit, the answer to the test run
it did after the edit), its sub-agents where it has them (with calls and tool calls of their
own), its tool calls (aider has none: its edit and its test run are in its next request), a
session that ended ``done`` with exit code 0, and no container. With ``--oracle`` on an eval
task the simulator applies the task's reference fix through the product's own edit tools, and
the task's check must pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from real_agents import AIDER, CLAUDE_CODE, CODEX, MINI_SWE_AGENT, agent_exe

from agentload.trace.trace import Trace, load_trace

PRODUCTS = {"claude-code": CLAUDE_CODE[0], "codex": CODEX[0], "mini-swe-agent": MINI_SWE_AGENT,
            "aider": AIDER}  # fmt: skip
SUBAGENTS = {"claude-code", "codex"}
TEXT_EDITS = {"aider"}
TASK = "calendar-leapdays"


def _run(command: str, name: str, tmp_path: Path, *extra: str) -> dict[str, Any]:
    agent_exe(PRODUCTS[name])  # installed by scripts/agents.sh (skips, or fails in CI)
    argv = [sys.executable, "-m", "agentload", command, "--agent", name, "--sandbox", "docker",
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
    out = _run("eval", name, tmp_path, "--tasks", TASK, "--oracle")
    [row] = out["sessions"]
    assert row["eval_passed"] is True, row
    assert out["eval_overall"]["pass_at_1"] == 1.0, out["eval_overall"]
    trace = load_trace(Path(out["trace"]))
    [session] = trace.sessions.values()
    assert session.eval_passed is True and session.meta["task"] == TASK
    _container_gone(docker_client, trace)
