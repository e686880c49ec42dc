"""The shipped eval task suite: real bugs in copies of standard-library packages.

A task is one YAML file in ``presets/`` (its name is the file's stem)::

    package: json                 # the workspace is stdlib:json (the package + its test suite)
    suite: test.test_json         # the test module `run_tests` and the success check run
    kind: wrong-condition         # off-by-one, wrong-condition, missing-case, swapped-argument ...
    fault:                        # the single-commit bug: `old` (exactly once in `path`) -> `new`
      path: json/decoder.py
      old: |-
        ...
      new: |-
        ...
    failing_tests:                # exactly the tests the fault breaks (unittest ids)
      - test.test_json.test_x.TestPyX.test_y
    issue: >-                     # what a user would write: the symptom, not the file or line
      ...

A task's ``fault`` is also a workspace fault (``workspace.fault: NAME``), and
``Scenario`` sessions of a task run its issue text on its workspace (``for_task``).
``SUITE_RUNNER`` is the one test runner of the suite's checks: it runs a test module with
unittest and prints one ``AGENTLOAD-SUITE {json}`` line (tests run, the ids that failed, the
watched ids that passed), which ``parse_suite`` reads back.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from agentload.errors import ScenarioError

__all__ = [
    "SUITE_MARK",
    "SUITE_RUNNER",
    "TASK_KINDS",
    "Fault",
    "SuiteResult",
    "Task",
    "all_tasks",
    "get_task",
    "parse_suite",
    "select_tasks",
    "suite_argv",
]

TASK_KINDS = (
    "off-by-one",
    "wrong-condition",
    "missing-case",
    "swapped-argument",
    "wrong-value",
    "wrong-operator",
)
"""The kinds of single-commit bug a task may be (what its ``kind`` says)."""


@dataclass(frozen=True)
class Fault:
    """A small, documented mutation that makes real tests fail: ``old`` -> ``new`` in ``path``."""

    name: str
    path: str
    old: str
    new: str
    description: str

    def probe(self) -> str:
        """The first line of ``new`` that is not a line of ``old``, stripped: what a search for
        the faulty code looks for."""
        olds = set(self.old.splitlines())
        for line in self.new.splitlines():
            if line not in olds and line.strip():
                return line.strip()
        return self.new.strip().splitlines()[0] if self.new.strip() else self.new


@dataclass(frozen=True)
class Task:
    """One eval task (see the module docstring)."""

    name: str
    package: str
    suite: str
    kind: str
    fault: Fault
    failing_tests: tuple[str, ...]
    issue: str

    @property
    def recipe(self) -> str:
        """The workspace recipe: ``stdlib:PACKAGE``."""
        return f"stdlib:{self.package}"

    def test_command(self, target: str | None = None) -> list[str]:
        """The agents' ``run_tests`` command: unittest over the suite (or ``target``)."""
        return ["python3", "-c", _UNITTEST_MAIN, target or self.suite]


# Every suite runs from $TMPDIR with the workspace first on sys.path: the scratch files tests
# write into the current directory (test_email's, test_logging's) then neither need a writable
# workspace (the sandbox's user may not own it) nor show up in `git diff`. `use_resources = []`
# skips the tests that need regrtest's `-u` resources, as `python -m test` does by default.
_UNITTEST_MAIN = (
    "import os, sys; sys.path.insert(0, os.getcwd()); os.chdir(os.environ['TMPDIR']); "
    "import test.support, unittest; test.support.use_resources = []; unittest.main(module=None)"
)

SUITE_MARK = "AGENTLOAD-SUITE "
"""The start of the line ``SUITE_RUNNER`` prints its result on."""

# argv: module, watched test ids...
SUITE_RUNNER = r"""
import json, os, sys, unittest
module, watch = sys.argv[1], set(sys.argv[2:])
sys.path.insert(0, os.getcwd())
os.chdir(os.environ.get("TMPDIR") or "/tmp")
import test.support
test.support.use_resources = []
class Result(unittest.TextTestResult):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.passed = set()
    def addSuccess(self, test):
        super().addSuccess(test)
        self.passed.add(test.id())
suite = unittest.defaultTestLoader.loadTestsFromName(module)
result = unittest.TextTestRunner(stream=sys.stderr, verbosity=1, resultclass=Result).run(suite)
failed = set()
for test, _ in result.failures + result.errors:
    failed.add(test.test_case.id() if hasattr(test, "test_case") else test.id())
failed.update(t.id() for t in result.unexpectedSuccesses)
sys.stderr.flush()
out = {"ran": result.testsRun, "failed": sorted(failed), "skipped": len(result.skipped),
       "watched_passed": sorted(watch & result.passed)}
sys.stdout.write("\n" + "AGENTLOAD-SUITE " + json.dumps(out) + "\n")
"""


