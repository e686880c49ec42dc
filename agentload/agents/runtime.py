"""What the graphs' nodes need at run time: settings, the endpoint client, tools, the recorder.

The graphs are compiled once per process; each session invokes them with its own
``AgentRuntime`` as LangGraph's run-time ``context``. Ids are derived from positions only (the
session id, an agent's call sequence number, a tool call's index in its message), so the same
seed gives the same ids in every run:

* orchestrator ``{session}.orch``; its calls ``{agent}.{seq}``
* a sub-agent ``{delegating call}.{kind}{index}``, e.g. ``s0-0.orch.12.code_search1``
* a tool call: ``call_`` + 24 hex digits hashed from its model call's id and its index
  (``tool_call_id``). The agents give every tool call this id in the history they send on, so a
  seed reproduces the traffic byte for byte whatever ids the server invents; the server's own
  id is kept on the ``tool_call`` record as ``model_call_id``.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentload import contract
from agentload.agents.limits import Deadline
from agentload.agents.llm import ChatClient
from agentload.agents.tracing import SessionRecorder
from agentload.fitted import SessionWaits

__all__ = [
    "AgentRuntime",
    "AgentSettings",
    "SubagentSettings",
    "ToolOutput",
    "ToolRunner",
    "agent_call_id",
    "orchestrator_id",
    "subagent_id",
    "tool_call_id",
]


class ToolOutput(Protocol):
    """What ``Toolbox.call`` returns (``agentload.tools.ToolResult`` satisfies it)."""

    text: str
    start_ns: int
    end_ns: int
    exit_code: int | None
    output_bytes: int
    truncated: bool
    timed_out: bool
    error: str | None
    sandbox_id: str | None


class ToolRunner(Protocol):
    """Runs one tool by name (``agentload.tools.Toolbox`` satisfies it); never raises for tool
    errors: they come back as text for the model."""

    over_limit: str | None
    """Set once a command was killed past the sandbox's disk quota: why (the session ends)."""

    async def call(self, name: str, arguments: str | dict[str, Any]) -> Any: ...


@dataclass(frozen=True)
class SubagentSettings:
    """One sub-agent kind: its system prompt, tools, turn limit and reply length limit."""

    system_prompt: str
    tools: tuple[str, ...]
    max_turns: int
    max_tokens: int | None = None


@dataclass(frozen=True)
class AgentSettings:
    """Scenario-derived settings of one session's agents."""

    model: str
    orchestrator_tools: tuple[str, ...]
    max_rounds: int
    context_target: int
    max_parallel_delegations: int
    subagents: dict[str, SubagentSettings]
    max_tokens: int | None = None
    """The orchestrator's ``max_tokens`` (sent on each of its calls)."""
    temperature: float | None = None
    seed: int | None = None
    follow_ups: tuple[str, ...] = ()
    token_ratio: float = 1.0
    """Server tokens per token of ours (``generate.calibrate``): for replies without usage."""
    tool_descriptions: Mapping[str, str] = field(default_factory=dict)
    """The scenario's ``tool_descriptions`` (full manuals by tool name)."""
    context_refresh_per_call: float = 0.0
    """Odds that the system message is refreshed before an orchestrator call (a prefix break:
    ``Scenario.pacing``)."""

    def schemas(self, names: tuple[str, ...]) -> list[dict[str, Any]]:
        """The ``tools`` list the agents send for ``names``, with the scenario's descriptions."""
        return contract.tool_schemas(names, self.tool_descriptions)


@dataclass
class AgentRuntime:
    """Run-time context of one session's graphs."""

    session_id: str
    settings: AgentSettings
    client: ChatClient
    recorder: SessionRecorder
    toolbox: ToolRunner
    deadline: Deadline
    clock: Callable[[], int] = time.perf_counter_ns
    delegations: asyncio.Semaphore = field(init=False)
    last_orch_end_ns: int | None = None
    waits: SessionWaits | None = None
    """The session's modeled waits (``agentload.fitted``), drawn before each call."""
    pace_real: bool = False
    """Sleep through each modeled wait (``generate --pace real``) instead of recording it only."""
    last_end_ns: dict[str, int] = field(default_factory=dict)
    """Per agent, when its last call ended (the measured part of the next gap)."""
    refreshes: int = 0
    """How many times the orchestrator's system message was refreshed (``graphs``)."""

    def __post_init__(self) -> None:
        self.delegations = asyncio.Semaphore(max(1, self.settings.max_parallel_delegations))


def orchestrator_id(session_id: str) -> str:
    return f"{session_id}.orch"


def agent_call_id(agent_id: str, seq: int) -> str:
    return f"{agent_id}.{seq}"


def tool_call_id(call_id: str, index: int) -> str:
    """The id the agents give tool call ``index`` of model call ``call_id`` (see above)."""
    return "call_" + hashlib.blake2b(f"{call_id}#{index}".encode(), digest_size=12).hexdigest()


def subagent_id(parent_call_id: str, kind: str, index: int) -> str:
    return f"{parent_call_id}.{kind}{index}"
