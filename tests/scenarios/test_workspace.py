"""Workspace recipes and fault injection, on real code with real tests."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from agentload.errors import WorkspaceError
from agentload.evals.tasks import all_tasks
from agentload.scenarios import load_scenario
from agentload.scenarios.workspace import get_fault, materialise


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def test_stdlib_email_is_the_package_plus_its_tests(tmp_path: Path) -> None:
    ws = materialise("stdlib:email", tmp_path / "ws", None)
    files = ws.files()
    for expected in (
        "email/quoprimime.py",
        "email/mime/text.py",
        "test/__init__.py",
        "test/support/__init__.py",
        "test/test_email/test_email.py",
        "test/test_email/data/msg_01.txt",
    ):
        assert expected in files
    assert not any("__pycache__" in f or f.startswith(".git/") for f in files)
    size = sum((ws.root / f).stat().st_size for f in files)
    assert 1_000_000 < size < 3_000_000  # ~1.3 MB of real code and test data
    assert _git(ws.root, "log", "--format=%s").splitlines() == [
        "agentload: workspace from stdlib:email"
    ]
    assert ws.base_commit == ws.head_commit and ws.diff() == ""


def test_fault_is_a_second_commit_and_ids_are_reproducible(tmp_path: Path) -> None:
    a = materialise("stdlib:email", tmp_path / "a", "qp-header-decode")
    b = materialise("stdlib:email", tmp_path / "b", "qp-header-decode")
    assert (a.base_commit, a.head_commit) == (b.base_commit, b.head_commit)
    assert a.base_commit != a.head_commit
    diff = _git(a.root, "diff", a.base_commit, a.head_commit)
    fault = get_fault("qp-header-decode")
    assert f"-{fault.old}" in diff and f"+{fault.new}" in diff
    assert "email/quoprimime.py" in diff and diff.count("\n+") == 2  # header + one line
    # the agents' edits show up as the workspace diff
    p = a.root / "email" / "quoprimime.py"
    p.write_text(p.read_text().replace(fault.new, fault.old))
    assert "+    encoded = header_bytes.decode('latin1')" in a.diff()


def _run_suite(root: Path) -> subprocess.CompletedProcess[str]:
    argv = load_scenario("quick").test_command
    python = str(Path(sys.base_prefix) / "bin" / "python3")
    env = {"PATH": os.environ["PATH"], "PYTHONPYCACHEPREFIX": str(root.parent / "pyc")}
    return subprocess.run(
        [python, *argv[1:]], cwd=root, capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.slow
def test_the_fault_makes_real_tests_fail_inside_the_workspace_copy(tmp_path: Path) -> None:
    ws = materialise("stdlib:email", tmp_path / "ws", "qp-header-decode")
    run = _run_suite(ws.root)
    assert run.returncode == 1
    assert "FAILED (errors=24" in run.stderr
    # the tracebacks point into the workspace's own copy of the package
    assert f'File "{ws.root}/email/quoprimime.py", line 142, in header_encode' in run.stderr
    clean = materialise("stdlib:email", tmp_path / "clean", None)
    run = _run_suite(clean.root)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "OK (skipped=" in run.stderr


def test_every_documented_fault_applies_to_its_stdlib_package(tmp_path: Path) -> None:
    for i, task in enumerate(all_tasks()):
        ws = materialise(task.recipe, tmp_path / str(i), task.name)
        assert (ws.root / task.fault.path).read_text().count(task.fault.new) == 1


@pytest.mark.slow
@pytest.mark.docker
def test_logging_session_suite_runs_in_the_sandbox_and_its_fault_fails_it(
    docker_client: object, tmp_path: Path
) -> None:
    """The logging-session workspace: its whole suite passes in the Docker sandbox as
    materialised (the certificates its TLS test reads are copied; scratch files go to the
    sandbox's temporary directory, so the workspace stays clean), and its fault fails exactly
    the four tests that format asctime."""
    from agentload.sandboxes import open_sandbox

    scenario = load_scenario("logging-session")
    assert scenario.workspace.fault == "logging-asctime-first"
    outcomes = {}
    for name, fault in (("clean", None), ("fault", scenario.workspace.fault)):
        ws = materialise(scenario.workspace.recipe, tmp_path / name, fault)
        assert "test/certdata/keycert.pem" in ws.files()
        with open_sandbox("docker", ws.root, docker_client=docker_client) as sb:
            run = sb.exec(scenario.test_command, timeout_s=240)
        out = run.output.decode(errors="replace")
        assert not run.timed_out, out[-2000:]
        assert _git(ws.root, "status", "--porcelain") == "", "the suite wrote into the workspace"
        outcomes[name] = (run.exit_code, out)
    code, out = outcomes["clean"]
    assert code == 0 and "Ran 220 tests" in out and "\nOK" in out, out[-2000:]
    code, out = outcomes["fault"]
    assert code == 1, out[-2000:]
    failed = sorted(
        line.split(" ")[1] for line in out.splitlines() if line.startswith(("FAIL: ", "ERROR: "))
    )
    assert failed == ["test_braces", "test_issue_89047", "test_percent", "test_time"], failed
    assert "/workspace/logging/__init__.py" in out  # tracebacks point into the copy


def test_unknown_or_inapplicable_faults(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError, match=r"unknown fault 'nope'; valid: base64-header-length"):
        materialise("stdlib:email", tmp_path / "a", "nope")
    with pytest.raises(WorkspaceError, match="does not apply to this workspace"):
        materialise("stdlib:json", tmp_path / "b", "qp-header-decode")


def test_stdlib_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(WorkspaceError, match="stdlib:nonexistent_pkg: no such package"):
        materialise("stdlib:nonexistent_pkg", tmp_path / "a")
    # an interpreter whose `test` package was stripped: a clear error, not a half workspace
    fake = tmp_path / "stdlib"
    (fake / "email").mkdir(parents=True)
    (fake / "email" / "__init__.py").write_text("")
    real = sysconfig.get_paths
    monkeypatch.setattr(sysconfig, "get_paths", lambda *a, **k: {**real(), "stdlib": str(fake)})
    with pytest.raises(WorkspaceError, match="has no test suite for email"):
        materialise("stdlib:email", tmp_path / "b")
    with pytest.raises(WorkspaceError, match="bad recipe"):
        materialise("ftp:x", tmp_path / "c")


def test_path_recipe_copies_and_never_touches_the_original(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "mod.py").write_text("X = 1\n")
    (src / ".git").mkdir()
    (src / ".git" / "config").write_text("original")
    (src / "link").symlink_to("/etc/passwd")
    ws = materialise(f"path:{src}", tmp_path / "ws")
    assert ws.files() == ["link", "pkg/mod.py"]
    assert (ws.root / "link").is_symlink()  # copied as a link, the target is not copied
    (ws.root / "pkg" / "mod.py").write_text("X = 2\n")
    assert (src / "pkg" / "mod.py").read_text() == "X = 1\n"
    assert (src / ".git" / "config").read_text() == "original"
    with pytest.raises(WorkspaceError, match="not a directory"):
        materialise(f"path:{tmp_path / 'missing'}", tmp_path / "ws2")
    with pytest.raises(WorkspaceError, match="exists and is not empty"):
        materialise(f"path:{src}", ws.root)


def test_git_recipe_clones_a_local_repository(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    origin.mkdir()
    (origin / "a.py").write_text("A = 1\n")
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}
    for args in (["init", "-q", "-b", "main"], ["add", "a.py"]):
        subprocess.run(["git", *args], cwd=origin, check=True, env=env)
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one"],
        cwd=origin,
        check=True,
        env=env,
    )
    head = _git(origin, "rev-parse", "HEAD").strip()
    ws = materialise(f"git:{origin}", tmp_path / "ws")
    assert ws.files() == ["a.py"] and ws.base_commit == head
    (ws.root / "a.py").write_text("A = 2\n")
    assert (origin / "a.py").read_text() == "A = 1\n"
    assert "+A = 2" in ws.diff()
    with pytest.raises(WorkspaceError, match="git clone failed"):
        materialise(f"git:{tmp_path / 'nowhere'}", tmp_path / "ws2")
