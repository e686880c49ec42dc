"""An agent (``generate --agent 'cmd:...'``) that fills its workspace, in the local sandbox and in
Docker: with ``-c sandbox.disk=64m`` it is killed soon after it passes 64 MiB, the session ends
``disk_quota`` with the documented line, the host folder never held much more than the quota, and
no process of the agent is left.

The agent writes 1 MiB at a time (up to 8 × the quota, so that without a quota it ends by itself)
and says how much after each write (the write that crosses the quota may be killed before it
returns: its count is then one short, and the kill line says what the folder held); it also leaves a child that carries a random token in its
command line, which the check looks for in ``/proc`` of this host (a container's processes are
there too). The run's temp folder (its workspaces, the local sandbox's ``HOME``) is one of its own,
measured every few milliseconds while the run goes."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from genrun import survivors

from agentload.trace.trace import load_trace

KINDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]
QUOTA_MIB = 64
SLACK_MIB = 128
"""What a writer as fast as the disk may add between two looks of the watch (it looks every 5 ms
past half the quota; ≈20 MiB on an idle machine, up to 46 MiB seen with two busy processes on
2 cores: docs/reliability.md)."""

_AGENT = r"""
import os, subprocess, sys
token, limit = sys.argv[1], int(sys.argv[2])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", token])
chunk = os.urandom(1 << 20)
with open("filler.bin", "wb") as fh:
    for i in range(1, limit + 1):
        fh.write(chunk)
        fh.flush()
        print(f"WROTE {i}", flush=True)
print("DONE", flush=True)
"""


@pytest.fixture
def run_tmp() -> Iterator[Path]:
    """The run's own temp folder, open to the sandbox's user (pytest's folders are not)."""
    folder = Path(tempfile.mkdtemp(prefix="agentload-test-quota-", dir="/var/tmp"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class _Peak:
    """The most ``folder`` held, sampled until ``stop()``."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.peak = folder, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(0.005):
            self.peak = max(self.peak, _held(self.folder))

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.peak


def _held(folder: Path) -> int:
    """The bytes allocated under ``folder`` (its own walk, not the one under test)."""
    total = 0
    for dirpath, _, names in os.walk(folder):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_an_agent_that_fills_its_workspace_is_stopped_at_the_quota(
    kind: str, request: pytest.FixtureRequest, run_tmp: Path, tmp_path: Path
) -> None:
    if kind == "docker":
        request.getfixturevalue("docker_client")
    token = uuid.uuid4().hex
    script = base64.b64encode(_AGENT.encode()).decode()
    agent = f"cmd:echo {script} | base64 -d > agent.py && python3 agent.py {token} {QUOTA_MIB * 8}"
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", agent, "-s", "quick",
            "--sandbox", kind, "-c", f"sandbox.disk={QUOTA_MIB}m", "-o", str(tmp_path / "out")]  # fmt: skip
    peak = _Peak(run_tmp)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False,
                              env={**os.environ, "TMPDIR": str(run_tmp)})  # fmt: skip
        held = peak.stop()
        assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-3000:]
        line = f"workspace over its disk quota ({QUOTA_MIB}.0 MiB)"
        assert f": disk_quota: {line}\n" in done.stdout, done.stdout[-2000:]
        [session] = load_trace(next((tmp_path / "out").glob("*.jsonl.zst"))).sessions.values()
        assert session.end_reason == "disk_quota", session
        assert session.meta["exit_code"] == 137, session.meta
        tail = session.meta["output_tail"].splitlines()
        assert "DONE" not in tail
        # The watch counts the blocks a write holds before the write returns, so the write that
        # crosses the quota may be killed before the agent says it is done: the agent's own count
        # is then one chunk short, and the kill line says what the folder held when the watch
        # looked (the agent may write on until the kill lands).
        wrote = max(int(m[1]) for ln in tail if (m := re.match(r"WROTE (\d+)", ln)))
        assert QUOTA_MIB - 1 <= wrote <= QUOTA_MIB + SLACK_MIB, (kind, tail[-3:])
        killed = re.fullmatch(
            rf"agentload: killed: ([\d.]+) MiB written into the workspace, "
            rf"past the sandbox's disk quota of {QUOTA_MIB}\.0 MiB",
            tail[-1],
        )
        assert killed is not None, tail[-3:]
        assert QUOTA_MIB <= float(killed[1]) <= QUOTA_MIB + SLACK_MIB, tail[-1]
        assert held <= (QUOTA_MIB + SLACK_MIB) << 20, f"the host folder held {held >> 20} MiB"
        assert survivors(token) == []
    finally:
        peak.stop()
        for line in survivors(token):
            os.kill(int(line.split(":")[0]), 9)


def test_the_watch_counts_blocks_held_once_and_stops_walking_past_the_quota(
    tmp_path: Path,
) -> None:
    from agentload.sandboxes.diskwatch import tree_bytes

    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data").write_bytes(os.urandom(1 << 20))
    os.link(tmp_path / "sub" / "data", tmp_path / "link")
    with open(tmp_path / "sparse", "wb") as fh:
        fh.truncate(1 << 30)  # 1 GiB long, nothing held
    held = tree_bytes([str(tmp_path)])
    assert 1 << 20 <= held < 2 << 20, held
    assert tree_bytes([str(tmp_path)], stop_past=1) <= held


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_command_past_the_quota_is_killed_and_ends_the_session(
    kind: str, request: pytest.FixtureRequest, run_tmp: Path
) -> None:
    from agentload.sandboxes import open_sandbox
    from agentload.scenarios import load_scenario
    from agentload.tools import Toolbox

    client = request.getfixturevalue("docker_client") if kind == "docker" else None
    scenario = load_scenario("quick", ["sandbox.disk=32m"])
    scenario.test_command = ["python3", "-c", _AGENT, uuid.uuid4().hex, "200"]
    ws = run_tmp / "ws"
    ws.mkdir()
    ws.chmod(0o777)  # root's: Docker's user is then nobody
    with open_sandbox(kind, ws, scenario.sandbox, "quota-tools", docker_client=client) as sb:
        box = Toolbox(sb, ws, scenario)
        r = await box.call("run_tests", {})
        assert r.exit_code == 137 and "DONE" not in r.text, r.text[-500:]
        assert r.text.endswith(
            "exit code: 137 (killed: workspace over its disk quota (32.0 MiB))\n"
        )
        assert box.over_limit == "workspace over its disk quota (32.0 MiB)"
        assert _held(ws) <= (32 + SLACK_MIB) << 20
