"""Faults a command can leave behind, in both sandboxes: after each, the sandbox's next command
works and none of the faulty command's processes is left.

Each faulty command runs with ``FAULT_TAG=<random>`` in its environment (every process it starts
inherits it), and the check looks for live processes carrying that tag: inside the container for
Docker, on this host for the local sandbox. The local sandbox has no pids cap, so its fork bomb is
a bounded one (a binary tree of 64 leaves that keep forking ``sleep``, plus a chain that hops to a
new pid every 10 ms) and the pids-cap case is Docker's alone. Leftovers of a failing run end by
themselves within two minutes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentload.sandboxes import open_sandbox
from agentload.scenarios.models import SandboxSpec
from agentload.tools.search import search_argv

KINDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]

# pids of live processes whose environment has the entry argv[1] (run in the sandbox)
_TAGGED = r"""
import os, sys
entry = sys.argv[1].encode()
for p in os.listdir("/proc"):
    if p.isdigit() and int(p) != os.getpid():
        try:
            with open("/proc/%s/environ" % p, "rb") as fh:
                env = fh.read()
        except OSError:
            continue
        if entry in env.split(b"\0"):
            print(p)
"""

_UNBOUNDED_BOMB = "f(){ f|f& }; f"
_BOUNDED_BOMB = (
    # 64 leaves that fork a `sleep` every 0.2 s for two minutes, and a chain that forks its
    # successor and exits every 10 ms: the group and the pids change while they are killed
    "leaf(){ i=0; while [ $i -lt 600 ]; do sleep 0.2; i=$((i+1)); done; }; "
    "tree(){ if [ $1 -gt 0 ]; then tree $(($1-1)) & tree $(($1-1)) & else leaf; fi; }; "
    "hop(){ [ $1 -gt 0 ] && { sleep 0.01; hop $(($1-1)) & }; }; "
    "tree 6 & hop 12000 & echo forked"
)
_DAEMONS = (
    "setsid sleep 120 & nohup sleep 121 >/dev/null 2>&1 & "
    "(setsid sh -c 'sleep 122 & sleep 123' &) ; sleep 124 & echo started"
)
_FORK_TO_THE_CAP = """
import os, time
n = 0
try:
    while True:
        if os.fork() == 0:
            time.sleep(120)
            os._exit(0)
        n += 1
except OSError as exc:
    print("forked", n, "then", exc.strerror)
"""


@pytest.fixture
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    ws = tmp_path / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "mod.py").write_text("VALUE = 41\n")
    spec = SandboxSpec(kind="auto", memory="256m", cpus=1.0, pids=64)
    client = request.getfixturevalue("docker_client") if request.param == "docker" else None
    sb = open_sandbox(request.param, ws, spec, f"rel-{uuid.uuid4().hex[:8]}", docker_client=client)
    yield sb
    sb.close()


class Fault:
    """One faulty command in a sandbox, tagged so that its processes can be found."""

    def __init__(self, sb: Any) -> None:
        self.sb = sb
        self.entry = f"FAULT_TAG={uuid.uuid4().hex}"

    def run(self, argv: list[str], timeout_s: float) -> tuple[Any, float]:
        key, _, value = self.entry.partition("=")
        t0 = time.monotonic()
        res = self.sb.exec(argv, timeout_s=timeout_s, env={key: value})
        return res, time.monotonic() - t0

    def left(self) -> list[str]:
        res = self.sb.exec(["python3", "-I", "-S", "-c", _TAGGED, self.entry], timeout_s=20)
        assert res.exit_code == 0, res.output
        return res.output.decode().split()

    def kill_leftovers(self) -> None:
        """Safety net for a failing local run: kill what it left, by pid, on this host."""
        if self.sb.kind == "local":
            for pid in self.left():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)


@pytest.fixture
def fault(sandbox: Any) -> Iterator[Fault]:
    f = Fault(sandbox)
    yield f
    with contextlib.suppress(Exception):
        f.kill_leftovers()


def assert_healthy(fault: Fault) -> None:
    """Nothing of the fault is left, and the sandbox's next commands work."""
    assert fault.left() == []
    sb = fault.sb
    r = sb.exec(["id"], timeout_s=10)
    assert r.exit_code == 0 and b"uid=" in r.output, r.output
    r = sb.exec(search_argv("VALUE", ".", 50), timeout_s=20)  # what search_code runs
    assert r.exit_code == 0 and r.output == b"pkg/mod.py:1: VALUE = 41\n#total 1\n", r.output
    r = sb.exec(["python3", "-c", "import unittest, sys; print('ok')"], timeout_s=20)
    assert r.exit_code == 0 and r.output == b"ok\n", r.output


