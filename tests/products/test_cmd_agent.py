"""``generate --agent 'cmd:...'``: any agent started by a command line, in the sandbox, its
calls recorded through the proxy into the run's trace, one exact session per run session.

The agent here is a few lines of Python that speak Chat Completions over plain HTTP to the URL
agentload gives it (``OPENAI_BASE_URL``), run a tool of their own (``ls``) between calls and
exit; each session's calls must land in that session of the trace."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentload.trace.trace import load_trace

AGENT = r"""
import json, os, subprocess, urllib.request
base, model = os.environ["OPENAI_BASE_URL"], os.environ["AGENTLOAD_MODEL"]
messages = [{"role": "user", "content": os.environ["AGENTLOAD_TASK"][:200]}]
for turn in range(3):
    body = json.dumps({"model": model, "messages": messages, "max_tokens": 16}).encode()
    req = urllib.request.Request(base + "/chat/completions", body, {"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        reply = json.load(r)["choices"][0]["message"]["content"]
    listing = subprocess.run(["ls"], capture_output=True, text=True).stdout
    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "ls: " + listing[:200]}]
print("tiny agent done")
"""


def _generate(tmp_path: Path, sandbox: str, *extra: str) -> dict[str, Any]:
    cmd = "cmd:python3 -c " + shlex.quote(AGENT)
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", cmd, "-s", "quick",
            "--sandbox", sandbox, "-o", str(tmp_path / "out"), "--json", *extra]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("sandbox", ["docker", "local"])
def test_a_command_line_agent_is_recorded_session_by_session(
    request: pytest.FixtureRequest, sandbox: str, tmp_path: Path
) -> None:
    if sandbox == "docker":
        request.getfixturevalue("docker_client")
    out = _generate(tmp_path, sandbox, "-n", "2", "-p", "2")
    rows = {r["session"]: r for r in out["sessions"]}
    assert set(rows) == {"s0-0", "s0-1"}
    assert all(r["end_reason"] == "done" and r["calls"] == 3 for r in rows.values()), rows
    trace = load_trace(Path(out["trace"]))
    assert trace.header.generator["agent"].startswith("cmd:python3 -c ")  # type: ignore[index]
    by_session: dict[str, int] = {}
    for c in trace.calls.values():
        by_session[c.session_id] = by_session.get(c.session_id, 0) + 1
    assert by_session == {"h-s0-0": 3, "h-s0-1": 3}
    ends = {s.id: s for s in trace.sessions.values()}
    assert {s.end_reason for s in ends.values()} == {"done"}
    assert all(s.meta.get("exit_code") == 0 for s in ends.values()), ends


def test_a_failing_agent_ends_its_session_error_with_its_last_words(tmp_path: Path) -> None:
    """It made no call: the trace still holds its session, with the exit code, the sandbox and
    the last lines it printed, the key it was given masked."""
    key = "sk-agentload-test-0123456789abcdef"
    argv = [sys.executable, "-m", "agentload", "generate", "--agent",
            "cmd:echo starting; echo \"no key configured: $OPENAI_API_KEY\" >&2; exit 3",
            "-s", "quick", "--sandbox", "local", "-o", str(tmp_path), "--json"]  # fmt: skip
    env = {**os.environ, "OPENAI_API_KEY": key}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 1, done.stderr[-2000:]  # every session failed
    out = json.loads(done.stdout.strip().splitlines()[-1])
    row = out["sessions"][0]
    assert row["end_reason"] == "error" and row["calls"] == 0
    [session] = load_trace(Path(out["trace"])).sessions.values()
    assert (session.id, session.end_reason, session.sandbox) == ("h-s0-0", "error", "local")
    assert session.meta["exit_code"] == 3 and session.start_ns < (session.end_ns or 0)
    tail = session.meta["output_tail"]
    assert tail.startswith("starting\nno key configured: ") and key not in tail, tail


def test_an_agent_that_cannot_start_leaves_its_session_record(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "agentload", "generate", "--agent",
            "cmd:./not-in-the-workspace --task x", "-s", "quick", "--sandbox", "local",
            "-o", str(tmp_path), "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 1, done.stderr[-2000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    [session] = load_trace(Path(out["trace"])).sessions.values()
    assert session.end_reason == "error" and session.meta["exit_code"] == 127
    assert "not-in-the-workspace: not found" in session.meta["output_tail"], session.meta


def test_an_unknown_agent_is_one_line_and_exit_2(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", "cursor", "-s", "quick",
            "-o", str(tmp_path)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert (
        len(lines) == 1
        and "--agent 'cursor': unknown agent; valid: langgraph, claude-code" in lines[0]
    )
    assert not any(tmp_path.iterdir())  # nothing written, nothing contacted
