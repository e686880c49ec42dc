"""The registry of open sandboxes: close_all, forks, signal chaining."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from agentload.sandboxes import lifecycle


def test_close_all_runs_each_close_once_and_survives_failures() -> None:
    calls: list[str] = []

    def boom() -> None:
        calls.append("boom")
        raise RuntimeError("close failed")

    lifecycle.register("t-a", lambda: calls.append("a"))
    lifecycle.register("t-b", boom)
    lifecycle.register("t-c", lambda: calls.append("c"))
    lifecycle.unregister("t-c")
    lifecycle.close_all()
    lifecycle.close_all()
    assert sorted(calls) == ["a", "boom"]


def test_a_forked_child_never_closes_its_parents_sandboxes() -> None:
    closed: list[int] = []
    lifecycle.register("t-fork", lambda: closed.append(os.getpid()))
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        lifecycle.close_all()
        os._exit(len(closed))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    lifecycle.close_all()
    assert closed == [os.getpid()]


CHILD = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1)  # the test asks for the stacks if it ever hangs
from agentload.sandboxes import lifecycle
signal.signal(signal.SIGTERM, lambda s, f: (print("previous handler ran", flush=True), sys.exit(7)))
lifecycle.install_signal_handlers()
lifecycle.register("x", lambda: print("closed", flush=True))
print("ready", flush=True)
for _ in range(600):  # short sleeps: a signal the kernel hands another thread still runs soon
    time.sleep(0.05)
"""


def test_sigterm_closes_then_chains_to_the_previous_handler() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=25)
    except subprocess.TimeoutExpired:  # once seen in CI: say where the child was
        proc.send_signal(signal.SIGUSR1)
        time.sleep(1)
        proc.kill()
        out, err = proc.communicate()
        raise AssertionError(
            f"SIGTERM did not end the child; stdout {out!r}; stacks:\n{err}"
        ) from None
    assert out == "closed\nprevious handler ran\n", err
    assert proc.returncode == 7
