"""``agentload scenarios tasks --check``: prove every task of the suite on this interpreter.

For each task, in fresh workspace copies (``materialise``), the suite runs three times through
``SUITE_RUNNER``, as ``eval`` runs it in the sandbox (whose Python is this one):

1. **clean** (no fault): nothing fails (run once per package and shared by its tasks);
2. **faulted**: exactly the task's ``failing_tests`` fail;
3. **fixed** (the reference fix, ``new`` -> ``old``, applied to the faulted copy): nothing fails
   and every listed test passes.

It also checks what the eval's edits rely on: the fault's ``new`` text is in the faulted file
exactly once (an exact-string edit can revert it), and the issue text names neither the file
nor a line number.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from agentload.evals.tasks import SuiteResult, Task, parse_suite, suite_argv
from agentload.scenarios.workspace import materialise

__all__ = ["TaskCheck", "check_tasks"]

SUITE_TIMEOUT_S = 600.0


@dataclass
class TaskCheck:
    """One task's verdict: ``problems`` is empty when it is proven."""

    task: str
    problems: list[str] = field(default_factory=list)
    clean_ran: int = 0
    faulted_failed: int = 0
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


def _env(tmp: Path) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "SYSTEMROOT")}
    return {
        **keep,
        "HOME": str(tmp),
        "TMPDIR": str(tmp),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def run_suite(task: Task, root: Path, watch: tuple[str, ...] = ()) -> SuiteResult | str:
    """Run ``task``'s suite in ``root`` on this interpreter: its result, or why there is none."""
    argv = suite_argv(task, watch)
    argv[0] = sys.executable
    with tempfile.TemporaryDirectory(prefix="agentload-suite-") as tmp:
        try:
            proc = subprocess.run(
                argv,
                cwd=root,
                env=_env(Path(tmp)),
                capture_output=True,
                text=True,
                timeout=SUITE_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"the suite ran past {SUITE_TIMEOUT_S:g}s"
    result = parse_suite(proc.stdout)
    if result is None:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        return f"the suite printed no result (exit {proc.returncode}): {tail[:200]}"
    return result


def _ids(ids: tuple[str, ...] | set[str]) -> str:
    shown = sorted(ids)
    more = f" (+{len(shown) - 5} more)" if len(shown) > 5 else ""
    return ", ".join(shown[:5]) + more


def _check_one(task: Task, clean: SuiteResult | str, root: Path) -> TaskCheck:
    t0 = time.perf_counter()
    out = TaskCheck(task.name)
    if isinstance(clean, str):
        out.problems.append(f"clean suite: {clean}")
    else:
        out.clean_ran = clean.ran
        if clean.failed:
            out.problems.append(f"clean suite: {len(clean.failed)} fail: {_ids(clean.failed)}")
    stem = Path(task.fault.path).name
    if stem in task.issue or task.fault.path in task.issue:
        out.problems.append(f"issue: names the file {stem}")
    if re.search(r"\bline \d+", task.issue):
        out.problems.append("issue: names a line number")
    try:
        materialise(task.recipe, root, task.name)
    except Exception as exc:  # a fault that no longer applies: one line in the verdict
        out.problems.append(f"fault: {exc}")
        return out
    target = root / task.fault.path
    text = target.read_text(encoding="utf-8")
    if text.count(task.fault.new) != 1:
        out.problems.append(
            f"fault: `new` is in {task.fault.path} {text.count(task.fault.new)} times"
        )
    faulted = run_suite(task, root)
    if isinstance(faulted, str):
        out.problems.append(f"faulted suite: {faulted}")
    else:
        out.faulted_failed = len(faulted.failed)
        got, want = set(faulted.failed), set(task.failing_tests)
        if got - want:
            out.problems.append(f"faulted suite: unlisted failures: {_ids(got - want)}")
        if want - got:
            out.problems.append(f"faulted suite: listed tests pass: {_ids(want - got)}")
    target.write_text(text.replace(task.fault.new, task.fault.old, 1), encoding="utf-8")
    fixed = run_suite(task, root, task.failing_tests)
    if isinstance(fixed, str):
        out.problems.append(f"fixed suite: {fixed}")
    else:
        if fixed.failed:
            out.problems.append(f"fixed suite: {len(fixed.failed)} fail: {_ids(fixed.failed)}")
        missing = set(task.failing_tests) - set(fixed.watched_passed)
        if missing:
            out.problems.append(f"fixed suite: listed tests did not pass: {_ids(missing)}")
    out.wall_s = time.perf_counter() - t0
    return out


def check_tasks(
    tasks: list[Task], jobs: int = 2, on_done: Callable[[TaskCheck], None] | None = None
) -> list[TaskCheck]:
    """Check ``tasks`` (``jobs`` suites at a time); one verdict per task, in order."""
    with (
        tempfile.TemporaryDirectory(prefix="agentload-taskcheck-") as tmp,
        ThreadPoolExecutor(max_workers=max(1, jobs)) as pool,
    ):
        base = Path(tmp)
        firsts = {(t.package, t.suite): t for t in reversed(tasks)}  # one clean run per suite

        def clean_run(task: Task) -> SuiteResult | str:
            root = base / f"clean-{task.name}"
            materialise(task.recipe, root)
            return run_suite(task, root)

        keys = sorted(firsts)
        clean = dict(zip(keys, pool.map(clean_run, [firsts[k] for k in keys]), strict=True))

        def one(i: int) -> TaskCheck:
            task = tasks[i]
            verdict = _check_one(task, clean[task.package, task.suite], base / f"{i}-{task.name}")
            if on_done is not None:
                on_done(verdict)
            return verdict

        return list(pool.map(one, range(len(tasks))))
