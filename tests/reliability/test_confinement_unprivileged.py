"""The confined local sandbox when agentload does not run as root (issue 49): ``confine_inside``
then adds a user namespace that maps only its own uid. Run here as ``nobody`` (the host side
drops to uid 65534 before it starts the inside script), a command in it writes only its
workspace, reaches only the port it was given (bridged out), not another loopback port, a
world-writable host Unix socket or a host file it could write outside, and leaves no process.
Where the kernel gives such a user no namespace, ``generate --agent`` with ``--sandbox local``
(or ``auto`` without Docker) is one line and exit 2 before anything starts: never unconfined.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from genrun import listener
from ready_file import skip_or_fail

from agentload.sandboxes import confine

NOBODY = 65534
ROOT = "AGENTLOAD_REQUIRE_ROOT"
"""CI runs as root and sets it: a skip here fails there."""


_COMMAND = r"""
import os, socket, sys
ok, port, other, sock_path, outside = [], int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
def tried(name, fn):
    try:
        fn()
        ok.append(name)
    except OSError:
        pass
def write(path):
    with open(path, "w") as fh:
        fh.write("x")
tried("workspace", lambda: write("mine.txt"))
tried("outside", lambda: write(outside))
tried("etc", lambda: write("/etc/agentload-nobody-probe"))
tried("proxy", lambda: socket.create_connection(("127.0.0.1", port), timeout=3).sendall(b"hi"))
tried("other", lambda: socket.create_connection(("127.0.0.1", other), timeout=3).sendall(b"hi"))
tried("unix", lambda: socket.socket(socket.AF_UNIX).connect(sock_path))
print("REACHED", " ".join(sorted(ok)), flush=True)
"""


def _python_anyone_runs() -> str | None:
    """A Python interpreter that uid 65534 may execute (every folder above it searchable)."""
    for cand in (os.path.realpath(sys.executable), "/usr/bin/python3", "/usr/local/bin/python3"):
        path = Path(cand)
        if not path.is_file():
            continue
        folders = [*path.parents]
        if all(os.stat(p).st_mode & 0o001 for p in folders) and os.stat(path).st_mode & 0o005:
            return str(path)
    return None


@pytest.fixture
def place() -> Iterator[Path]:
    """A folder on the host that ``nobody`` may reach: the workspace, a socket, a writable file."""
    if os.geteuid() != 0:
        skip_or_fail("this test drops to uid 65534 itself: it needs root to start", ROOT)
    root = Path(tempfile.mkdtemp(prefix="agentload-nobody-", dir="/var/lib"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_a_command_confined_without_root_reaches_only_its_workspace_and_port(
    place: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = _python_anyone_runs()
    if python is None:
        skip_or_fail("no Python interpreter here that uid 65534 may run", ROOT)
    monkeypatch.setattr(confine, "_python", lambda: [python, "-I", "-S", confine._INSIDE])
    inside = subprocess.run([python, "-I", "-S", confine._INSIDE, "--probe"], capture_output=True,
                            text=True, timeout=30, user=NOBODY, group=NOBODY, extra_groups=[])  # fmt: skip
    if inside.returncode != 0:
        skip_or_fail(
            f"the kernel refuses a user namespace to uid 65534: {inside.stdout.strip()}", ROOT
        )
    workspace = place / "ws"
    workspace.mkdir()
    os.chown(workspace, NOBODY, NOBODY)
    outside = place / "outside.txt"
    outside.write_text("")
    os.chown(outside, NOBODY, NOBODY)  # the host lets nobody write it: the sandbox must not
    proxy, proxy_got = listener(socket.AF_INET, ("127.0.0.1", 0))
    other, other_got = listener(socket.AF_INET, ("127.0.0.1", 0))
    sock_path = str(place / "s.sock")
    unix, unix_got = listener(socket.AF_UNIX, sock_path)
    os.chmod(sock_path, 0o777)
    port, other_port = proxy.getsockname()[1], other.getsockname()[1]
    token = uuid.uuid4().hex

    def drop() -> None:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)

    try:
        argv = [python, "-c", _COMMAND, str(port), str(other_port), sock_path, str(outside), token]
        run = confine.start(argv, cwd=str(workspace), env={"PATH": "/usr/bin:/bin"},
                            writable=[str(workspace)], readable=[], ports=[port],
                            tmpfs_bytes=16 << 20, preexec=drop)  # fmt: skip
        try:
            out = run.proc.communicate(timeout=60)[0].decode(errors="replace")
        finally:
            run.bridge.close()
        assert run.proc.returncode == 0, out
        [line] = [x for x in out.splitlines() if x.startswith("REACHED")]
        assert line.split()[1:] == ["proxy", "workspace"], out
        assert (workspace / "mine.txt").read_text() == "x"
        assert outside.read_text() == "" and not Path("/etc/agentload-nobody-probe").exists()
        assert proxy_got == [b"hi"]  # the command's bytes came through the bridge
        assert other_got == [] and unix_got == []
        alive = subprocess.run(["pgrep", "-f", token], capture_output=True, text=True)
        assert alive.stdout.strip() == "", alive.stdout
    finally:
        for srv in (proxy, other, unix):
            srv.close()


_NO_USERNS = (
    "echo 1 > /proc/sys/user/max_user_namespaces && "
    'exec unshare --user --map-user=65534 --map-group=65534 "$@"'
)
"""A user namespace whose own limit leaves none to make below it, entered as a uid that is not
root there: a kernel that refuses the confinement to a user without root, as many do."""


@pytest.mark.parametrize("sandbox", ["local", "auto"])
def test_where_the_kernel_refuses_the_namespaces_an_agent_is_refused_in_one_line(
    tmp_path: Path, sandbox: str
) -> None:
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", "cmd:true",
            "--sandbox", sandbox, "-o", str(tmp_path / "out")]  # fmt: skip
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/agentload-49.sock"}
    outer = ["unshare", "--user", "--map-root-user", "sh", "-c", _NO_USERNS, "sh"]
    try:
        done = subprocess.run([*outer, *argv], capture_output=True, text=True, timeout=120,
                              env=env, check=False)  # fmt: skip
    except FileNotFoundError:
        skip_or_fail("no unshare(1) here (util-linux)", ROOT)
    if "unshare failed" in done.stderr:
        skip_or_fail(
            f"this kernel gives no user namespace to start from: {done.stderr.strip()}", ROOT
        )
    lines = [x for x in done.stderr.splitlines() if x.strip()]
    assert done.returncode == 2 and len(lines) == 1, done.stderr[-2000:]
    assert "cannot confine the agent here (unshare:" in lines[0], lines[0]
    assert "an agent never runs unconfined" in lines[0], lines[0]
    assert "started" not in done.stdout, done.stdout
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
