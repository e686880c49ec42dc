"""The Docker sandbox on a real daemon: isolation, limits, timeouts, cleanup."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from agentload.errors import SandboxError
from agentload.sandboxes import open_sandbox
from agentload.sandboxes.cleanup import cleanup
from agentload.sandboxes.docker import PID_LABEL, SESSION_LABEL
from agentload.sandboxes.image import build_image, default_image_tag, ensure_image, image_info
from agentload.scenarios.models import SandboxSpec

pytestmark = pytest.mark.docker


def _labelled(client: Any, session: str) -> list[Any]:
    return list(client.containers.list(all=True, filters={"label": f"{SESSION_LABEL}={session}"}))


def _sid() -> str:
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def sandbox(docker_client: Any, workspace: Path, tight: SandboxSpec) -> Any:
    sb = open_sandbox("docker", workspace, tight, _sid(), docker_client=docker_client)
    yield sb
    sb.close()


def test_exec_runs_in_the_workspace_as_nobody(sandbox: Any, workspace: Path) -> None:
    assert sandbox.kind == "docker" and sandbox.workdir == "/workspace"
    r = sandbox.exec(["sh", "-c", "pwd; id -u; cat pkg/mod.py; echo err >&2; exit 3"], timeout_s=10)
    assert r.exit_code == 3 and not r.timed_out
    # stdout and stderr are merged (their relative order is not guaranteed by Docker)
    assert sorted(r.output.decode().split("\n")[:4]) == ["/workspace", "65534", "VALUE = 41", "err"]
    assert 0 < r.end_ns - r.start_ns < 10e9
    # the bind mount is live both ways of reading: a host edit is seen inside at once
    (workspace / "new.txt").write_text("from host\n")
    assert sandbox.exec(["cat", "new.txt"], timeout_s=10).output == b"from host\n"
    r = sandbox.exec(["python3", "-c", "import sys; print(sys.version_info[:2])"], timeout_s=20)
    assert r.exit_code == 0 and r.output.decode().strip() == str(sys.version_info[:2])


def test_root_filesystem_is_read_only_and_tmp_is_writable(sandbox: Any) -> None:
    r = sandbox.exec(
        ["sh", "-c", "touch /etc/x 2>/dev/null || echo ro; echo hi > /tmp/y && cat /tmp/y"],
        timeout_s=10,
    )
    assert r.output.decode().split() == ["ro", "hi"]


def test_network_is_unreachable(sandbox: Any) -> None:
    code = textwrap.dedent(
        """
        import socket
        s = socket.socket()
        s.settimeout(3)
        try:
            s.connect(("1.1.1.1", 80))
            print("connected")
        except OSError as e:
            print("errno", e.errno)
        print(sorted(n for _, n in socket.if_nameindex()))
        """
    )
    r = sandbox.exec(["python3", "-c", code], timeout_s=20)
    assert r.exit_code == 0, r.output
    lines = r.output.decode().splitlines()
    assert lines[0] in ("errno 101", "errno 99")  # ENETUNREACH / EADDRNOTAVAIL: no route at all
    assert lines[1] == "['lo']"


def test_memory_cap_kills_the_command_instead_of_hanging(sandbox: Any) -> None:
    r = sandbox.exec(["python3", "-c", "x = bytearray(1 << 30); print('got it')"], timeout_s=60)
    assert r.exit_code == 137 and not r.timed_out
    assert b"got it" not in r.output
    assert (r.end_ns - r.start_ns) / 1e9 < 55


def test_timeout_kills_the_command(sandbox: Any) -> None:
    r = sandbox.exec(["sleep", "30"], timeout_s=1)
    assert r.timed_out and r.exit_code == 124
    assert 0.9 < (r.end_ns - r.start_ns) / 1e9 < 5
    # a command that ignores SIGTERM is killed 2 s later
    ignore = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    r = sandbox.exec(["python3", "-c", ignore], timeout_s=1)
    assert r.timed_out and r.exit_code == 137
    assert (r.end_ns - r.start_ns) / 1e9 < 8
    # a daemonised grandchild holding the output open cannot hold the caller either
    r = sandbox.exec(["sh", "-c", "setsid sleep 60 & echo started"], timeout_s=1)
    assert r.output.startswith(b"started")
    assert (r.end_ns - r.start_ns) / 1e9 < 10
    # and the sandbox is still usable afterwards
    assert sandbox.exec(["echo", "ok"], timeout_s=5).output == b"ok\n"


def test_pids_cap_stops_a_fork_bomb(sandbox: Any) -> None:
    code = textwrap.dedent(
        """
        import os, time
        kids, failed = [], None
        for i in range(200):
            try:
                pid = os.fork()
            except OSError as e:
                failed = e.errno
                break
            if pid == 0:
                time.sleep(5)
                os._exit(0)
            kids.append(pid)
        print(len(kids), failed)
        for k in kids:
            os.kill(k, 9)
        """
    )
    r = sandbox.exec(["python3", "-c", code], timeout_s=30)
    forked, failed = r.output.decode().split()
    assert int(forked) < 64 and failed == "11"  # EAGAIN from the pids cgroup


def test_output_is_capped(docker_client: Any, workspace: Path, tight: SandboxSpec) -> None:
    from agentload.sandboxes.docker import DockerSandbox

    image = ensure_image(docker_client)
    with DockerSandbox(docker_client, image, workspace, tight, _sid(), capture_bytes=1000) as sb:
        r = sb.exec(["python3", "-c", "print('x' * 100000, end='')"], timeout_s=20)
    assert r.exit_code == 0 and r.dropped_bytes == 99000
    assert r.output.startswith(b"x" * 500) and r.output.endswith(b"x" * 500)
    assert b"99000 bytes of output dropped" in r.output


def test_container_is_labelled_and_removed(
    docker_client: Any, workspace: Path, tight: SandboxSpec
) -> None:
    sid = _sid()
    with open_sandbox("docker", workspace, tight, sid, docker_client=docker_client) as sb:
        (c,) = _labelled(docker_client, sid)
        assert c.id.startswith(sb.id) and c.labels[PID_LABEL] == str(os.getpid())
        host = c.attrs["HostConfig"]
        assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"]
        assert host["Memory"] == 256 * 1024**2 and host["PidsLimit"] == 64
        assert host["NanoCpus"] == 1_000_000_000
    assert _labelled(docker_client, sid) == []
    with pytest.raises(SandboxError, match="closed"):
        sb.exec(["true"], timeout_s=1)
    sid = _sid()
    with (
        pytest.raises(RuntimeError),
        open_sandbox("docker", workspace, tight, sid, docker_client=docker_client),
    ):
        raise RuntimeError("agent crashed")
    assert _labelled(docker_client, sid) == []


CHILD = """
import asyncio, sys, time
from pathlib import Path
from agentload.sandboxes import open_sandbox
mode, ws, sid = sys.argv[1:4]
if mode == "thread":  # as generate does: opened off the loop, in a worker thread
    async def main():
        sb = await asyncio.to_thread(open_sandbox, "docker", Path(ws), None, sid)
        print("ready", flush=True)
        await asyncio.to_thread(sb.exec, ["sleep", "120"], timeout_s=300)
    asyncio.run(main())
    sys.exit(0)
