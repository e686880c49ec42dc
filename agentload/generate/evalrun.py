"""An eval run's sessions → ``EvalDocument``: the glue between a generate run and
``agentload.evals`` (which builds, writes and reports it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentload.evals.results import Attempt, EvalDocument, Mode, build_eval
from agentload.evals.tasks import all_tasks

if TYPE_CHECKING:
    from agentload.generate.options import GenerateOptions
    from agentload.generate.run import RunResult

__all__ = ["eval_document"]


def eval_document(
    run: RunResult, opts: GenerateOptions, gpus: int | None, power_watts: float | None
) -> EvalDocument:
    """The eval results of ``run``, whose sessions ran eval tasks with the success check."""
    attempts = [
        Attempt(
            session=st.session_id,
            task=st.task,
            attempt=st.attempt,
            passed=bool(st.eval_passed),
            end_reason=st.end_reason,
            wall_s=st.wall_ns / 1e9,
            prompt_tokens=st.prompt_tokens,
            completion_tokens=st.completion_tokens,
            calls=st.calls,
            tool_calls=st.tool_calls,
            tool_s=st.tool_busy_ns / 1e9,
            suite=(st.eval_detail or {}).get("suite"),
        )
        for st in run.sessions
        if st.task is not None
    ]
    mode: Mode = "oracle" if opts.oracle else "model" if opts.endpoint else "simulator"
    s = opts.scenario
    return build_eval(
        attempts,
        {t.name: (t.package, t.kind) for t in all_tasks()},
        mode=mode,
        k=opts.attempts,
        wall_s=run.wall_ns / 1e9,
        gpus=gpus,
        power_watts=power_watts,
        endpoint=run.endpoint,
        model=run.model,
        scenario=s.name,
        seed=s.seed if opts.seed is None else opts.seed,
        parallel=opts.parallel,
        trace=str(run.trace_path),
    )