@dataclass(frozen=True)
class SuiteResult:
    """What one ``SUITE_RUNNER`` run reported."""

    ran: int
    failed: tuple[str, ...]
    skipped: int
    watched_passed: tuple[str, ...]

    def record(self) -> dict[str, Any]:
        """JSON-ready (the failed ids clipped to 50)."""
        return {
            "ran": self.ran,
            "failed": list(self.failed[:50]),
            "failed_count": len(self.failed),
            "skipped": self.skipped,
            "watched_passed": len(self.watched_passed),
        }


def suite_argv(task: Task, watch: tuple[str, ...] = ()) -> list[str]:
    """The command that runs ``task``'s whole suite through ``SUITE_RUNNER`` in a workspace."""
    return ["python3", "-c", SUITE_RUNNER, task.suite, *watch]


def parse_suite(output: str) -> SuiteResult | None:
    """The result line of a ``SUITE_RUNNER`` run's output, or None when there is none (the
    suite crashed, timed out or was killed before it finished)."""
    for line in reversed(output.splitlines()):
        if line.startswith(SUITE_MARK):
            try:
                data = json.loads(line[len(SUITE_MARK) :])
                return SuiteResult(
                    ran=int(data["ran"]),
                    failed=tuple(str(t) for t in data["failed"]),
                    skipped=int(data["skipped"]),
                    watched_passed=tuple(str(t) for t in data["watched_passed"]),
                )
            except (ValueError, KeyError, TypeError):
                return None
    return None


# -- the shipped suite -------------------------------------------------------------------------
_FIELDS = {"package", "suite", "kind", "fault", "failing_tests", "issue"}
_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


def _tasks_dir() -> Path:
    return Path(str(resources.files("agentload.evals").joinpath("presets")))


def _task_from(path: Path) -> Task:
    where = f"tasks/{path.name}"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"{where}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        why = getattr(exc, "problem", None) or "not YAML"
        raise ScenarioError(f"{where}{at}: cannot read: {why}") from None
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: not a mapping")
    unknown = sorted(set(data) - _FIELDS)
    if unknown:
        raise ScenarioError(f"{where}: unknown field {unknown[0]!r}")
    missing = sorted(_FIELDS - set(data))
    if missing:
        raise ScenarioError(f"{where}: missing field {missing[0]!r}")
    name = path.stem
    if not _NAME.match(name):
        raise ScenarioError(f"{where}: a task name is lower-case letters, digits, '-' and '.'")
    fault = data["fault"]
    if not isinstance(fault, dict) or set(fault) != {"path", "old", "new"}:
        raise ScenarioError(f"{where}: fault: needs exactly path, old and new")
    if data["kind"] not in TASK_KINDS:
        raise ScenarioError(f"{where}: kind: {data['kind']!r}; valid: {', '.join(TASK_KINDS)}")
    tests = data["failing_tests"]
    if not isinstance(tests, list) or not tests:
        raise ScenarioError(f"{where}: failing_tests: a non-empty list of test ids")
    issue = str(data["issue"]).strip()
    if not issue:
        raise ScenarioError(f"{where}: issue: empty")
    return Task(
        name=name,
        package=str(data["package"]),
        suite=str(data["suite"]),
        kind=str(data["kind"]),
        fault=Fault(
            name=name,
            path=str(fault["path"]),
            old=str(fault["old"]),
            new=str(fault["new"]),
            description=f"{data['kind']} in {fault['path']}: {len(tests)} tests of "
            f"{data['suite']} fail",
        ),
        failing_tests=tuple(str(t) for t in tests),
        issue=issue,
    )


@functools.cache
def _suite() -> dict[str, Task]:
    return {p.stem: _task_from(p) for p in sorted(_tasks_dir().glob("*.yaml"))}


def all_tasks() -> list[Task]:
    """Every shipped task, by name."""
    return list(_suite().values())


def get_task(name: str) -> Task:
    """The task called ``name``; ``ScenarioError`` listing the valid names when unknown."""
    task = _suite().get(name)
    if task is None:
        raise ScenarioError(f"unknown task {name!r}; valid: {', '.join(_suite())} (or all)")
    return task


def select_tasks(spec: str | list[str]) -> list[Task]:
    """The tasks ``spec`` names: ``all``, one name, a comma-separated list or a list of names
    (a package name stands for all of its tasks); in suite order, each once."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise ScenarioError("tasks: name at least one task (or all)")
    suite = _suite()
    chosen: set[str] = set()
    for n in names:
        if n == "all":
            chosen.update(suite)
        elif n in suite:
            chosen.add(n)
        elif any(t.package == n for t in suite.values()):
            chosen.update(k for k, t in suite.items() if t.package == n)
        else:
            get_task(n)
    return [t for k, t in suite.items() if k in chosen]
