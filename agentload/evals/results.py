"""eval.json: what an ``agentload eval`` run over the task suite measured.

* **Success** (per attempt): the task's whole suite ran in the session's sandbox after the
  agents stopped, nothing failed, and every one of the task's listed failing tests passed.
* **pass@k** (per task, n attempts of which c succeeded): the unbiased estimator
  ``1 - C(n-c, k) / C(n, k)`` (Chen et al. 2021), for k = 1 and k = the run's ``-k``; the
  overall figures are the means over tasks.
* **Solved per hour**: successful attempts / the run's wall time in hours; per GPU divides by
  ``--gpus``, per MW by ``--power-watts`` / 10^6.
* **mode**: ``oracle`` (the built-in simulator plays each task's reference fix: a test of the
  harness, not of a model), ``simulator`` (the built-in simulator: neutral edits only, scores
  0), ``model`` (a real endpoint: the model's own numbers).
"""

from __future__ import annotations

import math
import os
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentload.errors import ResultsFormatError
from agentload.infile import read_document
from agentload.outfile import write_document

__all__ = [
    "EVAL_FILE",
    "SCHEMA",
    "Attempt",
    "EvalDocument",
    "Mode",
    "Overall",
    "TaskResult",
    "build_eval",
    "load_eval",
    "pass_at_k",
    "write_eval",
]

SCHEMA = "agentload.eval-results/1"
EVAL_FILE = "eval.json"
Mode = Literal["oracle", "simulator", "model"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Attempt(_Model):
    """One session on one task."""

    session: str = Field(description="session id in the trace")
    task: str = Field(description="task name")
    attempt: int = Field(description="0-based attempt number of this task")
    passed: bool = Field(description="the success rule held (see the module docstring)")
    end_reason: str | None = Field(description="why the agents stopped (done, limits, errors)")
    wall_s: float = Field(description="session wall time, workspace to success check")
    prompt_tokens: int = Field(description="server-reported prompt tokens, all calls")
    completion_tokens: int = Field(description="server-reported completion tokens, all calls")
    calls: int = Field(description="LLM calls, all agents")
    tool_calls: int = Field(description="tool calls, all agents")
    tool_s: float = Field(description="time when at least one tool ran")
    suite: dict[str, Any] | None = Field(
        description="the success check's suite run: ran, failed (≤50 ids), failed_count, "
        "skipped, watched_passed; null when it printed no result (crash, timeout)"
    )


class TaskResult(_Model):
    """One task over its attempts."""

    task: str
    package: str
    kind: str
    attempts: int = Field(description="n")
    passed: int = Field(description="c: successful attempts")
    pass_at_1: float
    pass_at_k: float = Field(description="at the run's k")
    wall_s_mean: float
    prompt_tokens_mean: float
    completion_tokens_mean: float
    calls_mean: float
    tool_s_mean: float
    end_reasons: dict[str, int] = Field(description="attempts by end reason")


class Overall(_Model):
    """The run's figures over all tasks."""

    tasks: int
    sessions: int
    passed: int = Field(description="successful attempts")
    tasks_solved: int = Field(description="tasks with at least one successful attempt")
    pass_at_1: float = Field(description="mean over tasks")
    pass_at_k: float = Field(description="mean over tasks, at k")
    solved_per_hour: float = Field(description="successful attempts per wall hour")
    solved_per_hour_per_gpu: float | None = Field(default=None, description="with --gpus")
    solved_per_hour_per_mw: float | None = Field(default=None, description="with --power-watts")


class EvalDocument(_Model):
    """eval.json (see the module docstring)."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    schema_: str = Field(default=SCHEMA, alias="schema")
    mode: Mode = Field(description="oracle, simulator or model (see the module docstring)")
    endpoint: str = Field(description="the endpoint, secrets masked")
    model: str
    scenario: str = Field(description="the scenario the tasks ran in")
    seed: int
    k: int = Field(description="attempts per task asked for (-k)")
    parallel: int = Field(description="sessions at once (-p)")
    trace: str = Field(description="the trace holding every session")
    wall_s: float = Field(description="the run's wall time")
    gpus: int | None = None
    power_watts: float | None = None
    overall: Overall
    tasks: list[TaskResult]
    attempts: list[Attempt]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimator of n attempts with c successes: 1 - C(n-c,k)/C(n,k);
    k > n is estimated at n."""
    if n <= 0:
        return 0.0
    k = min(k, n)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def build_eval(
    attempts: list[Attempt],
    meta: dict[str, tuple[str, str]],
    *,
    mode: Mode,
    k: int,
    wall_s: float,
    gpus: int | None = None,
    power_watts: float | None = None,
    **run: Any,
) -> EvalDocument:
    """The document of ``attempts``; ``meta``: each task's (package, kind), in suite order;
    ``run``: endpoint, model, scenario, seed, parallel, trace."""
    tasks = []
    for name, (package, kind) in meta.items():
        mine = [a for a in attempts if a.task == name]
        if not mine:
            continue
        n, c = len(mine), sum(a.passed for a in mine)
        tasks.append(
            TaskResult(
                task=name,
                package=package,
                kind=kind,
                attempts=n,
                passed=c,
                pass_at_1=pass_at_k(n, c, 1),
                pass_at_k=pass_at_k(n, c, k),
                wall_s_mean=_mean([a.wall_s for a in mine]),
                prompt_tokens_mean=_mean([a.prompt_tokens for a in mine]),
                completion_tokens_mean=_mean([a.completion_tokens for a in mine]),
                calls_mean=_mean([a.calls for a in mine]),
                tool_s_mean=_mean([a.tool_s for a in mine]),
                end_reasons=dict(Counter(a.end_reason or "unknown" for a in mine)),
            )
        )
    passed = sum(a.passed for a in attempts)
    per_hour = passed / (wall_s / 3600) if wall_s > 0 else 0.0
    overall = Overall(
        tasks=len(tasks),
        sessions=len(attempts),
        passed=passed,
        tasks_solved=sum(1 for t in tasks if t.passed),
        pass_at_1=_mean([t.pass_at_1 for t in tasks]),
        pass_at_k=_mean([t.pass_at_k for t in tasks]),
        solved_per_hour=per_hour,
        solved_per_hour_per_gpu=per_hour / gpus if gpus else None,
        solved_per_hour_per_mw=per_hour / (power_watts / 1e6) if power_watts else None,
    )
    return EvalDocument(
        mode=mode,
        k=k,
        wall_s=wall_s,
        gpus=gpus,
        power_watts=power_watts,
        overall=overall,
        tasks=tasks,
        attempts=attempts,
        **run,
    )


def write_eval(doc: EvalDocument, out: Path) -> Path:
    """Write eval.json into ``out`` (atomically); returns its path."""
    return write_document(doc, out, EVAL_FILE)


def load_eval(path: str | os.PathLike[str]) -> EvalDocument:
    """Read an eval.json (or the one in a directory); one-line ``ResultsFormatError`` naming the
    file and the field when it cannot be read as one."""
    p, data = read_document(path, EVAL_FILE, "eval results")
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ResultsFormatError(f"{p}: not an agentload eval results file ({SCHEMA})")
    try:
        return EvalDocument.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ResultsFormatError(f"{p}: {where}: {err['msg']}") from None
