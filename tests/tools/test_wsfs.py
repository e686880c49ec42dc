"""The host's file access to a workspace (``tools.wsfs``) under a command that swaps a
directory for a symlink while the host works (issue 28, class 2).

Before ``wsfs``, ``edit_file`` resolved its path once (``realpath``) and then read, created its
temporary file and renamed it by path: a sandboxed command that swapped ``sub`` for a symlink
to a host directory between those steps redirected the host's write outside the workspace
(within ~45 tries in a Docker sandbox). Here a thread plays that command as fast as it can.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from agentload.scenarios.workspace import Workspace
from agentload.tools import Toolbox, files, wsfs
from agentload.tools.result import ToolError


def _tree(tmp: Path) -> tuple[Path, Path]:
    ws = tmp / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / "sub" / "f.txt").write_text("x = 1\n")
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("x = 1\n")  # the same text: a redirected edit would apply
    (outside / "SECRET_host_file.txt").write_text("not for the agent\n")
    return ws, outside


def _attempt(call: Callable[[], str], crashes: list[OSError]) -> str | None:
    """The tool's text; None when it refused (a ToolError) or crashed (a raw OSError, kept in
    ``crashes``: a crash of the tool, not a clear refusal)."""
    try:
        return call()
    except ToolError:
        return None
    except OSError as exc:
        crashes.append(exc)
        return None


def test_a_swapped_directory_never_redirects_a_host_read_write_or_listing(tmp_path: Path) -> None:
    ws, outside = _tree(tmp_path)
    stop = threading.Event()

    def attacker() -> None:  # what `mv sub sub.real; ln -s /host sub; ...` does in a loop
        while not stop.is_set():
            os.rename(ws / "sub", ws / "sub.real")
            os.symlink(outside, ws / "sub")
            os.unlink(ws / "sub")
            os.rename(ws / "sub.real", ws / "sub")
            time.sleep(0.0002)  # the directory is back for a moment: the host's calls run

    thread = threading.Thread(target=attacker, daemon=True)
    thread.start()
    edited = listed = refused = 0
    crashes: list[OSError] = []
    try:
        deadline = time.monotonic() + 6
        n = 0
        while time.monotonic() < deadline and (edited < 200 or listed < 200) and n < 20000:
            n += 1
            old, new = ("x = 1", "x = 2") if n % 2 else ("x = 2", "x = 1")
            if _attempt(partial(files.edit_file, ws, "sub/f.txt", old, new), crashes):
                edited += 1
            else:
                refused += 1
            names = _attempt(partial(files.list_files, ws, "sub"), crashes)
            if names:
                assert "SECRET" not in names, names
                listed += 1
            else:
                refused += 1
    finally:
        stop.set()
        thread.join(5)
    assert (outside / "f.txt").read_text() == "x = 1\n"  # never written
    assert sorted(p.name for p in outside.iterdir()) == ["SECRET_host_file.txt", "f.txt"]
    assert not crashes, crashes[:3]
    assert edited > 10 and listed > 10, (edited, listed, refused)  # the race was exercised


def test_symlinks_inside_the_workspace_are_followed_and_outside_refused(tmp_path: Path) -> None:
    ws, outside = _tree(tmp_path)
    (ws / "rel").symlink_to("sub/f.txt")
    (ws / "abs").symlink_to("/workspace/sub/f.txt")  # as the sandbox sees it
    (ws / "host").symlink_to(ws / "sub")  # as a local sandbox's command would make it
    (ws / "out").symlink_to(outside / "f.txt")
    (ws / "up").symlink_to("../outside/f.txt")
    (ws / "loop").symlink_to("loop")
    assert wsfs.read_bytes(ws, "rel", 100) == b"x = 1\n"
    assert wsfs.read_bytes(ws, "abs", 100) == b"x = 1\n"
    assert wsfs.read_bytes(ws, "host/f.txt", 100) == b"x = 1\n"
    files.edit_file(ws, "rel", "x = 1", "x = 3")
    assert (ws / "sub" / "f.txt").read_text() == "x = 3\n" and (ws / "rel").is_symlink()
    for path, words in [
        ("out", "outside the workspace"),
        ("up", "outside the workspace"),
        ("sub/../../outside/f.txt", "outside the workspace"),
        ("loop", "more than 40 symlinks"),
    ]:
        with pytest.raises(ToolError, match=words):
            wsfs.read_bytes(ws, path, 100)
    assert wsfs.kind_of(ws, "sub/..") == (wsfs.Kind.DIR, 0)
    assert wsfs.kind_of(ws, "sub/nope")[0] is wsfs.Kind.MISSING


def test_a_fifo_or_a_device_is_not_read(tmp_path: Path) -> None:
    ws, _ = _tree(tmp_path)
    os.mkfifo(ws / "pipe")
    started = time.monotonic()
    with pytest.raises(ToolError, match="not a regular file"):
        files.edit_file(ws, "pipe", "a", "b")
    with pytest.raises(ToolError, match="not a regular file"):
        files.check_file(ws, "pipe")
    assert time.monotonic() - started < 5  # opened non-blocking: no writer is waited for
    with pytest.raises(ToolError, match="larger than 0 MiB"):
        wsfs.read_bytes(ws, "sub/f.txt", 3)


def test_an_edit_keeps_the_mode_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    ws, _ = _tree(tmp_path)
    (ws / "sub" / "f.txt").chmod(0o751)
    files.edit_file(ws, "sub/f.txt", "x = 1", "x = 5")
    assert (ws / "sub" / "f.txt").stat().st_mode & 0o7777 == 0o751
    assert sorted(p.name for p in (ws / "sub").iterdir()) == ["f.txt"]


@pytest.mark.docker
async def test_a_command_in_a_docker_sandbox_cannot_redirect_the_hosts_edits(
    docker_box: Toolbox, ws: Workspace, tmp_path: Path
) -> None:
    # The attack as it was found: the command runs in the container, the edits on the host.
    box = docker_box
    ws.root.chmod(0o777)  # as root the host runs the sandbox as nobody: let it write here
    made = box.sandbox.exec(["sh", "-c", "mkdir sub && echo 'x = 1' > sub/f.txt"], timeout_s=20)
    assert made.exit_code == 0, made.output  # the sandbox's user owns it, as an agent's would
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("x = 1\n")
    (outside / "SECRET_host_file.txt").write_text("not for the agent\n")
    loop = (
        f"end=$(( $(date +%s) + 4 )); while [ $(date +%s) -lt $end ]; do "
        f"mv sub sub.real && ln -s {outside} sub && rm sub && mv sub.real sub; done"
    )
    attack = asyncio.create_task(
        asyncio.to_thread(box.sandbox.exec, ["sh", "-c", loop], timeout_s=20)
    )
    edits = lists = 0
    n = 0
    while not attack.done():
        n += 1
        old, new = ("x = 1", "x = 2") if n % 2 else ("x = 2", "x = 1")
        r = await box.call("edit_file", {"path": "sub/f.txt", "old": old, "new": new})
        edits += r.error is None
        r = await box.call("list_files", {"path": "sub"})
        assert "SECRET" not in r.text
        lists += r.error is None
    res = await attack
    assert res.exit_code == 0, res.output[-500:]
    assert (outside / "f.txt").read_text() == "x = 1\n"
    assert sorted(p.name for p in outside.iterdir()) == ["SECRET_host_file.txt", "f.txt"]
    assert edits > 5 and lists > 5, (edits, lists, n)
