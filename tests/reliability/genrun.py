"""Helpers of the reliability suite: ``agentload generate`` as a subprocess against a fault
server, its trace read back and its model calls accounted for; any command run in this process
(``run_cli``), and the check that it was exit 2 and one error line (``one_line_exit_2``)."""

from __future__ import annotations

import contextlib
import io
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentload.cli import main
from agentload.trace import Trace, load_trace

HARD_TIMEOUT_S = 60
"""No run may take longer: a hang fails the test instead of blocking the suite."""
FAST = ["-s", "quick", "--sandbox", "local"]


@dataclass
class Run:
    proc: subprocess.CompletedProcess[str]
    wall_s: float
    out: Path

    @property
    def trace_path(self) -> Path:
        (path,) = self.out.glob("*.agentload.jsonl.zst")
        return path

    def trace(self) -> Trace:
        return load_trace(self.trace_path)


def generate(
    out: Path, *args: str, env: dict[str, str] | None = None, timeout: float = HARD_TIMEOUT_S
) -> Run:
    """``agentload generate -s quick --sandbox local -o OUT ARGS`` in a subprocess."""
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "agentload", "generate", *FAST, "-o", str(out), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )
    return Run(proc, time.monotonic() - t0, out)


@dataclass(frozen=True)
class Attempts:
    """A trace's model-call attempts: every attempt is an ``llm_call`` (it got a reply), a
    ``retry`` event (it failed, another followed) or an ``error`` event naming its call (it
    failed and was the last)."""

    ok: int
    retried: int
    failed_last: int

    @property
    def total(self) -> int:
        return self.ok + self.retried + self.failed_last


def attempts(trace: Trace) -> Attempts:
    retried = sum(1 for e in trace.events if e.kind == "retry")
    last = sum(1 for e in trace.events if e.kind == "error" and "call_id" in e.details)
    return Attempts(ok=len(trace.calls), retried=retried, failed_last=last)


def session_wall_s(trace: Trace) -> float:
    (s,) = trace.sessions.values()
    assert s.end_ns is not None
    return (s.end_ns - s.start_ns) / 1e9


def validate_cli(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``agentload trace validate PATH`` (the CLI, in this process) says the file is whole."""
    with pytest.raises(SystemExit) as exc:
        main(["trace", "validate", str(path)])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, out + err
    assert "OK: whole file" in out


def run_cli(argv: Sequence[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(argv))
        except SystemExit as exc:
            code = exc.code
    return (code if isinstance(code, int) else 1), out.getvalue(), err.getvalue()


def one_line_exit_2(argv: Sequence[str]) -> str:
    """Run the CLI in this process; assert exit 2 and exactly one error line on stderr."""
    code, out, err = run_cli(argv)
    shown = f"argv={[a[:80] for a in argv]!r}\nstdout={out[-2000:]!r}\nstderr={err[-2000:]!r}"
    assert "Traceback" not in out + err, shown
    assert code == 2, shown
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("agentload: error: "), shown
    return lines[0]


def survivors(token: str) -> list[str]:
    """The processes (but this one) whose command line holds ``token``: ``PID: ARGV``."""
    out = []
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read()
        except OSError:
            continue
        if token.encode() in cmd and int(pid) != os.getpid():
            words = cmd.replace(b"\0", b" ").decode(errors="replace")
            out.append(f"{pid}: {words}")
    return out


def listener(family: int, address: object) -> tuple[socket.socket, list[bytes]]:
    """A socket listening at ``address`` (``AF_INET`` or ``AF_UNIX``) that no sandboxed command
    should reach, and the list of what each connection it accepted sent (``b"(connected)"``
    for one that sent nothing). Closing the socket ends its thread."""
    srv = socket.socket(family)
    srv.bind(address)
    srv.listen(8)
    got: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            got.append(conn.recv(100) or b"(connected)")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv, got
