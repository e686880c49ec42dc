"""`agentload sandbox cleanup` removes the temp directories a `kill -9` left, never a live
process's: real child processes that make a workspace dir and open a local sandbox, one of them
killed with SIGKILL."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentload.sandboxes.tempdirs import cleanup_dirs, owner_of

# makes what `generate` makes (a workspace dir, a local sandbox and its home), then waits
_CHILD = """
import sys, time
from agentload.sandboxes import open_sandbox
from agentload.sandboxes.tempdirs import WORKSPACES, owned_tempdir
ws = owned_tempdir(WORKSPACES)
(ws / "s0-0").mkdir()
(ws / "s0-0" / "mod.py").write_text("x = 1\\n")
sb = open_sandbox("local", ws / "s0-0", None, "s0-0")
home = sb.exec(["sh", "-c", "echo $HOME"], timeout_s=10).output.decode().strip()
print(ws, home, flush=True)
time.sleep(60)
"""


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    d = tmp_path / "tmp"
    d.mkdir()
    return d


@pytest.fixture
def owners(tmp: Path) -> Iterator[list[tuple[subprocess.Popen[str], list[Path]]]]:
    """Two child processes, each with its workspace dir and local sandbox home in ``tmp``."""
    env = {**os.environ, "TMPDIR": str(tmp)}
    procs = [
        subprocess.Popen([sys.executable, "-c", _CHILD], env=env, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    out = []
    for p in procs:
        assert p.stdout is not None
        dirs = [Path(d) for d in p.stdout.readline().split()]
        assert len(dirs) == 2 and all(d.is_dir() and d.parent == tmp for d in dirs), dirs
        out.append((p, dirs))
    yield out
    for p in procs:
        p.kill()
        p.communicate(timeout=10)  # reaps it and closes its pipe


def test_cleanup_removes_a_dead_owners_dirs_and_keeps_a_live_ones(
    tmp: Path, owners: list[tuple[subprocess.Popen[str], list[Path]]]
) -> None:
    (dead, dead_dirs), (live, live_dirs) = owners
    assert {owner_of(d) for d in dead_dirs} == {(dead.pid, owner_of(dead_dirs[0])[1])}  # type: ignore[index]
    dead.kill()  # SIGKILL: nothing of the child's own cleanup runs
    dead.communicate(timeout=10)
    assert all(d.is_dir() for d in dead_dirs)  # left behind
    pid, start, host = dead_dirs[0].name.removeprefix("agentload-ws-").split("-")[:3]
    recycled = tmp / f"agentload-ws-{os.getpid()}-1-{host}-abcdefgh"  # live pid, other start
    elsewhere = "ffffff" if host != "ffffff" else "000000"
    abroad = tmp / f"agentload-ws-{pid}-{start}-{elsewhere}-abcdefgh"  # another host's
    unknown = tmp / "agentload-ws-0ld4f0rm"  # no owner in the name: an older agentload's
    other = tmp / "someone-else"
    for d in (recycled, abroad, unknown, other):
        d.mkdir()

    out = subprocess.run(
        [sys.executable, "-m", "agentload.cli", "sandbox", "cleanup"],
        env={**os.environ, "TMPDIR": str(tmp)},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    removed = sorted([*dead_dirs, recycled])
    assert sorted(lines[:3]) == [f"removed {d}" for d in removed]
    assert lines[-1] == (
        f"3 temp dir(s) removed; 2 kept (their agentload process is running); "
        f"2 kept (owner unknown: {', '.join(map(str, sorted([abroad, unknown])))})"
    )
    assert not any(d.exists() for d in removed)
    assert all(d.is_dir() for d in [*live_dirs, abroad, unknown, other])
    assert live.poll() is None
    # the same from the library, now that only the live owner's and the unknown one are left
    report = cleanup_dirs(tmp)
    assert (report.removed, sorted(report.kept_live), report.kept_unknown) == (
        [],
        sorted(live_dirs),
        sorted([abroad, unknown]),
    )
