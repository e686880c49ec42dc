"""Shared by the otel and redact tests: one real generated trace (``agentload generate -s
quick`` with a small context target and the local sandbox, against the built-in simulator, run
once per test process: an orchestrator with three sub-agents, delegate and plain tool calls),
and the real CLI entry point run in-process."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentload.cli import main

_CACHE: dict[str, Path] = {}


def quick_trace(factory: pytest.TempPathFactory) -> Path:
    if "quick" not in _CACHE:
        out = factory.mktemp("quick-trace")
        args = ["generate", "-s", "quick", "-c", "context_target=12000", "--sandbox", "local"]
        proc = subprocess.run(
            [sys.executable, "-m", "agentload", *args, "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        (path,) = out.glob("*.agentload.jsonl.zst")
        _CACHE["quick"] = path
    return _CACHE["quick"]


@dataclass
class Run:
    code: int
    out: str
    err: str

    def one_line(self) -> str:
        """The one error line of a failed command (exit 2, no traceback)."""
        assert self.code == 2, (self.code, self.out, self.err)
        lines = self.err.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in self.err, self.err
        return lines[0]


def cli(*args: str) -> Run:
    """``agentload ARGS`` through the root entry point (errors become one line + exit 2)."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            code = int(exc.code or 0)
    return Run(code, out.getvalue(), err.getvalue())
