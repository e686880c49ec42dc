"""The local sandbox, the `auto` fallback and its one warning line, the registry."""

from __future__ import annotations

import random
import shlex
import shutil
import threading
import time
from pathlib import Path

import pytest

import agentload.sandboxes as sandboxes
from agentload.errors import ConfigError, DockerUnavailableError, SandboxError
from agentload.protocols import Sandbox
from agentload.sandboxes import docker_host, open_sandbox
from agentload.sandboxes.capture import Capture
from agentload.scenarios.models import SandboxSpec


@pytest.fixture
def no_daemon(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every address connect_docker tries points at a socket that does not exist."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.setattr(docker_host, "AGENTLOAD_SOCKET", f"unix://{tmp_path}/a.sock")
    monkeypatch.setattr(docker_host, "DEFAULT_SOCKET", f"unix://{tmp_path}/b.sock")
    monkeypatch.setattr(sandboxes, "_warned", False)


def test_exec_basics(workspace: Path, tight: SandboxSpec) -> None:
    with open_sandbox("local", workspace, tight, "s1") as sb:
        assert isinstance(sb, Sandbox)
        assert (sb.kind, sb.id, sb.workdir) == ("local", "local-s1", str(workspace.resolve()))
        r = sb.exec(["sh", "-c", "cat pkg/mod.py; echo err >&2; exit 3"], timeout_s=10)
        assert (r.exit_code, r.output, r.timed_out) == (3, b"VALUE = 41\nerr\n", False)
        r = sb.exec(["definitely-not-a-command"], timeout_s=10)
        assert r.exit_code == 127 and b"No such file" in r.output
        with pytest.raises(SandboxError, match="empty command"):
            sb.exec([], timeout_s=1)
    with pytest.raises(SandboxError, match="closed"):
        sb.exec(["true"], timeout_s=1)


def test_environment_is_clean(
    workspace: Path, tight: SandboxSpec, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    with open_sandbox("local", workspace, tight, "s2") as sb:
        env = sb.exec(["env"], timeout_s=10).output.decode()
        home = sb.exec(["sh", "-c", "echo $HOME"], timeout_s=10).output.decode().strip()
        assert "sk-secret-value" not in env and "OPENAI_API_KEY" not in env
        assert "PYTHONHASHSEED=0" in env and "TZ=UTC" in env
        assert Path(home).is_dir()
    assert not Path(home).exists()  # the private temp dir goes with the sandbox


def test_timeout_kills_the_whole_process_group(workspace: Path, tight: SandboxSpec) -> None:
    secs = f"{random.randint(30, 99)}.{random.randint(1000, 9999)}"  # a command line of our own
    with open_sandbox("local", workspace, tight, "s3") as sb:
        r = sb.exec(["sh", "-c", f"sleep {secs} & sleep {secs}; echo never"], timeout_s=1)
        assert r.timed_out and r.exit_code == 137 and b"never" not in r.output
        assert (r.end_ns - r.start_ns) / 1e9 < 5
        pattern = f"slee[p] {secs}"
        left = sb.exec(["sh", "-c", f"pgrep -f '{pattern}' || true"], timeout_s=5)
        assert left.output == b""


def test_memory_cap_kills_the_command_and_says_why(workspace: Path, tight: SandboxSpec) -> None:
    hog = "import os, time; os.setsid(); x = b'x' * (1 << 30); print('allocated'); time.sleep(60)"
    with open_sandbox("local", workspace, tight, "s4") as sb:
        # the hog leaves the command's session (setsid) and is still found by its marker
        r = sb.exec(["sh", "-c", f"python3 -c {shlex.quote(hog)} & wait"], timeout_s=30)
        assert r.exit_code == 137 and not r.timed_out, r
        assert b"allocated" not in r.output
        last = r.output.decode().splitlines()[-1]
        assert last.startswith("agentload: killed: the command's processes held ")
        assert last.endswith("resident, past the sandbox's memory limit of 256 MiB")
        assert (r.end_ns - r.start_ns) / 1e9 < 10
        # what stays under the cap runs, however much address space it reserves
        r = sb.exec(["python3", "-c", "x = b'x' * (100 << 20); print('fits')"], timeout_s=30)
        assert (r.exit_code, r.output) == (0, b"fits\n")


def test_a_node_program_runs_under_the_memory_cap(workspace: Path, tight: SandboxSpec) -> None:
    """V8 reserves gigabytes of address space for one WebAssembly memory (Node's own HTTP
    client instantiates one): under an address-space cap of 256m this died of "Out of memory"."""
    if shutil.which("node") is None:
        pytest.skip("no node on this machine")
    wasm = ("WebAssembly.instantiate(new Uint8Array([0,97,115,109,1,0,0,0,5,3,1,0,1]))"
            ".then(() => console.log('wasm ok'))")  # fmt: skip
    with open_sandbox("local", workspace, tight, "s4n") as sb:
        r = sb.exec(["node", "-e", wasm], timeout_s=60)
        assert (r.exit_code, r.output) == (0, b"wasm ok\n")


def test_close_ends_a_running_command(workspace: Path, tight: SandboxSpec) -> None:
    sb = open_sandbox("local", workspace, tight, "s5")
    results = []
    t = threading.Thread(target=lambda: results.append(sb.exec(["sleep", "60"], timeout_s=120)))
    t.start()
    time.sleep(0.3)
    sb.close()
    t.join(timeout=10)
    assert not t.is_alive() and results[0].exit_code == 137


def test_auto_falls_back_to_local_with_one_warning_line(
    no_daemon: None, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for sid in ("a", "b"):
        with open_sandbox("auto", workspace, None, sid) as sb:
            assert sb.kind == "local"
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("agentload: warning: no Docker daemon answers;")
    assert "local subprocesses" in err[0]


def test_docker_kind_without_a_daemon_is_an_error(no_daemon: None, workspace: Path) -> None:
    with pytest.raises(DockerUnavailableError, match="no Docker daemon answers at DOCKER_HOST="):
        open_sandbox("docker", workspace, None, "x")


def test_unknown_kind_lists_the_valid_ones(workspace: Path) -> None:
    with pytest.raises(ConfigError, match="unknown sandbox kind 'vm'; valid: auto, docker, local"):
        open_sandbox("vm", workspace, None, "x")


def test_capture_keeps_head_and_tail() -> None:
    cap = Capture(limit=10)
    for chunk in (b"abc", b"defgh", b"ijklmnop", b"qrst"):
        cap.feed(chunk)
    assert cap.total == 20 and cap.dropped == 10
    out = cap.output()
    assert out.startswith(b"abcde") and out.endswith(b"pqrst") and b"10 bytes" in out
