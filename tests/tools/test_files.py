"""read_file, list_files, edit_file on a real workspace; nothing outside it is reachable."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentload.scenarios.workspace import Workspace
from agentload.tools import Toolbox
from agentload.trace.schema import ToolCallRecord


async def test_read_file_whole_and_ranges(local_box: Toolbox, ws: Workspace) -> None:
    src = (ws.root / "email" / "quoprimime.py").read_text()
    n = len(src.splitlines())
    r = await local_box.call("read_file", {"path": "email/quoprimime.py"})
    # read by a command in the sandbox (`cat`): its exit code, the sandbox, the file's bytes
    assert r.error is None and not r.truncated and r.exit_code == 0
    assert r.sandbox_id == local_box.sandbox.id
    assert r.text == f"# email/quoprimime.py (lines 1-{n} of {n})\n{src}"
    assert r.output_bytes == len(src.encode()) and r.end_ns >= r.start_ns
    r = await local_box.call(
        "read_file",
        '{"path": "/workspace/email/quoprimime.py", "start_line": 142, "end_line": 142}',
    )
    assert r.text == (
        f"# email/quoprimime.py (lines 142-142 of {n})\n"
        "    encoded = header_bytes.translate(_QUOPRI_HEADER_MAP)\n"
    )
    r = await local_box.call("read_file", {"path": "email/quoprimime.py", "start_line": "299"})
    assert r.text.startswith(f"# email/quoprimime.py (lines 299-{n} of {n})\n")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"path": "email/nope.py"}, "email/nope.py: no such file"),
        ({"path": "email"}, "email: is a directory (use list_files)"),
        ({"path": "email/utils.py", "start_line": 9999}, "start_line 9999 is past the end"),
        ({"path": "email/utils.py", "start_line": 5, "end_line": 2}, "bad line range 5-2"),
        ({"path": "email/utils.py", "start_line": "x"}, "start_line must be an integer"),
        ({"path": "../../etc/passwd"}, "outside the workspace"),
        ({"path": "/etc/passwd"}, "outside the workspace"),
        ({"path": "email/../../x"}, "outside the workspace"),
        ({"path": "email/utils.py", "lines": 3}, "unknown argument 'lines' for read_file"),
        ({}, "read_file needs the argument 'path'"),
    ],
)
async def test_read_file_errors_are_text(
    local_box: Toolbox, args: dict[str, object], message: str
) -> None:
    r = await local_box.call("read_file", args)
    assert r.error is not None and message in r.error
    assert r.text == f"error: {r.error}\n"


async def test_symlinks_cannot_escape(local_box: Toolbox, ws: Workspace, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    (ws.root / "leak.txt").symlink_to(secret)
    (ws.root / "outside").symlink_to(tmp_path)
    (ws.root / "inside.py").symlink_to(ws.root / "email" / "utils.py")
    for name, args in [
        ("read_file", {"path": "leak.txt"}),
        ("read_file", {"path": "outside/secret.txt"}),
        ("list_files", {"path": "outside"}),
        ("edit_file", {"path": "leak.txt", "old": "top", "new": "no"}),
        ("search_code", {"pattern": "secret", "path": "outside"}),
    ]:
        r = await local_box.call(name, args)
        assert r.error is not None and "outside the workspace" in r.error, (name, r.text)
        assert "top secret" not in r.text
    assert secret.read_text() == "top secret\n"
    # a link that stays inside is fine, and search never follows links at all
    r = await local_box.call("read_file", {"path": "inside.py", "end_line": 1})
    assert r.error is None
    r = await local_box.call("search_code", {"pattern": "top secret"})
    assert r.text.startswith("no matches")


async def test_list_files(local_box: Toolbox, ws: Workspace) -> None:
    r = await local_box.call("list_files", {})
    listed = r.text.splitlines()
    assert listed == ws.files() and not any(p.startswith(".git") for p in listed)
    r = await local_box.call("list_files", {"path": "email/mime/"})
    assert r.text.splitlines()[0] == "email/mime/__init__.py"
    assert all(p.startswith("email/mime/") for p in r.text.splitlines())
    r = await local_box.call("list_files", {"path": "nope"})
    assert r.error == "nope: no such directory"


async def test_edit_file_exact_replace_is_diffable(local_box: Toolbox, ws: Workspace) -> None:
    bad = "    encoded = header_bytes.translate(_QUOPRI_HEADER_MAP)"
    good = "    encoded = header_bytes.decode('latin1').translate(_QUOPRI_HEADER_MAP)"
    r = await local_box.call("edit_file", {"path": "email/quoprimime.py", "old": bad, "new": good})
    assert r.error is None
    assert r.text == "edited email/quoprimime.py: replaced lines 142-142 (1 line -> 1 line)\n"
    assert f"-{bad}\n+{good}" in ws.diff()
    assert os.stat(ws.root / "email" / "quoprimime.py").st_mode & 0o777 == 0o644
    for args, message in [
        ({"old": bad, "new": good}, "`old` text not found"),
        ({"old": "import", "new": "x"}, "occurs"),
        ({"old": "", "new": "x"}, "`old` is empty"),
    ]:
        r = await local_box.call("edit_file", {"path": "email/quoprimime.py", **args})
        assert r.error is not None and message in r.error
    r = await local_box.call("edit_file", {"path": ".git/config", "old": "a", "new": "b"})
    assert r.error is not None and ".git" in r.error


async def test_edit_keeps_bytes_that_are_not_utf8(local_box: Toolbox, ws: Workspace) -> None:
    p = ws.root / "latin1.txt"
    p.write_bytes(b"caf\xe9 = 1\nname = 'x'\n")
    r = await local_box.call("edit_file", {"path": "latin1.txt", "old": "'x'", "new": "'y'"})
    assert r.error is None
    assert p.read_bytes() == b"caf\xe9 = 1\nname = 'y'\n"


async def test_call_never_raises_for_bad_calls(local_box: Toolbox) -> None:
    for name, args, message in [
        ("shell", {}, "unknown tool 'shell'"),
        ("delegate", {}, "unknown tool 'delegate'"),
        ("read_file", "{not json", "arguments are not valid JSON"),
        ("read_file", "[1, 2]", "arguments must be a JSON object"),
        ("read_file", {"path": 3}, "path must be a string"),
    ]:
        r = await local_box.call(name, args)
        assert r.error is not None and message in r.error, r.error


def test_facts_fill_the_trace_record() -> None:
    from agentload.tools import ToolResult

    r = ToolResult(text="x", start_ns=1, end_ns=5, exit_code=0, sandbox_id="abc")
    rec = ToolCallRecord(
        id="c1",
        session_id="s",
        agent_id="a",
        llm_call_id="l",
        name="run_tests",
        arguments={},
        **r.facts(),
    )
    assert (rec.start_ns, rec.end_ns, rec.exit_code, rec.sandbox_id) == (1, 5, 0, "abc")
    assert r.duration_ns == 4
