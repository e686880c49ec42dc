"""Waiting for a tool that ``.ci/run`` installs or starts in the background: it names the file
its exit code will be written to in an environment variable; a test waits for that file,
bounded, before it uses the tool (the engine, AIPerf, the real agents). And what a test does
without its tool (``skip_or_fail``): it skips, unless CI set the tool's ``AGENTLOAD_REQUIRE_*``
variable, which turns the skip into a failure."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import NoReturn

import pytest


def required(var: str) -> bool:
    """Whether ``var`` (an ``AGENTLOAD_REQUIRE_*`` variable CI sets) asks for the tool."""
    return os.environ.get(var, "") not in ("", "0")


def skip_or_fail(why: str, var: str) -> NoReturn:
    """Skip for want of a tool, or fail instead when ``var`` is set (``required``)."""
    __tracebackhide__ = True
    if required(var):
        pytest.fail(f"{why} ({var}=1 turns this skip into a failure)")
    pytest.skip(why)


def wait_for_ready_file(
    ready_var: str, wait_var: str, default_wait_s: float, what: str, command: str, log: str
) -> str | None:
    """Wait for the file ``$ready_var`` names (none named: nothing runs in the background),
    bounded by ``$wait_var`` seconds (default ``default_wait_s``). ``None`` when it holds exit
    code 0, else why not: ``what`` did not finish in time, or ``command`` exited with another
    code (with the last line of ``log``, a file beside the ready file)."""
    ready = os.environ.get(ready_var)
    if not ready:
        return None
    path = Path(ready)
    deadline = time.monotonic() + float(os.environ.get(wait_var, str(default_wait_s)))
    while not path.exists():
        if time.monotonic() > deadline:
            return f"{what} did not finish in time ({ready} never appeared)"
        time.sleep(2)
    rc = path.read_text().strip()
    if rc == "0":
        return None
    log_path = path.with_name(log)
    lines = log_path.read_text(errors="replace").strip().splitlines() if log_path.exists() else []
    return f"{command} exited {rc}: {lines[-1] if lines else 'no log'}"
