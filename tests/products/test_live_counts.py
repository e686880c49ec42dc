"""A product session's live counters follow what the recorder writes, while the product runs.

The agent here makes calls offering a ``bash`` tool until the simulator asks for a command, runs
it, sends its result, and then waits (at most 60 s) for a file that the test's progress sink creates
only once the session's live ``SessionStats`` show every call it made recorded, their tokens,
the tool call and the tool's time: if the counters moved only at the end, the agent would give up and fail."""

from __future__ import annotations

import asyncio
import shlex
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentload.agents.tracing import SessionStats
from agentload.generate.dispatch import generate
from agentload.generate.options import GenerateOptions
from agentload.scenarios.loader import load_scenario

AGENT = r"""
import json, os, subprocess, sys, time, urllib.request
base, model, go = os.environ["OPENAI_BASE_URL"], os.environ["AGENTLOAD_MODEL"], sys.argv[1]
tools = [{"type": "function", "function": {"name": "bash", "description": "Run a shell command",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                         "required": ["command"]}}}]
messages = [{"role": "system", "content": "You are a coding agent. Use bash."},
            {"role": "user", "content": os.environ["AGENTLOAD_TASK"][:300]}]
def ask():
    body = json.dumps({"model": model, "messages": messages, "tools": tools, "max_tokens": 1024})
    req = urllib.request.Request(base + "/chat/completions", body.encode(),
                                 {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.load(r)["choices"][0]["message"]
for _ in range(3):  # until the model asks for a tool
    reply = ask()
    messages.append(reply)
    if reply.get("tool_calls"):
        break
    messages.append({"role": "user", "content": "Go on."})
for tc in reply.get("tool_calls") or []:
    time.sleep(0.3)
    out = subprocess.run(["ls"], capture_output=True, text=True).stdout
    messages.append({"role": "tool", "tool_call_id": tc["id"], "content": out[:500]})
ask()
for _ in range(600):
    if os.path.exists(go):
        sys.exit(0)
    time.sleep(0.1)
print("the live counters never showed the calls", file=sys.stderr)
sys.exit(3)
"""


class _Sink:
    """Creates ``go`` once a session's live counters show its first call and tool run."""

    def __init__(self, go: Path) -> None:
        self.go = go
        self.seen: dict[str, Any] = {}
        self.threads: list[threading.Thread] = []

    def session_started(self, stats: SessionStats) -> None:
        t = threading.Thread(target=self._watch, args=(stats,), daemon=True)
        self.threads.append(t)
        t.start()

    def _watch(self, stats: SessionStats) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and stats.end_reason is None:
            done = stats.calls >= 2 and stats.orchestrator_calls == stats.calls  # all recorded
            if stats.tool_ns > 0 and done:
                self.seen = {
                    "agents": stats.agents, "tool_calls": stats.tool_calls,
                    "prompt": stats.prompt_tokens, "orch": stats.orch_last_prompt,
                    "orch_calls": stats.orchestrator_calls, "tool_ns": stats.tool_ns,
                }  # fmt: skip
                self.go.touch()
                return
            time.sleep(0.05)

    def session_ended(self, stats: SessionStats) -> None:
        pass


@pytest.fixture
def agent_folder() -> Iterator[Path]:
    """The agent's own folder, open to the sandbox's user: the confined local sandbox mounts
    it back (read-only, live), so the ``go`` file the test makes there reaches the agent
    (pytest's temp folder is the host's private ``/tmp``, which the sandbox does not see)."""
    folder = Path(tempfile.mkdtemp(prefix="agentload-test-live-", dir="/var/tmp"))
    try:
        folder.chmod(0o755)
        exe = folder / "agent"
        exe.write_text("#!/usr/bin/env python3\n" + AGENT)
        exe.chmod(0o755)
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_a_products_counters_move_while_it_runs(
    simulator: Any, tmp_path: Path, agent_folder: Path
) -> None:
    go = agent_folder / "go"
    command = f"cmd:{shlex.quote(str(agent_folder / 'agent'))} {shlex.quote(str(go))}"
    opts = GenerateOptions(
        scenario=load_scenario("quick", []), out=tmp_path / "out", agent=command,
        sandbox="local", endpoint=simulator.base_url, model="agentload-sim",
    )  # fmt: skip
    sink = _Sink(go)
    result = asyncio.run(generate(opts, sink))
    for t in sink.threads:
        t.join(5)
    (stats,) = result.sessions
    assert stats.end_reason == "done", stats.detail
    seen = sink.seen
    assert seen["agents"] == 1 and seen["tool_calls"] >= 1 and seen["orch_calls"] >= 2, seen
    assert seen["tool_ns"] >= 300_000_000, seen  # the agent's 0.3 s before its tool ran
    assert seen["prompt"] > seen["orch"] > 0, seen  # two calls' prompts; the last one's
    # at the end, the counters are the trace's
    assert stats.calls == seen["orch_calls"] and stats.tool_calls >= 1
    assert stats.prompt_tokens == seen["prompt"]
