"""``agentload eval --tasks``: every task of the suite end to end in Docker sandboxes, against
the built-in simulator with the oracle (every task solved) and without it (none solved), the
eval files, ``compare`` on the two runs, and the options that cannot work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_runs import agentload, one_error_line

from agentload.evals.results import load_eval, pass_at_k
from agentload.evals.tasks import all_tasks
from agentload.trace import load_trace

# The orchestrator works alone (no delegate): each session is a handful of calls, so the whole
# suite stays within a couple of minutes on two cores; the suites and sandboxes are real.
LEAN = ["-s", "quick", "-c", "orchestrator.tools=[search_code,read_file,list_files,run_tests,edit_file]"]  # fmt: skip


def _eval(tmp: Path, *args: str) -> dict[str, Any]:
    proc = agentload("eval", *LEAN, "--tasks", "all", "-p", "2", "--sandbox", "docker", "--json",
                     "--out", str(tmp), *args, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    payload: dict[str, Any] = json.loads(proc.stdout)
    return payload


@pytest.fixture(scope="module")
def runs(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    base = tmp_path_factory.mktemp("evals")
    oracle = _eval(base / "oracle", "--oracle")
    plain = _eval(base / "plain", "-c", "context_target=16000")
    return {"oracle": oracle, "plain": plain}


@pytest.mark.slow
@pytest.mark.docker
def test_the_oracle_solves_every_task_end_to_end(runs: dict[str, Any]) -> None:
    payload = runs["oracle"]
    doc = load_eval(payload["eval"])
    names = [t.name for t in all_tasks()]
    assert doc.mode == "oracle" and payload["eval_mode"] == "oracle"
    unsolved = [(a.task, a.end_reason, a.suite) for a in doc.attempts if not a.passed]
    assert not unsolved
    assert [t.task for t in doc.tasks] == names and doc.overall.tasks_solved == len(names)
    assert doc.overall.pass_at_1 == 1.0 and doc.overall.solved_per_hour > 0
    for a in doc.attempts:
        assert a.suite is not None and a.suite["failed_count"] == 0 and a.suite["ran"] > 0
        assert a.end_reason == "done" and a.calls >= 4 and a.tool_calls >= 3
    # every session is in the trace, with its task, its fix and its success check
    trace = load_trace(doc.trace)
    assert len(trace.sessions) == len(names)
    by_task = {t.name: t for t in all_tasks()}
    for sid, session in trace.sessions.items():
        task = by_task[session.meta["task"]]
        assert session.eval_passed is True and session.meta["fault"] == task.name
        edits = [
            c for c in trace.tool_calls.values() if c.session_id == sid and c.name == "edit_file"
        ]
        assert any(c.arguments.get("old") == task.fault.new for c in edits), sid
    folder = Path(payload["eval"]).parent
    page = (folder / "eval.html").read_text()
    assert page.count('class="pass"') == len(names) and "Oracle mode" in page


@pytest.mark.slow
@pytest.mark.docker
def test_without_the_oracle_the_simulator_solves_none(runs: dict[str, Any]) -> None:
    doc = load_eval(runs["plain"]["eval"])
    assert doc.mode == "simulator" and len(doc.attempts) == len(all_tasks())
    assert doc.overall.passed == 0 and doc.overall.pass_at_1 == 0.0
    for a in doc.attempts:
        assert not a.passed and a.end_reason not in ("error", "endpoint_error"), a
        # the faulted suite still fails: the listed tests at least
        assert a.suite is not None and a.suite["failed_count"] >= 1


@pytest.mark.slow
@pytest.mark.docker
def test_compare_shows_the_per_task_differences(runs: dict[str, Any]) -> None:
    a, b = Path(runs["oracle"]["eval"]), Path(runs["plain"]["eval"])
    proc = agentload("compare", str(a), str(b))
    assert proc.returncode == 0, proc.stderr
    n = len(all_tasks())
    assert "mode differs: A oracle, B simulator" in proc.stdout
    assert proc.stdout.count(" broke\n") == n
    assert f"{n} task(s) changed between solved and unsolved" in proc.stdout
    # folders work too, and then the live results are compared after the tasks
    both = agentload("compare", str(a.parent), str(b.parent))
    assert both.returncode == 0 and "traffic: not compared" in both.stdout


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(3, 0, 1) == 0.0 and pass_at_k(3, 3, 1) == 1.0
    assert pass_at_k(3, 1, 1) == pytest.approx(1 / 3)
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(2, 1, 3) == 1.0  # k > n: estimated at n


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--oracle", "--endpoint", "http://127.0.0.1:9/v1", "--tasks", "all"],
         "--oracle plays each task's reference fix in the built-in simulator: it is refused "
         "with --endpoint"),
        (["-k", "3"], "-k counts attempts per task: give --tasks"),
        (["--oracle"], "--oracle applies eval tasks' reference fixes: give --tasks"),
        (["--tasks", "nope"], "unknown task 'nope'; valid: "),
        (["--tasks", "all", "-n", "2"], "--sessions and --tasks: each task runs -k times"),
        (["--tasks", "all", "-k", "0"], "-k 0: Input should be greater than or equal to 1"),
        (["--tasks", "all", "--sweep", "1,2"], "--tasks with --sweep: one eval per run"),
    ],
)  # fmt: skip
def test_options_that_cannot_work_are_one_line(tmp_path: Path, args: list[str], error: str) -> None:
    proc = agentload("eval", "-s", "quick", "--out", str(tmp_path), *args)
    assert error in one_error_line(proc)
    assert not list(tmp_path.iterdir())  # refused before any session ran


def test_compare_of_a_bad_eval_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "eval.json"
    bad.write_text('{"schema": "agentload.eval-results/1", "mode": "oracle"}')
    line = one_error_line(agentload("compare", str(bad), str(bad)))
    assert f"{bad}: " in line and "endpoint" in line
    bad.write_text("{not json")
    assert "not JSON" in one_error_line(agentload("compare", str(bad), str(bad)))
    bad.write_text('{"schema": "agentload.replay-results/1"}')
    assert "not an agentload eval results file" in one_error_line(
        agentload("compare", str(bad), str(bad))
    )
    missing = tmp_path / "nowhere" / "eval.json"
    assert "no such eval results file" in one_error_line(
        agentload("compare", str(missing), str(bad))
    )
