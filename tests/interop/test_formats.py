"""The registry of import and export formats (``interop.formats``) is the one place a format is
named: the command line's choices and help, ``auto``'s detection and the dispatch all come from
it, and every entry's reader, writer and detector resolve to functions of their modules."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys

from agentload.interop.cli import ExportFormat, ImportFormat
from agentload.interop.formats import EXPORTS, IMPORTS, _call
from agentload.interop.imports import FORMATS


def test_every_entry_resolves_to_its_reader_detector_and_writer() -> None:
    assert len({f.name for f in IMPORTS}) == len(IMPORTS)
    for f in IMPORTS:
        reader = _call(f.reader)
        params = inspect.signature(reader).parameters
        positional = [p for p in params.values() if p.kind is p.POSITIONAL_OR_KEYWORD]
        assert len(positional) >= 2 and positional[1].name == "out", f.name
        assert ("force" in params) == f.full_text, f.name  # a full-text reader checks its out
        if isinstance(f.detector, str):
            assert callable(_call(f.detector)), f.name
        assert f.detects({}) is False, f.name  # an empty object is no format
    for e in EXPORTS:
        params = inspect.signature(_call(e.writer)).parameters
        assert list(params)[:2] == ["traces", "out"], e.name
        assert e.takes <= set(params), e.name


def test_the_command_line_offers_exactly_the_registered_formats() -> None:
    assert [m.value for m in ImportFormat] == [*FORMATS, "auto"]
    assert [m.value for m in ExportFormat] == [e.name for e in EXPORTS]
    run = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "import", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={"COLUMNS": "400", "PATH": "/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stderr
    text = " ".join(re.sub(r"[│╭╮╰╯─]", " ", run.stdout).split())
    for f in IMPORTS:
        assert f"{f.name}: {f.files}" in text, f.name


def test_an_option_a_format_does_not_take_is_one_line() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "export", "weka", "x.agentload.jsonl",
         "-o", "out", "--content"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 2
    assert run.stderr.strip() == "agentload: error: --content: only with the otel format"
