"""Workspaces: a private copy of real code that a session's agents search, test and edit.

Recipes (always a copy; the original is never touched):

* ``stdlib:PACKAGE`` — the package from the running interpreter's standard library plus its test
  suite from the stdlib ``test`` package (``test/test_PACKAGE``), ``test/support`` (and
  ``test/certdata`` when the suite reads its certificates), laid out so
  that ``python3 -m unittest test.test_PACKAGE`` run in the workspace imports the *workspace's*
  copy (the current directory comes first on ``sys.path``).
* ``path:DIR`` — a copy of a directory (symlinks copied as links, ``.git`` left out).
* ``git:URL_OR_PATH`` — ``git clone`` of a URL or a local repository.

The workspace is a git repository: commit 1 is the code as materialised; a fault, when asked for,
is commit 2, so ``git diff HEAD`` shows exactly what the agents changed. Commit dates and author
are fixed, so the same recipe gives the same commit ids on every run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from agentload.errors import WorkspaceError
from agentload.evals.tasks import Fault, all_tasks
from agentload.masking import remember_url

__all__ = ["Fault", "Workspace", "get_fault", "list_faults", "materialise"]

_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".git")
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "agentload",
    "GIT_AUTHOR_EMAIL": "agentload@localhost",
    "GIT_COMMITTER_NAME": "agentload",
    "GIT_COMMITTER_EMAIL": "agentload@localhost",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00+0000",
    "GIT_COMMITTER_DATE": "2000-01-01T00:00:00+0000",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


def list_faults() -> list[Fault]:
    """The documented faults, by name: each task's of the suite (``evals.tasks``)."""
    return [t.fault for t in all_tasks()]


def get_fault(name: str) -> Fault:
    """The fault called ``name``; ``WorkspaceError`` listing the valid names when unknown."""
    for fault in list_faults():
        if fault.name == name:
            return fault
    valid = ", ".join(f.name for f in list_faults())
    raise WorkspaceError(f"unknown fault {name!r}; valid: {valid}")


@dataclass(frozen=True)
class Workspace:
    """A materialised workspace: a git repository at ``root``."""

    root: Path
    recipe: str
    fault: str | None
    base_commit: str
    head_commit: str

    def files(self) -> list[str]:
        """Every file's path relative to ``root``, sorted (``.git`` and caches left out)."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__")]
            rel = Path(dirpath).relative_to(self.root)
            out.extend((rel / f).as_posix() for f in filenames if not f.endswith(".pyc"))
        return sorted(out)

    def diff(self) -> str:
        """What changed since ``head_commit`` (the agents' edits), as a unified diff."""
        return _git(self.root, "diff", self.head_commit)


def _git(cwd: Path, *args: str) -> str:
    if shutil.which("git") is None:
        raise WorkspaceError("git is not installed; agentload needs it to make workspaces")
    env = {**os.environ, **_GIT_ENV}
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise WorkspaceError(f"git {args[0]} failed in {cwd}: {last}")
    return proc.stdout


def _commit(root: Path, message: str) -> str:
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "--no-verify", "--allow-empty", "-m", message)
    return _git(root, "rev-parse", "HEAD").strip()


def _stdlib(package: str, dest: Path) -> None:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    if not package.isidentifier():
        raise WorkspaceError(f"stdlib:{package}: not a module name")
    src_dir, src_mod = stdlib / package, stdlib / f"{package}.py"
    if not (src_dir.is_dir() or src_mod.is_file()):
        raise WorkspaceError(f"stdlib:{package}: no such package in {stdlib}")
    test_home = stdlib / "test"
    tests_dir, tests_mod = test_home / f"test_{package}", test_home / f"test_{package}.py"
    if not (test_home / "support").is_dir() or not (tests_dir.is_dir() or tests_mod.is_file()):
        raise WorkspaceError(
            f"stdlib:{package}: this Python ({stdlib}) has no test suite for {package} "
            "(some distributions strip the stdlib `test` package); use path: or git: instead"
        )
    if src_dir.is_dir():
        shutil.copytree(src_dir, dest / package, ignore=_IGNORE)
    else:
        shutil.copy2(src_mod, dest / src_mod.name)
    (dest / "test").mkdir()
    init = test_home / "__init__.py"
    (dest / "test" / "__init__.py").write_text(
        init.read_text(encoding="utf-8") if init.is_file() else "", encoding="utf-8"
    )
    shutil.copytree(test_home / "support", dest / "test" / "support", ignore=_IGNORE)
    if tests_dir.is_dir():
        shutil.copytree(tests_dir, dest / "test" / tests_dir.name, ignore=_IGNORE)
    else:
        shutil.copy2(tests_mod, dest / "test" / tests_mod.name)
        certdata = test_home / "certdata"
        if certdata.is_dir() and "certdata" in tests_mod.read_text(encoding="utf-8"):
            # the suite's TLS tests read their certificates from test/certdata
            shutil.copytree(certdata, dest / "test" / "certdata", ignore=_IGNORE)


def _path(src: str, dest: Path) -> None:
    source = Path(src).expanduser()
    if not source.is_dir():
        raise WorkspaceError(f"path:{src}: not a directory")
    shutil.copytree(source, dest, symlinks=True, ignore=_IGNORE, dirs_exist_ok=True)


def _clone(src: str, dest: Path) -> None:
    remember_url(src)  # git's own messages quote a URL's query
    local = Path(src).expanduser()
    url = str(local.resolve()) if local.exists() else src
    _git(dest.parent, "clone", "-q", "--no-hardlinks", "--", url, str(dest))


def _apply_fault(root: Path, name: str) -> None:
    fault = get_fault(name)
    target = root / fault.path
    text = target.read_text(encoding="utf-8") if target.is_file() else ""
    if text.count(fault.old) != 1:
        raise WorkspaceError(
            f"fault {name!r} does not apply to this workspace: it mutates {fault.path}, "
            "which is missing or differs from the code the fault was written for"
        )
    target.write_text(text.replace(fault.old, fault.new), encoding="utf-8")


def materialise(recipe: str, dest: Path, fault: str | None = None) -> Workspace:
    """Make the workspace of ``recipe`` at ``dest`` (new or empty), then inject ``fault``."""
    kind, sep, arg = recipe.partition(":")
    if not sep or not arg or kind not in ("stdlib", "path", "git"):
        raise WorkspaceError(f"bad recipe {recipe!r}: use stdlib:PACKAGE, path:DIR or git:URL")
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise WorkspaceError(f"workspace destination {dest} exists and is not empty")
    if kind == "git":
        dest.parent.mkdir(parents=True, exist_ok=True)
        _clone(arg, dest)
        base = _git(dest, "rev-parse", "HEAD").strip()
    else:
        dest.mkdir(parents=True, exist_ok=True)
        if kind == "stdlib":
            _stdlib(arg, dest)
        else:
            _path(arg, dest)
        _git(dest, "init", "-q", "-b", "main")
        base = _commit(dest, f"agentload: workspace from {recipe}")
    head = base
    if fault is not None:
        _apply_fault(dest, fault)
        head = _commit(dest, f"agentload: inject fault {fault}")
    return Workspace(root=dest, recipe=recipe, fault=fault, base_commit=base, head_commit=head)
