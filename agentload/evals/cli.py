"""``agentload scenarios tasks [--check]``: the eval task suite listed, or proven (the command
is mounted in the ``scenarios`` group by ``scenarios.cli``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from agentload.evals.taskcheck import TaskCheck
    from agentload.evals.tasks import Task

__all__ = ["tasks_cmd"]


def tasks_cmd(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="tasks or packages to show (default: all)", show_default=False),
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="prove each task: clean suite green, faulted suite fails exactly the listed "
            "tests, the reference fix makes it green again",
        ),
    ] = False,
    jobs: Annotated[int, typer.Option("--jobs", "-p", min=1, help="suites run at once")] = 2,
    json_out: Annotated[bool, typer.Option("--json", help="one JSON object")] = False,
) -> None:
    """List the eval task suite (`eval --tasks ...`), or check it with --check (exit 1 when a
    task fails its check)."""
    from agentload.evals.tasks import select_tasks

    chosen = select_tasks(names or ["all"])
    if not check:
        _list_tasks(chosen, json_out)
        return
    if not _check_tasks(chosen, jobs, json_out):
        raise typer.Exit(1)


def _list_tasks(chosen: list[Task], json_out: bool) -> None:
    """Print the chosen tasks: one line each and a total, or one JSON object."""
    import orjson

    if json_out:
        rows = [
            {
                "name": t.name,
                "package": t.package,
                "kind": t.kind,
                "suite": t.suite,
                "failing_tests": list(t.failing_tests),
                "issue": t.issue,
            }
            for t in chosen
        ]
        typer.echo(orjson.dumps({"tasks": rows}).decode())
        return
    for t in chosen:
        typer.echo(f"{t.name:<28} {t.package:<14} {t.kind:<17} {len(t.failing_tests):>3} failing")
    packages = len({t.package for t in chosen})
    typer.echo(f"{len(chosen)} tasks over {packages} packages")


def _check_tasks(chosen: list[Task], jobs: int, json_out: bool) -> bool:
    """Prove the chosen tasks, each verdict on stderr as it lands (unless ``json_out``), then
    the tally or one JSON object; whether every task was proven."""
    import orjson

    from agentload.evals.taskcheck import check_tasks

    verdicts = check_tasks(chosen, jobs, None if json_out else _echo_verdict)
    bad = [v for v in verdicts if not v.ok]
    if json_out:
        checked = [{"task": v.task, "ok": v.ok, "problems": v.problems} for v in verdicts]
        typer.echo(orjson.dumps({"ok": not bad, "tasks": checked}).decode())
    else:
        typer.echo(f"{len(verdicts) - len(bad)}/{len(verdicts)} tasks proven")
    return not bad


def _echo_verdict(v: TaskCheck) -> None:
    """One task's verdict on stderr: ok or FAIL, its counts, then its problems."""
    mark = "ok  " if v.ok else "FAIL"
    typer.echo(
        f"{mark} {v.task:<28} {v.faulted_failed:>3} fail faulted, suite of "
        f"{v.clean_ran} tests ({v.wall_s:.1f}s)",
        err=True,
    )
    for problem in v.problems:
        typer.echo(f"     {problem}", err=True)
