"""One generated session: workspace copy, sandbox, toolbox, the orchestrator graph, the record.

``run_session`` is an ``async with SessionPlace(...)`` (the workspace copy and the sandbox,
closed in ``__aexit__`` after a normal end, an exception or a cancellation: no container
outlives the run), the first prompt, and the orchestrator graph. The graph returning means the
task is done; every other end is a ``SessionEnd(reason)`` (limits, endpoint failures) or an
exception (``interrupted``, ``error``). The session's end record, with its reason, is written
and flushed in ``finally:`` in every case.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentload import contract
from agentload.agents.first_prompt import (
    OrchestratorPrompt,
    build_orchestrator_prompt,
    build_subagent_prompt,
)
from agentload.agents.graphs import OrchestratorState, orchestrator_graph
from agentload.agents.limits import Deadline, EndReason, SessionEnd
from agentload.agents.llm import ChatClient
from agentload.agents.runtime import (
    AgentRuntime,
    AgentSettings,
    SubagentSettings,
    orchestrator_id,
)
from agentload.agents.tracing import SessionRecorder, SessionStats, SessionStatus
from agentload.fitted import SessionWaits
from agentload.protocols import TraceSink
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.capture import CallCapture
from agentload.trace.events import Error, Eval

if TYPE_CHECKING:
    from agentload.scenarios.models import Scenario

__all__ = [
    "SessionPlace",
    "SessionSetup",
    "Verdict",
    "agent_settings",
    "first_prompt_budget",
    "run_session",
    "success_check",
]


@dataclass(frozen=True)
class SessionSetup:
    """Which session to run: its position in the run, id, seed and where its files go."""

    index: int
    session_id: str
    seed: int
    workdir: Path
    sandbox_kind: str
    evaluate: bool = False
    keep_workspace: bool = False
    task: str | None = None
    """The eval task the session runs (``evals.tasks``; its scenario is ``for_task``'s)."""
    attempt: int = 0
    pace_real: bool = False
    """Sleep through the scenario's modeled waits (``generate --pace real``)."""


def agent_settings(
    scenario: Scenario, model: str, seed: int | None, token_ratio: float = 1.0
) -> AgentSettings:
    """The agents' settings from a scenario (``token_ratio``: server tokens per token of ours,
    ``generate.calibrate``)."""
    subs = {
        kind: SubagentSettings(
            system_prompt=build_subagent_prompt(spec.system_prompt),
            tools=tuple(spec.tools),
            max_turns=spec.max_turns,
            max_tokens=spec.max_tokens,
        )
        for kind, spec in scenario.subagents.items()
    }
    return AgentSettings(
        model=model,
        orchestrator_tools=tuple(scenario.orchestrator.tools),
        max_rounds=scenario.orchestrator.max_rounds,
        context_target=scenario.context_target,
        max_parallel_delegations=scenario.orchestrator.max_parallel_delegations,
        subagents=subs,
        max_tokens=scenario.orchestrator.max_tokens,
        seed=seed,
        follow_ups=tuple(scenario.follow_ups),
        token_ratio=token_ratio,
        tool_descriptions=dict(scenario.tool_descriptions),
        context_refresh_per_call=(
            scenario.pacing.context_refresh_per_call or 0.0 if scenario.pacing else 0.0
        ),
    )


class SessionPlace:
    """A session's workspace copy and its sandbox, opened by ``async with`` and closed in
    ``__aexit__`` after a normal end, an exception or a cancellation (Ctrl-C, SIGTERM). A sandbox
    still being created when the session is cancelled is waited for, then closed."""

    def __init__(
        self,
        setup: SessionSetup,
        scenario: Scenario,
        stats: SessionStats,
        mounts: dict[str, str] | None = None,
        before_sandbox: Callable[[Path], None] | None = None,
        egress: tuple[int, ...] | None = None,
    ) -> None:
        """``mounts``: more host paths a Docker sandbox sees read-only (``open_sandbox``);
        ``before_sandbox``: called with the workspace root once it exists, before the sandbox
        opens (``generate --agent`` hands the workspace to the sandbox's user there);
        ``egress``: a local sandbox confines its commands, these loopback ports their way out."""
        self.setup = setup
        self.scenario = scenario
        self.stats = stats
        self.mounts = mounts
        self.before_sandbox = before_sandbox
        self.egress = egress
        self.dir = setup.workdir / setup.session_id
        self.sandbox: Any = None
        self.root = self.dir

    async def __aenter__(self) -> SessionPlace:
        from agentload.scenarios.workspace import materialise

        try:
            self.stats.status = SessionStatus.WORKSPACE
            ws = await asyncio.to_thread(
                materialise, self.scenario.workspace.recipe, self.dir, self.scenario.workspace.fault
            )
            self.root = ws.root
            self.files = await asyncio.to_thread(ws.files)
            if self.before_sandbox is not None:
                await asyncio.to_thread(self.before_sandbox, self.root)
            self.stats.status = SessionStatus.SANDBOX
            self.sandbox = await self._open_sandbox()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.sandbox is not None:
            await _close(self.sandbox)
            self.sandbox = None
        if not self.setup.keep_workspace:
            shutil.rmtree(self.dir, ignore_errors=True)

    async def _open_sandbox(self) -> Any:
        from agentload.sandboxes import open_sandbox

        fut = asyncio.ensure_future(
            asyncio.to_thread(
                open_sandbox,
                self.setup.sandbox_kind,
                self.root,
                self.scenario.sandbox,
                self.setup.session_id,
                mounts=self.mounts,
                egress=self.egress,
            )
        )
        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            # The container may be half-created in the worker thread: wait for it, close it.
            with contextlib.suppress(Exception):
                sandbox = await fut
                sandbox.close()
            raise


async def _close(sandbox: Any) -> None:
    """Close the sandbox; off the event loop unless the task is being cancelled."""
    task = asyncio.current_task()
    try:
        if task is not None and task.cancelling():
            sandbox.close()  # no awaiting while cancelled: close it now
        else:
            await asyncio.to_thread(sandbox.close)
    except Exception:  # closing is best effort: `agentload sandbox cleanup` exists for the rest
        pass


def first_prompt_budget(scenario: Scenario, token_ratio: float) -> int:
    """The first prompt's budget in our tokens: the scenario's, which is in server tokens."""
    return max(1, round(scenario.orchestrator.initial_context_tokens / token_ratio))


async def _first_prompt(
    place: SessionPlace, scenario: Scenario, settings: AgentSettings, counter: ChatTokenCounter
) -> OrchestratorPrompt:
    """The orchestrator's first prompt: instructions, repository map and key files, sized to the
    scenario's ``initial_context_tokens`` of the server (``/ token_ratio`` of ours)."""
    return await asyncio.to_thread(
        build_orchestrator_prompt,
        root=place.root,
        files=place.files,
        instructions=scenario.orchestrator.system_prompt,
        task=scenario.task,
        tools=settings.schemas(settings.orchestrator_tools),
        budget_tokens=first_prompt_budget(scenario, settings.token_ratio),
        counter=counter,
    )


async def _orchestrate(rt: AgentRuntime, prompt: OrchestratorPrompt) -> None:
    """Run the orchestrator graph; it returns when the task is done and raises ``SessionEnd``
    for every other end."""
    orch = orchestrator_id(rt.session_id)
    await rt.recorder.agent_start(orch, contract.ORCHESTRATOR)
    state = OrchestratorState(
        messages=[
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
        ],
        seq=0,
        depends_on=[],
        follow_ups_sent=0,
    )
    try:
        await orchestrator_graph().ainvoke(
            state, context=rt, config={"recursion_limit": 4 * rt.settings.max_rounds + 20}
        )
    finally:
        await rt.recorder.agent_end(orch)


async def _evaluate(
    sandbox: Any, scenario: Scenario, recorder: SessionRecorder, task: str | None
) -> bool:
    """The success check (``success_check``), its verdict in the counters and the trace."""
    verdict = await success_check(sandbox, scenario, task)
    recorder.stats.eval_detail = verdict.detail
    await recorder.event(verdict.event)
    return verdict.event.passed


@dataclass(frozen=True)
class Verdict:
    """A success check's outcome: the counters' ``eval_detail`` and the trace's ``eval`` event."""

    detail: dict[str, Any]
    event: Eval


async def success_check(sandbox: Any, scenario: Scenario, task: str | None) -> Verdict:
    """The success check: for an eval task, its whole suite through ``SUITE_RUNNER`` (passed:
    nothing fails and every listed failing test passes); else the scenario's test command
    exits 0."""
    from agentload.evals.tasks import SUITE_MARK, get_task, parse_suite, suite_argv

    timeout = scenario.tool_timeouts_s.run_tests
    spec = get_task(task) if task is not None else None
    argv = suite_argv(spec, spec.failing_tests) if spec else list(scenario.test_command)
    res = await asyncio.to_thread(sandbox.exec, argv, timeout_s=timeout)
    output = res.output.decode("utf-8", "replace")
    passed = res.exit_code == 0 and not res.timed_out
    detail: dict[str, Any] = {}
    if spec is not None:
        suite = parse_suite(output)
        passed = (
            suite is not None
            and not suite.failed
            and set(suite.watched_passed) == set(spec.failing_tests)
        )
        detail = {"suite": suite.record() if suite else None, "task": spec.name}
        output = output.rpartition("\n" + SUITE_MARK)[0] if suite else output
    event = Eval(
        passed=passed,
        exit_code=res.exit_code,
        timed_out=res.timed_out,
        duration_s=(res.end_ns - res.start_ns) / 1e9,
        output_tail=output[-2000:],
        **detail,
    )
    return Verdict({"passed": passed, "timed_out": res.timed_out, **detail}, event)


async def _record_start(
    recorder: SessionRecorder,
    setup: SessionSetup,
    scenario: Scenario,
    place: SessionPlace,
    prompt: OrchestratorPrompt,
    ratio: float,
) -> None:
    """The ``session`` record: where it runs and what its first prompt holds."""
    await recorder.session_start(
        workspace=scenario.workspace.recipe,
        sandbox=str(place.sandbox.kind),
        meta={
            "index": setup.index,
            "seed": setup.seed,
            "sandbox_id": str(place.sandbox.id),
            "fault": scenario.workspace.fault,
            **({"task": setup.task, "attempt": setup.attempt} if setup.task else {}),
            "initial_context_files": len(prompt.files),
            "initial_context_tokens_ours": prompt.tokens,
            "initial_context_budget_ours": first_prompt_budget(scenario, ratio),
        },
    )


@dataclass
class _Ending:
    """How a session is ending, as far as it got: its record started, its reason, its check."""

    started: bool = False
    reason: EndReason = EndReason.ERROR
    eval_passed: bool | None = None


async def run_session(
    setup: SessionSetup,
    scenario: Scenario,
    *,
    client: ChatClient,
    writer: TraceSink,
    capture: CallCapture,
    on_start: Callable[[SessionStats], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
    token_ratio: float = 1.0,
) -> SessionStats:
    """Run one session to its end reason; returns its counters (see the module docstring).
    ``token_ratio``: the run's server tokens per token of ours (``generate.calibrate``)."""
    recorder = SessionRecorder(writer, capture, setup.session_id, clock=clock)
    stats = recorder.stats
    stats.task, stats.attempt = setup.task, setup.attempt
    if on_start is not None:
        on_start(stats)
    ending = _Ending()
    try:
        async with SessionPlace(setup, scenario, stats) as place:
            settings = agent_settings(scenario, client.model, setup.seed, token_ratio)
            stats.status = SessionStatus.CONTEXT
            prompt = await _first_prompt(place, scenario, settings, capture.counter)
            await _record_start(recorder, setup, scenario, place, prompt, settings.token_ratio)
            ending.started = True
            stats.status = SessionStatus.RUNNING
            rt = _runtime(place, scenario, settings, client, recorder, clock)
            if scenario.waits is not None:
                rt.waits = SessionWaits(scenario.waits, setup.index)
                rt.pace_real = setup.pace_real
            ending.reason = await _run_to_end(rt, prompt)
            if setup.evaluate:
                stats.status = SessionStatus.EVAL
                ending.eval_passed = await _evaluate(place.sandbox, scenario, recorder, setup.task)
            stats.status = SessionStatus.CLOSING
    except asyncio.CancelledError:
        ending.reason = EndReason.INTERRUPTED
        raise
    except Exception as exc:
        ending.reason = EndReason.ERROR
        stats.detail = f"{type(exc).__name__}: {exc}"
        if ending.started:
            await recorder.event(Error(error=stats.detail))
        raise
    finally:
        await _close_record(recorder, writer, ending, clock)
    return stats


def _runtime(
    place: SessionPlace,
    scenario: Scenario,
    settings: AgentSettings,
    client: ChatClient,
    recorder: SessionRecorder,
    clock: Callable[[], int],
) -> AgentRuntime:
    """The graphs' run-time context for the session: its toolbox in its sandbox, its deadline."""
    from agentload.tools import Toolbox

    return AgentRuntime(
        session_id=recorder.session_id,
        settings=settings,
        client=client,
        recorder=recorder,
        toolbox=Toolbox(place.sandbox, place.root, scenario),
        deadline=Deadline(scenario.wall_budget_s, clock),
        clock=clock,
    )


async def _run_to_end(rt: AgentRuntime, prompt: OrchestratorPrompt) -> EndReason:
    """Run the orchestrator: its end reason, ``done`` when the graph returns, else the reason of
    its ``SessionEnd`` (whose detail goes into the session's counters)."""
    try:
        await _orchestrate(rt, prompt)
    except SessionEnd as end:
        rt.recorder.stats.detail = end.detail
        return end.reason
    return EndReason.DONE


async def _close_record(
    recorder: SessionRecorder, writer: TraceSink, ending: _Ending, clock: Callable[[], int]
) -> None:
    """Close the session in every case: its end record when it started (else only its
    counters), then the trace flushed."""
    stats = recorder.stats
    stats.status = SessionStatus.CLOSING
    if ending.started:
        await recorder.session_end(ending.reason, eval_passed=ending.eval_passed)
    else:
        stats.end_ns = clock()
        stats.end_reason = ending.reason
    with contextlib.suppress(RuntimeError):
        await writer.flush()
    stats.status = SessionStatus.ENDED