sb = open_sandbox("docker", Path(ws), None, sid)
print("ready", flush=True)
if mode == "async":
    async def main():
        await asyncio.to_thread(sb.exec, ["sleep", "120"], timeout_s=300)
    asyncio.run(main())
else:
    sb.exec(["sleep", "120"], timeout_s=300)
"""


def _start_child(mode: str, workspace: Path, sid: str) -> subprocess.Popen[str]:
    env = {**os.environ}
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, mode, str(workspace), sid],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line == "ready\n", proc.stderr.read() if proc.stderr else ""
    time.sleep(0.5)  # let it block inside the exec
    return proc


@pytest.mark.parametrize(
    ("mode", "sig"),
    [
        ("sync", signal.SIGINT),
        ("async", signal.SIGINT),
        ("sync", signal.SIGTERM),
        ("thread", signal.SIGTERM),
    ],
)
def test_no_container_survives_a_signal(
    docker_client: Any, workspace: Path, mode: str, sig: signal.Signals
) -> None:
    sid = _sid()
    proc = _start_child(mode, workspace, sid)
    assert len(_labelled(docker_client, sid)) == 1
    t0 = time.monotonic()
    proc.send_signal(sig)
    proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 15  # not held until the exec's own timeout
    if sig == signal.SIGTERM:
        assert proc.returncode == -signal.SIGTERM
    else:
        assert proc.returncode != 0
    assert _labelled(docker_client, sid) == []


def test_cleanup_removes_what_a_kill_9_left(docker_client: Any, workspace: Path) -> None:
    sid = _sid()
    proc = _start_child("sync", workspace, sid)
    live = _sid()
    with open_sandbox("docker", workspace, None, live, docker_client=docker_client):
        proc.kill()
        proc.communicate(timeout=10)
        assert len(_labelled(docker_client, sid)) == 1  # the orphan
        report = cleanup(docker_client)
        assert _labelled(docker_client, sid) == []
        assert len(_labelled(docker_client, live)) == 1  # ours: its process is alive
        assert any(c.startswith(cid) for cid in report.removed for c in [cid])
        assert report.kept_live
    # the command line does the same, in one line per container
    proc = _start_child("sync", workspace, sid)
    proc.kill()
    proc.communicate(timeout=10)
    out = subprocess.run(
        [sys.executable, "-m", "agentload.cli", "sandbox", "cleanup"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "removed " in out.stdout and "container(s) removed" in out.stdout
    assert _labelled(docker_client, sid) == []


def test_image_build_and_named_images(docker_client: Any, workspace: Path) -> None:
    tag = f"agentload-sandbox:test-{uuid.uuid4().hex[:6]}"
    lines: list[str] = []
    try:
        info = build_image(docker_client, tag, lines.append)
        assert lines[-1] == f"built {tag}" and len(lines) >= 3
        assert "/usr" in info.mounts and info.built_here
        assert info.python_prefix == os.path.realpath(sys.base_prefix)
        # a named image is used as it is
        spec = SandboxSpec(image=tag, memory="256m")
        with open_sandbox("docker", workspace, spec, _sid(), docker_client=docker_client) as sb:
            r = sb.exec(["python3", "-c", "import test.support; print('ok')"], timeout_s=30)
            assert r.output == b"ok\n"
    finally:
        docker_client.images.remove(tag, force=True)
    assert image_info(docker_client, tag) is None
    with pytest.raises(SandboxError, match="is not on this Docker host"):
        open_sandbox(
            "docker", workspace, SandboxSpec(image=tag), _sid(), docker_client=docker_client
        )
    assert ensure_image(docker_client).tag == default_image_tag()


def test_a_named_image_that_cannot_run_leaves_nothing(docker_client: Any, workspace: Path) -> None:
    """An image without the agentload labels gets no host mounts; one without `sleep` fails."""
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w"):
        pass
    tag = f"agentload-test-empty:{uuid.uuid4().hex[:6]}"
    docker_client.api.import_image_from_data(
        buf.getvalue(), repository=tag.split(":")[0], tag=tag.split(":")[1]
    )
    sid = _sid()
    try:
        info = image_info(docker_client, tag)
        assert info is not None and info.mounts == () and not info.built_here
        with pytest.raises(SandboxError, match=f"cannot start a container from {tag}"):
            open_sandbox(
                "docker", workspace, SandboxSpec(image=tag), sid, docker_client=docker_client
            )
        assert _labelled(docker_client, sid) == []
    finally:
        docker_client.images.remove(tag, force=True)


def test_cli_build_prints_progress(docker_client: Any) -> None:
    tag = f"agentload-sandbox:test-{uuid.uuid4().hex[:6]}"
    try:
        out = subprocess.run(
            [sys.executable, "-m", "agentload.cli", "sandbox", "build", "--tag", tag],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith(tag) and "building" in out.stderr
        assert f"built {tag}" in out.stderr
    finally:
        docker_client.images.remove(tag, force=True)
