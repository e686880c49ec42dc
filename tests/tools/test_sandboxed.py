"""search_code and run_tests execute in the sandbox: each on a real workspace, in each sandbox."""

from __future__ import annotations

import re

import pytest

from agentload.scenarios.workspace import Workspace
from agentload.tools import Toolbox

pytestmark = pytest.mark.slow

FAULT_FRAME = 'File "/workspace/email/quoprimime.py", line 142, in header_encode'


async def test_search_hits_are_path_line_text(box: Toolbox, ws: Workspace) -> None:
    r = await box.call("search_code", {"pattern": r"def header_encode\b", "path": "email"})
    assert r.error is None and r.exit_code == 0 and r.sandbox_id == box.sandbox.id
    hits = r.text.splitlines()
    assert hits == [
        "email/base64mime.py:59: def header_encode(header_bytes, charset='iso-8859-1'):",
        "email/charset.py:274: def header_encode(self, string):",
        "email/quoprimime.py:127: def header_encode(header_bytes, charset='iso-8859-1'):",
    ]
    for hit in hits:  # every hit names the real line
        path, line, text = hit.split(":", 2)
        assert (ws.root / path).read_text().splitlines()[int(line) - 1].strip() == text.strip()


async def test_search_caps_and_misses(box: Toolbox) -> None:
    r = await box.call("search_code", {"pattern": "import", "max_results": 5})
    lines = r.text.splitlines()
    assert len(lines) == 6 and re.fullmatch(
        r"\[showing 5 of \d+ matches; narrow the pattern or the path\]", lines[-1]
    )
    r = await box.call("search_code", {"pattern": "no_such_identifier_xyz"})
    assert r.text == "no matches for /no_such_identifier_xyz/ in .\n" and r.exit_code == 1
    assert r.error is None
    r = await box.call("search_code", {"pattern": "(unclosed"})
    assert r.error is not None and r.error.startswith("invalid regular expression")
    r = await box.call("search_code", {"pattern": "x", "path": "../.."})
    assert r.error is not None and "outside the workspace" in r.error


async def test_a_pathological_regex_is_cut_by_the_timeout(box: Toolbox, ws: Workspace) -> None:
    (ws.root / "evil.txt").write_text("a" * 40 + "!\n")
    box.scenario.tool_timeouts_s.search_code = 1.0
    r = await box.call("search_code", {"pattern": "^(a+)+$", "path": "evil.txt"})
    assert r.timed_out and r.error is not None and "timed out after 1s" in r.error
    assert r.duration_ns / 1e9 < 8
    # the toolbox is still usable
    assert (await box.call("search_code", {"pattern": "aaaa!", "path": "evil.txt"})).exit_code == 0


async def test_run_tests_reports_real_failures(box: Toolbox) -> None:
    r = await box.call("run_tests", {})
    assert r.exit_code == 1 and r.error is None and not r.timed_out
    assert r.sandbox_id == box.sandbox.id
    assert r.text.endswith("FAILED (errors=24, skipped=2)\nexit code: 1\n")
    assert "\nRan 1667 tests\n" in r.text  # the run time is dropped: same output every run
    assert FAULT_FRAME in r.text
    # the full output (~33 KB) is cut to the scenario's budget, head and tail kept
    assert r.truncated and len(r.text) <= box.scenario.tool_output_max_chars
    assert r.output_bytes > box.scenario.tool_output_max_chars
    assert r.text.startswith("....") and "characters omitted ...]\n" in r.text
    again = await box.call("run_tests", {})
    assert again.text == r.text