@pytest.mark.parametrize("sandbox", KINDS, indirect=True)
def test_a_fork_bomb_that_returns_is_killed_with_it(sandbox: Any, fault: Fault) -> None:
    bomb = _UNBOUNDED_BOMB if sandbox.kind == "docker" else _BOUNDED_BOMB
    res, took = fault.run(["sh", "-c", bomb], timeout_s=10)
    assert not res.timed_out and took < 8, (took, res.output[-300:])
    assert_healthy(fault)


@pytest.mark.parametrize("sandbox", KINDS, indirect=True)
def test_daemons_do_not_outlive_their_command(sandbox: Any, fault: Fault) -> None:
    res, took = fault.run(["sh", "-c", _DAEMONS], timeout_s=20)
    # they held the output open: the command still returns as soon as its own process ends
    assert (res.exit_code, res.output, res.timed_out) == (0, b"started\n", False)
    assert took < 5
    assert_healthy(fault)


@pytest.mark.parametrize("sandbox", KINDS, indirect=True)
def test_the_memory_cap_hit_leaves_nothing(sandbox: Any, fault: Fault) -> None:
    hog = "sleep 120 & python3 -c 'x = bytearray(1 << 30); print(len(x))'"
    res, took = fault.run(["sh", "-c", hog], timeout_s=30)
    assert res.exit_code == 137  # Docker: the cgroup's OOM killer; local: sandboxes.memwatch
    if sandbox.kind == "local":
        assert b"past the sandbox's memory limit" in res.output
    assert not res.timed_out and took < 20
    assert_healthy(fault)


@pytest.mark.docker
@pytest.mark.parametrize("sandbox", ["docker"], indirect=True)
def test_the_pids_cap_hit_leaves_nothing(sandbox: Any, fault: Fault) -> None:
    res, took = fault.run(["python3", "-c", _FORK_TO_THE_CAP], timeout_s=30)
    assert res.exit_code == 0 and b"then Resource temporarily unavailable" in res.output
    assert not res.timed_out and took < 20
    assert_healthy(fault)


@pytest.mark.parametrize("sandbox", KINDS, indirect=True)
def test_a_timeout_kills_the_daemons_too(sandbox: Any, fault: Fault) -> None:
    stuck = "setsid sleep 120 & sleep 121 & trap '' TERM; sleep 122"
    res, took = fault.run(["sh", "-c", stuck], timeout_s=2)
    assert res.timed_out and res.exit_code in (124, 137)
    assert 1.9 < took < 9
    assert_healthy(fault)


@pytest.mark.parametrize("sandbox", KINDS, indirect=True)
def test_concurrent_commands_do_not_kill_each_other(sandbox: Any) -> None:
    messy, calm = Fault(sandbox), Fault(sandbox)
    results: dict[str, tuple[Any, float]] = {}

    def run_calm() -> None:
        results["calm"] = calm.run(["sh", "-c", "sleep 2 & wait; echo calm"], timeout_s=20)

    t = threading.Thread(target=run_calm)
    t.start()
    time.sleep(0.5)  # the calm one is running (and has a child) when the messy one is swept
    try:
        res, took = messy.run(["sh", "-c", "setsid sleep 120 & sleep 121 & echo messy"], 20)
        assert (res.exit_code, res.output, took < 5) == (0, b"messy\n", True)
        assert messy.left() == []
    finally:
        t.join(timeout=30)
        messy.kill_leftovers()
    res, took = results["calm"]
    assert (res.exit_code, res.output, res.timed_out) == (0, b"calm\n", False)
    assert 1.9 < took < 10
    assert calm.left() == []
