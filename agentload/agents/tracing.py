"""Recording glue: what one session's agents write to the trace, and its live counters.

One ``SessionRecorder`` per session, sharing the run's ``TraceWriter`` and ``CallCapture``
(so blobs common to several sessions, like the orchestrator's system prompt, are written
once). Records:

* ``session`` at start, and again at the end with ``end_ns``, ``end_reason``, ``eval_passed``
* ``agent`` at start and again at the end (``end_ns``)
* ``llm_call`` through ``CallCapture.record`` (blobs once, our token counts, prefix blocks)
* ``tool_call`` per tool execution (``child_agent_id`` for ``delegate``)
* ``event`` for retries, errors, follow-ups ... (a typed payload of ``trace.events`` each)

``SessionStats`` holds the counters the progress display and the summary table read, and the
session's ``SessionStatus``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from agentload.agents.llm import LLMResult
from agentload.intervals import union_ns
from agentload.protocols import TraceSink
from agentload.trace.capture import CallCapture, ObservedCall
from agentload.trace.events import EventPayload
from agentload.trace.schema import (
    AgentRecord,
    EventRecord,
    LLMCallRecord,
    SessionRecord,
    ToolCallRecord,
    TurnKind,
)
from agentload.trace.trace import completion_of, prompt_of

__all__ = ["Follows", "LiveCall", "SessionRecorder", "SessionStats", "SessionStatus", "ToolFacts"]


@dataclass
class ToolFacts:
    """What the recorder keeps of one tool execution (from a ``ToolResult`` or a delegation);
    ``raw_arguments``: the model's own arguments text, when it differs from what the history
    carries (a malformed call, not run)."""

    start_ns: int
    end_ns: int
    exit_code: int | None = None
    timed_out: bool = False
    output_bytes: int = 0
    output_tokens: int | None = None
    truncated: bool = False
    sandbox_id: str | None = None
    error: str | None = None
    raw_arguments: str | None = None


@dataclass
class LiveCall:
    """A model call in flight: when it was sent and the reply chunks streamed in so far."""

    start_ns: int
    chunks: int = 0

    def streamed(self, chunks: int) -> None:
        """The client's ``on_chunk`` hook: the attempt's chunk count so far."""
        self.chunks = chunks


class SessionStatus(StrEnum):
    """Where a session is in its life (the progress display shows the value)."""

    STARTING = "starting"
    WORKSPACE = "workspace"
    """Its workspace is being copied."""
    SANDBOX = "sandbox"
    """Its sandbox is being started."""
    CONTEXT = "context"
    """Its first prompt is being built."""
    RUNNING = "running"
    EVAL = "eval"
    """Its success check is running."""
    CLOSING = "closing"
    ENDED = "ended"


@dataclass
class SessionStats:
    """Live counters of one session (read by the progress display and the summary)."""

    session_id: str
    start_ns: int
    end_ns: int | None = None
    status: SessionStatus = SessionStatus.STARTING
    end_reason: str | None = None
    agents: int = 0
    agents_by_role: dict[str, int] = field(default_factory=dict)
    calls: int = 0
    orchestrator_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    orch_first_prompt: int | None = None
    orch_last_prompt: int | None = None
    tool_calls: int = 0
    tool_ns: int = 0
    tool_intervals: list[tuple[int, int]] = field(default_factory=list)
    orch_wait_ns: int = 0
    eval_passed: bool | None = None
    eval_detail: dict[str, Any] | None = None
    """The success check's verdict and, for an eval task, its suite's result."""
    task: str | None = None
    """The eval task of the session (``evals.tasks``), if any, and its attempt number."""
    attempt: int = 0
    detail: str = ""
    live: dict[str, LiveCall] = field(default_factory=dict)
    """Model calls in flight, by call id (the progress display shows their streamed chunks)."""

    @property
    def wall_ns(self) -> int:
        return (self.end_ns or time.perf_counter_ns()) - self.start_ns

    @property
    def tool_busy_ns(self) -> int:
        """Time when at least one tool ran (interval union; sub-agent runs excluded)."""
        return union_ns(self.tool_intervals)

    @property
    def tool_time_share(self) -> float | None:
        """``tool_busy_ns / wall_ns`` (the same formula as ``trace stats``)."""
        wall = self.wall_ns
        return self.tool_busy_ns / wall if wall > 0 else None


@dataclass(frozen=True)
class Follows:
    """What a model call follows: the tool calls and sub-agents whose results its prompt
    appends (``depends_on``), what kind of turn that is, and its modeled wait
    (``agentload.fitted``), if any."""

    depends_on: list[str]
    turn: TurnKind | None = None
    wait_ns: int | None = None


class SessionRecorder:
    """Writes one session's records (see the module docstring)."""

    def __init__(
        self,
        writer: TraceSink,
        capture: CallCapture,
        session_id: str,
        *,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.writer = writer
        self.capture = capture
        self.session_id = session_id
        self.clock = clock
        self.stats = SessionStats(session_id=session_id, start_ns=clock())
        self._session: SessionRecord | None = None
        self._agents: dict[str, AgentRecord] = {}

    async def session_start(
        self, *, workspace: str | None, sandbox: str | None, meta: dict[str, Any]
    ) -> None:
        self._session = SessionRecord(
            id=self.session_id,
            start_ns=self.stats.start_ns,
            workspace=workspace,
            sandbox=sandbox,
            meta=meta,
        )
        await self.writer.write(self._session)

    async def session_end(self, reason: str, *, eval_passed: bool | None = None) -> None:
        assert self._session is not None, "session_start was not called"
        end = self.clock()
        self.stats.end_ns = end
        self.stats.end_reason = reason
        self.stats.eval_passed = eval_passed
        rec = self._session.model_copy(
            update={"end_ns": end, "end_reason": reason, "eval_passed": eval_passed}
        )
        await self.writer.write(rec)

    async def agent_start(
        self,
        agent_id: str,
        role: str,
        *,
        parent_agent_id: str | None = None,
        parent_tool_call_id: str | None = None,
    ) -> None:
        rec = AgentRecord(
            id=agent_id,
            session_id=self.session_id,
            parent_agent_id=parent_agent_id,
            parent_tool_call_id=parent_tool_call_id,
            role=role,
            context_policy="fresh",
            start_ns=self.clock(),
        )
        self._agents[agent_id] = rec
        self.stats.agents += 1
        self.stats.agents_by_role[role] = self.stats.agents_by_role.get(role, 0) + 1
        await self.writer.write(rec)

    async def agent_end(self, agent_id: str) -> None:
        rec = self._agents.get(agent_id)
        if rec is None or rec.end_ns is not None:
            return
        rec.end_ns = self.clock()
        await self.writer.write(rec)

    async def llm_call(
        self,
        *,
        call_id: str,
        agent_id: str,
        role: str,
        seq: int,
        body: dict[str, Any],
        result: LLMResult,
        tool_calls: list[dict[str, Any]],
        follows: Follows,
    ) -> LLMCallRecord:
        """Record a model call; ``tool_calls`` as the history carries them (agents' ids)."""
        rec = await self.capture.record(
            ObservedCall(
                call_id=call_id,
                session_id=self.session_id,
                agent_id=agent_id,
                seq=seq,
                body={**body, "stream": True},
                content=result.content,
                tool_calls=tool_calls,
                finish_reason=result.finish_reason,
                usage=result.usage,
                timings=result.timings,
                depends_on=follows.depends_on,
                turn=follows.turn,
                wait_ns=follows.wait_ns,
            )
        )
        s = self.stats
        s.calls += 1
        prompt = prompt_of(rec.usage)
        s.prompt_tokens += prompt
        s.completion_tokens += completion_of(rec.usage) or 0
        if role == "orchestrator":
            s.orchestrator_calls += 1
            if s.orch_first_prompt is None:
                s.orch_first_prompt = prompt
            s.orch_last_prompt = prompt
        return rec

    async def tool_call(
        self,
        *,
        record_id: str,
        agent_id: str,
        llm_call_id: str,
        name: str,
        arguments: Any,
        facts: ToolFacts,
        child_agent_id: str | None = None,
        model_call_id: str | None = None,
    ) -> None:
        """Record a tool execution (``child_agent_id``: the sub-agent a ``delegate`` started)."""
        rec = ToolCallRecord(
            id=record_id,
            session_id=self.session_id,
            agent_id=agent_id,
            llm_call_id=llm_call_id,
            name=name,
            arguments=arguments,
            start_ns=facts.start_ns,
            end_ns=facts.end_ns,
            exit_code=facts.exit_code,
            timed_out=facts.timed_out,
            output_bytes=facts.output_bytes,
            output_tokens=facts.output_tokens,
            truncated=facts.truncated,
            sandbox_id=facts.sandbox_id,
            error=facts.error,
            child_agent_id=child_agent_id,
            model_call_id=model_call_id if model_call_id != record_id else None,
            raw_arguments=facts.raw_arguments,
        )
        if child_agent_id is None:
            self.stats.tool_calls += 1
            self.stats.tool_ns += facts.end_ns - facts.start_ns
            self.stats.tool_intervals.append((facts.start_ns, max(facts.start_ns, facts.end_ns)))
        await self.writer.write(rec)

    async def event(self, payload: EventPayload, *, agent_id: str | None = None) -> None:
        """Record an event of the session (``agent_id``: the agent it concerns, if one)."""
        await self.writer.write(
            EventRecord.of(payload, self.clock(), session_id=self.session_id, agent_id=agent_id)
        )
