"""The root ``agentload`` command: version, help on every command group and command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from agentload import __version__
from agentload.cli import app, main, one_line


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out, err


def all_command_paths() -> list[list[str]]:
    """Every group and command under the root, as argv prefixes."""
    root = typer.main.get_command(app)
    paths: list[list[str]] = []

    def walk(cmd: Any, prefix: list[str]) -> None:
        paths.append(prefix)
        for name, sub in (getattr(cmd, "commands", None) or {}).items():
            walk(sub, [*prefix, name])

    walk(root, [])
    return paths


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0
    assert out.strip() == f"agentload {__version__}"
    assert __version__ != "0.0.0+unknown"  # installed: the version comes from the metadata


def test_version_from_the_installed_entry_point() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentload", "--version"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"agentload {__version__}"


def test_trace_commands_are_registered() -> None:
    paths = {tuple(p) for p in all_command_paths()}
    assert {("trace",), ("trace", "validate"), ("trace", "stats"), ("trace", "inspect")} <= paths


@pytest.mark.parametrize("path", all_command_paths(), ids=lambda p: " ".join(p) or "agentload")
def test_help_on_every_command(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([*path, "--help"], capsys)
    assert code == 0, err
    assert "Usage: agentload" in out
    assert " ".join(["agentload", *path]) in " ".join(out.split())
    assert "Traceback" not in out + err


def test_no_arguments_shows_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([], capsys)
    assert "Usage: agentload" in out + err
    assert "trace" in out + err
    assert code in (0, 2)


def test_usage_errors_exit_2_without_a_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["no-such-command"], capsys)
    assert code == 2 and "No such command 'no-such-command'" in err
    code, _, err = run(["trace", "stats"], capsys)
    assert code == 2 and "Missing argument" in err
    code, _, err = run(["trace", "inspect", "x", "--call", "-1"], capsys)
    assert code == 2 and "Traceback" not in err


def test_user_error_is_one_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(["trace", "stats", str(tmp_path / "missing.jsonl")], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("agentload: error: ")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [["generate", "-n", "abc"], ["generate", "--bogus"], ["nope"], ["replay"], ["trace", "stats"]],
)
def test_usage_errors_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("agentload: error: agentload"), err
    assert "--help" in err


def test_echoed_input_cannot_break_the_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["scenarios", "show", "quick", "-c", "seed=\r\nforged line\x1b[2J"], capsys)
    assert code == 2
    assert err.count("\n") == 1 and "\\r\\nforged line\\x1b[2J" in err, err
    assert one_line("a\u202eb\x00") == "a\\u202eb\\x00"


def test_one_line_clips_a_pasted_server_error() -> None:
    line = one_line("endpoint said: " + "y" * 1100)
    assert line.startswith("endpoint said: yyy") and line.endswith("[515 more characters]")
    assert len(line) < 650
    assert one_line("short") == "short"
