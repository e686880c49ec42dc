"""The real CLI entry point as the interop tests run it, and their JSONL fixture writer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from agentload.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``agentload ARGV`` in-process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


def ok(*argv: str) -> None:
    """``agentload ARGV`` in-process, which must succeed (its output goes to the test's log)."""
    with pytest.raises(SystemExit) as exc:
        main([*argv])
    assert exc.value.code in (0, None)


def one_line_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run the CLI; assert exit 2 and exactly one ``agentload: error:`` line on stderr."""
    code, out, err = run(argv, capsys)
    lines = err.strip().splitlines()
    assert code == 2, out + err
    assert len(lines) == 1 and lines[0].startswith("agentload: error: "), err
    assert "Traceback" not in out + err
    return lines[0]


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    """``items`` as JSON lines at ``path``."""
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in items))
    return path
