"""A hostile agent (``generate --agent 'cmd:...'``) in the local sandbox and in Docker: it writes
wherever it can, dials another loopback port, the host's Docker socket and a Unix socket anyone
may reach in a folder no sandbox masks by name, and leaves daemons
behind (``env -i setsid``, a double fork, a late writer). After the run, nothing of the host
outside the workspace was written, only the recording proxy was reachable (its calls are in the
trace), and no process of the agent is alive; the late writer's file never appears.

Every process the agent starts carries a random token in its command line, so the check reads
``/proc`` of this host (a container's processes are there too)."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from genrun import listener, survivors

from agentload.trace.trace import load_trace

KINDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]

_AGENT = r"""
import json, os, socket, subprocess, sys, time, urllib.request
TOKEN, TARGETS, OTHER, SOCKETS = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
body = {"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": "hi"}]}
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps(body).encode(), headers={"Content-Type": "application/json",
    "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(req, timeout=60).read()
reached = []
for path in TARGETS:
    try:
        with open(path, "w") as fh:
            fh.write(TOKEN)
        reached.append(path)
    except OSError:
        pass
try:
    socket.create_connection(("127.0.0.1", OTHER), timeout=3).sendall(TOKEN.encode())
    reached.append("port")
except OSError:
    pass
for path in SOCKETS:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(path)
        reached.append(path)
    except OSError:
        pass
sleeper = [sys.executable, "-c", "import time; time.sleep(30)", TOKEN]
subprocess.Popen(["env", "-i", "setsid", *sleeper])
if os.fork() == 0:
    if os.fork() == 0:
        os.setsid()
        os.execv(sys.executable, sleeper)
    os._exit(0)
late = "sleep 4; touch " + TARGETS[-1] + ".late"
subprocess.Popen(["sh", "-c", late, TOKEN], start_new_session=True)
print("REACHED " + json.dumps(reached), flush=True)
sys.exit(3)
"""


@pytest.fixture
def other_port() -> Iterator[tuple[int, list[bytes]]]:
    """A listener on this host's loopback that no sandboxed command may reach."""
    srv, got = listener(socket.AF_INET, ("127.0.0.1", 0))
    yield srv.getsockname()[1], got
    srv.close()


@pytest.fixture
def host_socket() -> Iterator[tuple[str, list[bytes]]]:
    """A Unix socket any user may connect to, bound on this host outside every folder the
    confined sandbox masks (as a daemon's in ``/var/lib`` or a home folder)."""
    base = Path("/var/lib") if os.access("/var/lib", os.W_OK) else Path.home()
    folder = base / f"agentload-hostile-{uuid.uuid4().hex[:8]}"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    path = str(folder / "s.sock")
    srv, got = listener(socket.AF_UNIX, path)
    os.chmod(path, 0o777)
    yield path, got
    srv.close()
    os.unlink(path)
    folder.rmdir()


def _sockets() -> list[str]:
    docker = os.environ.get("DOCKER_HOST", "")
    paths = ["/var/run/docker.sock", "/run/docker.sock", "/var/tmp/agentload-docker/docker.sock"]
    if docker.startswith("unix://"):
        paths.append(docker[len("unix://") :])
    return [p for p in dict.fromkeys(paths) if os.path.exists(p)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_a_hostile_agent_reaches_nothing_but_the_proxy_and_leaves_nothing(
    kind: str,
    request: pytest.FixtureRequest,
    other_port: tuple[int, list[bytes]],
    host_socket: tuple[str, list[bytes]],
    tmp_path: Path,
) -> None:
    if kind == "docker":
        request.getfixturevalue("docker_client")
    token = uuid.uuid4().hex
    names = ["/etc", "/usr", "/root", "/var/tmp", "/dev/shm", "/tmp"]
    targets = [f"{d}/agentload-hostile-{token}" for d in names]
    port, got = other_port
    script = base64.b64encode(_AGENT.encode()).decode()
    sockets = [*_sockets(), host_socket[0]]
    args = [token, json.dumps(targets), str(port), json.dumps(sockets)]
    quoted = " ".join("'" + a + "'" for a in args)
    agent = f"cmd:echo {script} | base64 -d > agent.py && python3 agent.py {quoted}"
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", agent, "-s", "quick",
            "--sandbox", kind, "-o", str(tmp_path / "out"), "--json"]  # fmt: skip
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 1, done.stderr[-3000:]  # the agent exits 3: a failed session
        [session] = load_trace(next((tmp_path / "out").glob("*.jsonl.zst"))).sessions.values()
        tail = session.meta.get("output_tail", "")
        assert session.meta.get("exit_code") == 3, session.meta
        [line] = [ln for ln in tail.splitlines() if ln.startswith("REACHED ")]
        reached = json.loads(line[len("REACHED ") :])  # its own account (a private /tmp is fine)
        assert [r for r in reached if r == "port" or r in sockets] == [], reached
        assert json.loads(done.stdout.strip().splitlines()[-1])["sessions"][0]["calls"] == 1
        assert got == [], "another loopback port was reached"
        assert host_socket[1] == [], "a host Unix socket was reached"
        assert survivors(token) == []
        time.sleep(6)  # the late writer's time, and more
        assert survivors(token) == []
        written = [t for t in targets for t in (t, t + ".late") if os.path.exists(t)]
        assert written == []
    finally:
        for t in targets:
            for p in (t, t + ".late"):
                if os.path.exists(p):
                    os.unlink(p)
        for line in survivors(token):
            os.kill(int(line.split(":")[0]), 9)