async def test_run_tests_narrowed_and_fixed(box: Toolbox) -> None:
    target = "test.test_email.test_email.TestQuopri"
    r = await box.call("run_tests", {"target": target})
    assert r.exit_code == 1 and "\nRan 62 tests\n" in r.text and not r.truncated
    assert r.text.count("\nERROR: test_") == 5 and FAULT_FRAME in r.text
    r = await box.call("run_tests", {"target": "--help; rm -rf /"})
    assert r.error is not None and r.error.startswith("bad test target")
    # fixing the fault with edit_file makes the same tests pass in the sandbox
    fixed = await box.call(
        "edit_file",
        {
            "path": "email/quoprimime.py",
            "old": "header_bytes.translate(",
            "new": "header_bytes.decode('latin1').translate(",
        },
    )
    assert fixed.error is None
    r = await box.call("run_tests", {"target": target})
    assert r.exit_code == 0 and r.text.endswith("OK\nexit code: 0\n")


async def test_run_tests_timeout_and_memory_cap(box: Toolbox) -> None:
    box.scenario.test_command = ["sh", "-c", "echo started; sleep 30"]
    box.scenario.tool_timeouts_s.run_tests = 1.0
    r = await box.call("run_tests", {})
    assert r.timed_out and r.error is None
    assert r.text.startswith("started\n")
    assert "(timed out after 1s: the command was killed)" in r.text
    assert r.duration_ns / 1e9 < 6
    box.scenario.tool_timeouts_s.run_tests = 60.0
    box.scenario.test_command = ["python3", "-c", "x = bytearray(2 << 30); print('allocated')"]
    r = await box.call("run_tests", {})
    assert not r.timed_out and r.exit_code != 0 and "allocated" not in r.text
    assert "exit code: 137 (killed by SIGKILL: likely the sandbox's memory cap of 512m)" in r.text
    if box.sandbox.kind == "local":  # sandboxes.memwatch says so
        assert "past the sandbox's memory limit of 512 MiB" in r.text


async def test_a_closed_sandbox_is_a_tool_error(box: Toolbox) -> None:
    box.sandbox.close()
    r = await box.call("run_tests", {})
    assert r.error is not None and r.error.startswith("sandbox: ")
    assert r.text.startswith("error: sandbox: ")


async def test_two_sessions_see_identical_tool_output(
    box: Toolbox, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> None:
    """Each session has its own workspace directory; what the model reads must not depend on it."""
    from agentload.scenarios.workspace import materialise

    from .conftest import make_box

    other_ws = materialise(
        "stdlib:email", tmp_path_factory.mktemp("other") / "ws", "qp-header-decode"
    )
    other = make_box(box.sandbox.kind, other_ws, box.scenario, request)
    calls = [
        ("run_tests", {"target": "test.test_email.test_email.TestQuopri"}),
        ("search_code", {"pattern": "header_bytes", "path": "email"}),
        ("list_files", {"path": "email"}),
        ("read_file", {"path": "email/charset.py", "start_line": 340, "end_line": 360}),
    ]
    for name, args in calls:
        a, b = await box.call(name, args), await other.call(name, args)
        assert a.text == b.text, name
        assert (a.exit_code, a.output_bytes, a.truncated) == (
            b.exit_code,
            b.output_bytes,
            b.truncated,
        )


async def test_read_file_runs_in_each_sandbox(box: Toolbox, ws: Workspace) -> None:
    """read_file reads the bytes with a command in the sandbox (as a sandboxed harness pays
    for every read): the same text in each kind, and the sandbox's view of the file."""
    src = (ws.root / "email" / "base64mime.py").read_text()
    n = len(src.splitlines())
    r = await box.call("read_file", {"path": "email/base64mime.py", "start_line": 2})
    assert r.error is None and r.exit_code == 0 and r.sandbox_id == box.sandbox.id
    lines = src.splitlines(keepends=True)
    assert r.text == f"# email/base64mime.py (lines 2-{n} of {n})\n" + "".join(lines[1:])
    binary = ws.root / "bin.dat"
    binary.write_bytes(b"\0\1\2")
    try:
        bad = await box.call("read_file", {"path": "bin.dat"})
    finally:
        binary.unlink()
    assert bad.error == "bin.dat: binary file"
