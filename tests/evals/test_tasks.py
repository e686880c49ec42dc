"""The eval task suite: its files, its selection, and its self-check on real suites."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from agentload.errors import ScenarioError
from agentload.evals.taskcheck import check_tasks
from agentload.evals.tasks import (
    SUITE_MARK,
    TASK_KINDS,
    _task_from,
    all_tasks,
    get_task,
    parse_suite,
    select_tasks,
)
from agentload.scenarios import load_scenario


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentload", *args],
        capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def test_the_suite_has_twenty_tasks_over_six_packages_of_several_kinds() -> None:
    tasks = all_tasks()
    assert len(tasks) >= 20
    assert len({t.package for t in tasks}) >= 6
    assert len({t.kind for t in tasks}) >= 4 and {t.kind for t in tasks} <= set(TASK_KINDS)
    for t in tasks:
        assert t.suite == f"test.test_{t.package}"
        # unittest ids of the suite, or the doctests it loads (named after the module)
        assert t.failing_tests
        assert all(i.startswith((t.suite + ".", t.package)) for i in t.failing_tests)
        # the issue is a user's report: it names neither the file nor a line
        assert t.fault.path not in t.issue and Path(t.fault.path).name not in t.issue
        assert t.fault.old != t.fault.new and t.fault.probe()
    # the presets' faults are tasks of the suite
    assert {"qp-header-decode", "logging-asctime-first"} <= {t.name for t in tasks}


def test_selection_by_all_names_packages_and_lists() -> None:
    names = [t.name for t in all_tasks()]
    assert [t.name for t in select_tasks("all")] == names
    json_tasks = [t for t in all_tasks() if t.package == "json"]
    assert select_tasks("json") == json_tasks and len(json_tasks) >= 2
    two = f"{names[3]},{names[0]}"
    assert [t.name for t in select_tasks(two)] == [names[0], names[3]]  # suite order, once
    assert select_tasks([names[0], names[0]]) == [get_task(names[0])]
    with pytest.raises(ScenarioError, match="unknown task 'nope'; valid: "):
        select_tasks("nope")
    with pytest.raises(ScenarioError, match="name at least one task"):
        select_tasks(" , ")


def test_a_scenario_picks_tasks_and_runs_each_on_its_own_workspace() -> None:
    s = load_scenario("quick", ["tasks=json,qp-header-decode"])
    assert s.tasks == ["json", "qp-header-decode"]
    task = get_task("qp-header-decode")
    one = s.for_task(task)
    assert one.task == task.issue and one.follow_ups == [] and one.tasks is None
    assert (one.workspace.recipe, one.workspace.fault) == ("stdlib:email", task.name)
    assert one.test_command[-1] == "test.test_email"
    assert one.test_target_command is not None and one.test_target_command[-1] == "{target}"
    assert (one.orchestrator, one.context_target) == (s.orchestrator, s.context_target)
    with pytest.raises(ScenarioError, match=r"-c tasks=nope: tasks: unknown task 'nope'"):
        load_scenario("quick", ["tasks=nope"])


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("[1, 2]", "not a mapping"),
        ("package: json\n", "missing field 'failing_tests'"),
        ("package: json\nsuite: x\nkind: typo\nfault: {path: a, old: b, new: c}\n"
         "failing_tests: [t]\nissue: i\n", "kind: 'typo'; valid: off-by-one"),
        ("package: json\nsuite: x\nkind: off-by-one\nfault: {path: a}\nfailing_tests: [t]\n"
         "issue: i\n", "fault: needs exactly path, old and new"),
        ("package: json\nsuite: x\nkind: off-by-one\nfault: {path: a, old: b, new: c}\n"
         "failing_tests: []\nissue: i\n", "failing_tests: a non-empty list"),
        ("package: json\nsurprise: 1\n", "unknown field 'surprise'"),
        ("package: [\n", "cannot read"),
    ],
)  # fmt: skip
def test_a_bad_task_file_is_one_line_naming_it(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "my-task.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as exc:
        _task_from(path)
    assert str(exc.value).startswith("tasks/my-task.yaml") and error in str(exc.value)
    assert "\n" not in str(exc.value).strip()


def test_parse_suite_reads_the_last_result_line_or_none() -> None:
    line = SUITE_MARK + json.dumps(
        {"ran": 3, "failed": ["a.b"], "skipped": 1, "watched_passed": ["c.d"]}
    )
    got = parse_suite(f"noise\n{SUITE_MARK}{{bad json\n...F\n{line}\n")
    assert got is not None and (got.ran, got.failed, got.watched_passed) == (3, ("a.b",), ("c.d",))
    assert parse_suite("Traceback ... killed\n") is None
    assert parse_suite(SUITE_MARK + '{"ran": 1}') is None


def test_the_cli_lists_the_suite() -> None:
    proc = _cli("scenarios", "tasks")
    assert proc.returncode == 0, proc.stderr
    assert f"{len(all_tasks())} tasks over " in proc.stdout
    proc = _cli("scenarios", "tasks", "json", "--json")
    rows = json.loads(proc.stdout)["tasks"]
    assert {r["package"] for r in rows} == {"json"} and all(r["failing_tests"] for r in rows)
    bad = _cli("scenarios", "tasks", "nope")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "unknown task" in bad.stderr


def test_the_check_catches_a_wrong_failing_list_and_an_issue_naming_the_file() -> None:
    real = (
        get_task("json-float-exponent")
        if "json-float-exponent" in {t.name for t in all_tasks()}
        else select_tasks("json")[0]
    )
    wrong = replace(real, failing_tests=(*real.failing_tests[1:], "test.test_json.Nope.test_no"))
    named = replace(real, issue=f"{real.issue} It is in {Path(real.fault.path).name}.")
    good, bad, leak = check_tasks([real, wrong, named], jobs=2)
    assert good.ok, good.problems
    assert any("unlisted failures: " + real.failing_tests[0] in p for p in bad.problems)
    assert any("listed tests pass: test.test_json.Nope.test_no" in p for p in bad.problems)
    assert leak.problems == [f"issue: names the file {Path(real.fault.path).name}"]


@pytest.mark.slow
def test_every_task_of_the_suite_is_proven_by_the_check() -> None:
    """`scenarios tasks --check` over the whole suite: each clean suite green, each faulted one
    failing exactly its listed tests, each reference fix green again."""
    proc = _cli("scenarios", "tasks", "--check", "-p", "2", "--json", timeout=900)
    doc = json.loads(proc.stdout)
    bad = [r for r in doc["tasks"] if not r["ok"]]
    assert proc.returncode == 0 and doc["ok"] and not bad, bad
    assert len(doc["tasks"]) == len(all_tasks())
