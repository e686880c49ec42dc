"""Every command's output file (``agentload.outfile``; issue 28, class 4): an input is never an
output, an existing file is replaced only with ``--force``, and a failed command leaves the
file it would have replaced as it was, with nothing half written beside it.

Before, ``trace import mooncake a.jsonl -o a.jsonl`` deleted the source (the output truncated
it, the import failed, the clean-up removed the "partial output") and
``trace export mooncake T.zst -o T.zst`` replaced the trace and exited 0.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import one_line_exit_2, run, write_jsonl

LINES = [
    {"timestamp": 0, "input_length": 1200, "output_length": 40, "hash_ids": [10, 11, 12]},
    {"timestamp": 250, "input_length": 700, "output_length": 5, "hash_ids": [10, 11]},
]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _imported(tmp_path: Path, capsys: pytest.CaptureFixture[str], source: str = "a.jsonl") -> Path:
    """``LINES`` imported (as ``source``) into ``t.agentload.jsonl.zst``."""
    src = write_jsonl(tmp_path / source, LINES)
    trace = tmp_path / "t.agentload.jsonl.zst"
    assert run(["trace", "import", "mooncake", str(src), "-o", str(trace)], capsys)[0] == 0
    return trace


def test_an_import_onto_its_own_source_is_refused_and_the_source_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = write_jsonl(tmp_path / "a.jsonl", LINES)
    before = _digest(src)
    for alias in (src, tmp_path / "." / "a.jsonl"):
        line = one_line_exit_2(["trace", "import", "mooncake", str(src), "-o", str(alias)], capsys)
        assert "is an input of this command" in line
    assert _digest(src) == before and _listing(tmp_path) == ["a.jsonl"]


SAMPLES = Path(__file__).parent / "samples_agents"


def _weka_dir(folder: Path) -> Path:
    from test_import_weka import conv_a

    folder.mkdir()
    return write_jsonl(folder / "a.json", [conv_a()])


def _claude_dir(folder: Path) -> Path:
    shutil.copytree(SAMPLES / "claude-code-2.1.197", folder)
    return next(folder.rglob("agent-*.jsonl"))  # a sub-agent's log, two folders down


@pytest.mark.parametrize(("fmt", "make"), [("weka", _weka_dir), ("claude-code", _claude_dir)])
def test_an_import_onto_a_file_of_its_input_directory_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, make: Any
) -> None:
    """``trace import weka DIR -o DIR/a.json --force`` replaced the Weka file it was reading:
    a file in an input directory, at any depth, is an input (Claude Code's logs: the folder of
    a project, a sub-agent's log inside)."""
    folder = tmp_path / "in"
    src = make(folder)
    before = _digest(src)
    for alias in (src, src.parent / ".." / src.parent.name / src.name):
        argv = ["trace", "import", fmt, str(folder), "-o", str(alias), "--force"]
        assert "is an input of this command" in one_line_exit_2(argv, capsys)
    assert _digest(src) == before and ".partial" not in " ".join(_listing(src.parent))


def test_an_export_or_redact_onto_its_trace_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _imported(tmp_path, capsys)
    before = _digest(trace)
    for argv in (
        ["trace", "export", "mooncake", str(trace), "-o", str(trace)],
        ["trace", "export", "otel", str(trace), "-o", str(trace), "--force"],
        ["trace", "redact", str(trace), "-o", str(trace), "--force"],
    ):
        assert "is an input of this command" in one_line_exit_2(argv, capsys)
    assert _digest(trace) == before
    assert _listing(tmp_path) == ["a.jsonl", "t.agentload.jsonl.zst"]


def test_an_existing_output_is_replaced_only_with_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _imported(tmp_path, capsys)
    src = tmp_path / "a.jsonl"
    out = tmp_path / "out.jsonl"
    out.write_text("keep me\n")
    argv = ["trace", "export", "mooncake", str(trace), "-o", str(out)]
    assert "exists; add --force to replace it" in one_line_exit_2(argv, capsys)
    assert out.read_text() == "keep me\n"
    code, stdout, err = run([*argv, "--force"], capsys)
    assert code == 0, err
    assert out.read_text().count("\n") == 2 and "2 Mooncake lines" in stdout
    line = one_line_exit_2(["trace", "import", "mooncake", str(src), "-o", str(trace)], capsys)
    assert "exists; add --force" in line


def test_a_failed_import_leaves_the_old_output_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = _imported(tmp_path, capsys, "good.jsonl")
    before = _digest(trace)
    bad = write_jsonl(tmp_path / "bad.jsonl", [LINES[0], {"timestamp": "soon"}])
    argv = ["trace", "import", "mooncake", str(bad), "-o", str(trace), "--force"]
    assert "bad.jsonl:line 2" in one_line_exit_2(argv, capsys)
    assert _digest(trace) == before  # not truncated, not deleted, not half written
    assert _listing(tmp_path) == ["bad.jsonl", "good.jsonl", "t.agentload.jsonl.zst"]


@pytest.mark.parametrize(
    ("out", "words"),
    [
        ("/dev/full", "not a regular file"),
        ("DIR", "directory"),
        ("x" * 5000 + ".jsonl", "cannot write there"),
        ("/proc/x.jsonl", "cannot write there"),
    ],
)
def test_an_output_that_cannot_be_a_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], out: str, words: str
) -> None:
    trace = _imported(tmp_path, capsys)
    target = str(tmp_path) if out == "DIR" else out
    argv = ["trace", "export", "mooncake", str(trace), "-o", target, "--force"]
    assert words in one_line_exit_2(argv, capsys)
