"""``generate --agent ... --ray``: agent product sessions on the workers of a real Ray cluster
on 127.0.0.1. Each worker runs its sessions' products through a recording proxy of its own;
the driver's trace holds every session's calls, exactly as a run on one machine does."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cmd_agent import AGENT

from agentload.trace.trace import load_trace

pytestmark = pytest.mark.ray


def test_product_sessions_run_on_ray_workers_into_one_trace(
    ray_cluster: Any, tmp_path: Path
) -> None:
    argv = [sys.executable, "-m", "agentload", "generate", "--agent",
            "cmd:python3 -c " + shlex.quote(AGENT), "-s", "quick", "--sandbox", "local",
            "-n", "4", "-p", "2", "--ray", ray_cluster.address, "--workers", "2",
            "-o", str(tmp_path), "--json"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                          env=ray_cluster.subprocess_env())  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    rows = {r["session"]: r for r in out["sessions"]}
    assert set(rows) == {f"s0-{i}" for i in range(4)}
    assert all(r["end_reason"] == "done" and r["calls"] == 3 for r in rows.values()), rows
    trace = load_trace(Path(out["trace"]))
    generator = trace.header.generator or {}
    assert generator["agent"].startswith("cmd:") and generator["ray"]["workers"] == 2
    per_session: dict[str, int] = {}
    for c in trace.calls.values():
        per_session[c.session_id] = per_session.get(c.session_id, 0) + 1
    assert per_session == {f"h-s0-{i}": 3 for i in range(4)}
    assert {s.end_reason for s in trace.sessions.values()} == {"done"}
    for c in trace.calls.values():  # every blob a call names came through once
        assert all(b in trace.blobs for b in c.messages)
