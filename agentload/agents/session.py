"""One generated session: workspace copy, sandbox, toolbox, the orchestrator graph, the record.

``run_session`` owns every resource it opens and releases them in ``finally:``: the sandbox
(its container) is closed after a normal end, an exception, or a cancellation (Ctrl-C,
SIGTERM), and the session's end record (with its reason) is written and flushed in every case.
A sandbox still being created when the session is cancelled is waited for, then closed, so no
container outlives the run.
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
from agentload.agents.context import build_orchestrator_prompt, build_subagent_prompt
from agentload.agents.graphs import OrchestratorState, orchestrator_graph
from agentload.agents.limits import Deadline, SessionEnd
from agentload.agents.llm import ChatClient
from agentload.agents.recording import SessionRecorder, SessionStats
from agentload.agents.runtime import (
    AgentRuntime,
    AgentSettings,
    SubagentSettings,
    orchestrator_id,
)
from agentload.protocols import TraceSink
from agentload.recorder.capture import CallCapture

if TYPE_CHECKING:
    from agentload.scenarios.models import Scenario

__all__ = ["SessionPlan", "agent_settings", "run_session"]


@dataclass(frozen=True)
class SessionPlan:
    """Which session to run: its position in the run, id, seed and where its files go."""

    index: int
    session_id: str
    seed: int
    workdir: Path
    sandbox_kind: str
    evaluate: bool = False
    keep_workspace: bool = False


def agent_settings(scenario: Scenario, model: str, seed: int | None) -> AgentSettings:
    """The agents' settings from a scenario (role markers built here, from the contract)."""
    subs = {
        kind: SubagentSettings(
            system_prompt=build_subagent_prompt(
                contract.marker(kind, max_turns=spec.max_turns), spec.system_prompt
            ),
            tools=tuple(spec.tools),
            max_turns=spec.max_turns,
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
        seed=seed,
        follow_ups=tuple(scenario.follow_ups),
    )


async def _open_sandbox(kind: str, root: Path, scenario: Scenario, session_id: str) -> Any:
    from agentload.sandboxes import open_sandbox

    fut = asyncio.ensure_future(
        asyncio.to_thread(open_sandbox, kind, root, scenario.sandbox, session_id)
    )
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        # The container may be half-created in the worker thread: wait for it, then close it.
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


async def _evaluate(sandbox: Any, scenario: Scenario, recorder: SessionRecorder) -> bool:
    timeout = scenario.tool_timeouts_s.run_tests
    res = await asyncio.to_thread(sandbox.exec, list(scenario.test_command), timeout_s=timeout)
    passed = res.exit_code == 0 and not res.timed_out
    await recorder.event(
        "eval",
        passed=passed,
        exit_code=res.exit_code,
        timed_out=res.timed_out,
        duration_s=(res.end_ns - res.start_ns) / 1e9,
        output_tail=res.output[-2000:].decode("utf-8", "replace"),
    )
    return passed


async def run_session(
    plan: SessionPlan,
    scenario: Scenario,
    *,
    client: ChatClient,
    writer: TraceSink,
    capture: CallCapture,
    on_start: Callable[[SessionStats], None] | None = None,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> SessionStats:
    """Run one session to its end reason; returns its counters (see the module docstring)."""
    from agentload.scenarios.workspace import materialise
    from agentload.tools import Toolbox

    sid = plan.session_id
    recorder = SessionRecorder(writer, capture, sid, clock=clock)
    stats = recorder.stats
    if on_start is not None:
        on_start(stats)
    ws_dir = plan.workdir / sid
    sandbox: Any = None
    started = False
    reason = "error"
    eval_passed: bool | None = None
    try:
        stats.status = "workspace"
        ws = await asyncio.to_thread(
            materialise, scenario.workspace.recipe, ws_dir, scenario.workspace.fault
        )
        stats.status = "sandbox"
        sandbox = await _open_sandbox(plan.sandbox_kind, ws.root, scenario, sid)
        toolbox = Toolbox(sandbox, ws.root, scenario)
        settings = agent_settings(scenario, client.model, plan.seed)
        tools = contract.tool_schemas(settings.orchestrator_tools)
        stats.status = "context"
        files = await asyncio.to_thread(ws.files)
        prompt = await asyncio.to_thread(
            build_orchestrator_prompt,
            root=ws.root,
            files=files,
            marker_line=contract.marker(
                contract.ORCHESTRATOR,
                context_target=settings.context_target,
                max_rounds=settings.max_rounds,
            ),
            instructions=scenario.orchestrator.system_prompt,
            task=scenario.task,
            tools=tools,
            budget_tokens=scenario.orchestrator.initial_context_tokens,
            counter=capture.counter,
        )
        await recorder.session_start(
            workspace=scenario.workspace.recipe,
            sandbox=str(sandbox.kind),
            meta={
                "index": plan.index,
                "seed": plan.seed,
                "sandbox_id": str(sandbox.id),
                "fault": scenario.workspace.fault,
                "initial_context_files": len(prompt.files),
                "initial_context_tokens_ours": prompt.tokens,
            },
        )
        started = True
        stats.status = "running"
        orch = orchestrator_id(sid)
        rt = AgentRuntime(
            session_id=sid,
            settings=settings,
            client=client,
            recorder=recorder,
            toolbox=toolbox,
            deadline=Deadline(scenario.wall_budget_s, clock),
            clock=clock,
        )
        await recorder.agent_start(orch, contract.ORCHESTRATOR)
        state = OrchestratorState(
            messages=[
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": scenario.task},
            ],
            seq=0,
            depends_on=[],
            follow_ups_sent=0,
        )
        try:
            final = await orchestrator_graph().ainvoke(
                state, context=rt, config={"recursion_limit": 4 * settings.max_rounds + 20}
            )
            reason = str(final.get("end_reason") or "done")
        except SessionEnd as end:
            reason = end.reason
            stats.detail = end.detail
        finally:
            await recorder.agent_end(orch)
        if plan.evaluate:
            stats.status = "eval"
            eval_passed = await _evaluate(sandbox, scenario, recorder)
    except asyncio.CancelledError:
        reason = "interrupted"
        raise
    except Exception as exc:
        reason = "error"
        stats.detail = f"{type(exc).__name__}: {exc}"
        if started:
            await recorder.event("error", error=stats.detail)
        raise
    finally:
        stats.status = "closing"
        if sandbox is not None:
            await _close(sandbox)
        if started:
            await recorder.session_end(reason, eval_passed=eval_passed)
        else:
            stats.end_ns = clock()
            stats.end_reason = reason
        if not plan.keep_workspace:
            shutil.rmtree(ws_dir, ignore_errors=True)
        with contextlib.suppress(RuntimeError):
            await writer.flush()
        stats.status = "ended"
    return stats
