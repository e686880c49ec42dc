"""The orchestrator's LangGraph graph, assembled in the open (sub-agents: ``agents.subagents``).

Orchestrator::

    START → agent ─route_orchestrator─┬→ tools ─────────┐
                 │                    ├→ code_search ───┤   (Send: one task per delegate call,
                 │                    ├→ test_runner ───┼→ collect → agent   run concurrently)
                 │                    ├→ file_reader ───┘
                 │                    ├→ follow_up → agent  (answered early: the user's next request)
                 │                    ├→ resume → agent  (the reply was cut at max_tokens)
                 └────────────────────┴→ END  (done; limits raise SessionEnd)

* ``agent``: one model call with the whole history. A limit it reaches (``context_target``,
  ``max_rounds``) raises ``SessionEnd``, like every other end but one: the graph reaching END,
  which means the task is done (an answer without tool calls and no follow-up left).
* ``follow_up``: the model answered (no tool calls) before the context target and the
  scenario has follow-ups left: the next one becomes a new user message, as a person keeps a
  coding-agent session going. Without any left, the answer ends the session (``done``).
* ``resume``: the reply was cut at the length limit (``finish_reason: length``) without tool
  calls: a cut reply is not an answer, so the harness asks the model to continue, as a person
  would. A reply cut inside a tool call is handled by ``tools`` (the call is malformed: a tool
  error says so). After ``MAX_CUT_REPLIES`` cut replies in a row the session ends ``length``.
* ``tools``: the reply's direct tool calls through the toolbox (concurrently unless one edits).
* ``code_search`` / ``test_runner`` / ``file_reader``: one ``delegate`` call each: a sub-agent
  with a fresh context runs to its summary (at most ``max_parallel_delegations`` at a time).
* ``collect``: appends the tool messages **in tool-call order** (never completion order, so
  parallel sub-agents cannot make the content order-dependent) and notes ``depends_on``.

Each delegation node runs one sub-agent graph (``agents.subagents``, one per kind) to its
summary.

The session-scoped pieces (endpoint client, toolbox, recorder) come in as the run-time context
(``AgentRuntime``), so the graphs compile once per process.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from agentload import contract
from agentload.agents.limits import EndReason, SessionEnd
from agentload.agents.runtime import (
    AgentRuntime,
    AgentSettings,
    agent_call_id,
    orchestrator_id,
    subagent_id,
)
from agentload.agents.steps import (
    ToolOutcome,
    call_model,
    run_tools,
    tool_message,
    valid_delegation,
)
from agentload.agents.subagents import (
    MAX_CUT_REPLIES,
    SubagentState,
    append_list,
    ask_to_continue,
    cuts_in_a_row,
    subagent_graph,
)
from agentload.agents.tracing import ToolFacts
from agentload.trace.events import ContextRefresh, FollowUp

__all__ = [
    "OrchestratorState",
    "build_orchestrator_graph",
    "orchestrator_graph",
    "route_orchestrator",
]


def _merge_results(
    old: dict[int, ToolOutcome], new: dict[int, ToolOutcome] | None
) -> dict[int, ToolOutcome]:
    """Parallel branches add their outcomes; ``None`` clears them (after ``collect``)."""
    if new is None:
        return {}
    return {**old, **new}


class OrchestratorState(TypedDict, total=False):
    """The orchestrator's graph state."""

    messages: Annotated[list[dict[str, Any]], append_list]
    tool_calls: list[dict[str, Any]]
    call_id: str
    seq: int
    depends_on: list[str]
    results: Annotated[dict[int, ToolOutcome], _merge_results]
    follow_ups_sent: int
    cuts: int


class ToolsTask(TypedDict):
    """Payload of the orchestrator's ``tools`` node: the direct calls with their indexes."""

    call_id: str
    calls: list[tuple[int, dict[str, Any]]]


class DelegateTask(TypedDict):
    """Payload of a delegation node: one ``delegate`` call."""

    call_id: str
    index: int
    tool_call: dict[str, Any]
    kind: str
    task: str


# -- orchestrator ------------------------------------------------------------------------------
async def orchestrator_agent(
    state: OrchestratorState, runtime: Runtime[AgentRuntime]
) -> dict[str, Any]:
    rt = runtime.context
    s = rt.settings
    seq = state.get("seq", 0)
    now = rt.clock()
    if rt.last_orch_end_ns is not None:
        rt.recorder.stats.orch_wait_ns += now - rt.last_orch_end_ns
    agent_id = orchestrator_id(rt.session_id)
    await maybe_refresh(rt, agent_call_id(agent_id, seq), agent_id)
    turn = await call_model(
        rt,
        agent_id=agent_id,
        role=contract.ORCHESTRATOR,
        seq=seq,
        messages=refreshed(state["messages"], rt.refreshes),
        tools=s.schemas(s.orchestrator_tools),
        depends_on=state.get("depends_on", []),
        max_tokens=s.max_tokens,
    )
    rt.last_orch_end_ns = rt.clock()
    # context_target is in server tokens: the server's count, else ours times the run's ratio.
    server = turn.result.prompt_tokens
    if (server if server is not None else turn.prompt_tokens * s.token_ratio) >= s.context_target:
        raise SessionEnd(EndReason.CONTEXT_TARGET)
    cuts = cuts_in_a_row(state.get("cuts", 0), turn.cut)
    if cuts >= MAX_CUT_REPLIES:
        raise SessionEnd(
            EndReason.LENGTH,
            f"{cuts} orchestrator replies in a row were cut at max_tokens {s.max_tokens} "
            "(finish_reason length)",
        )
    done = not turn.tool_calls and not cuts and not _follow_ups_left(state, s)
    if not done and seq + 1 >= s.max_rounds:
        raise SessionEnd(EndReason.MAX_ROUNDS)
    return {
        "messages": [turn.message],
        "tool_calls": turn.tool_calls,
        "call_id": turn.call_id,
        "seq": seq + 1,
        "cuts": cuts,
    }


REFRESH_NOTE = (
    "\n\n# Session state (refreshed {count} times)\n"
    "The workspace may have changed since the session started: read a file again before you "
    "edit it, and run the tests again before you rely on an earlier result."
)
"""What a refresh of the orchestrator's system message appends to it (``maybe_refresh``)."""


async def maybe_refresh(rt: AgentRuntime, call_id: str, agent_id: str) -> None:
    """Before call ``call_id`` (not the first), with the odds ``context_refresh_per_call``
    (drawn from the seed, the session's and the call's id): refresh the orchestrator's system
    message, so this call's prompt and every later one differ from that point on, as a real
    agent's does when its system prompt, tools or memory change mid-session (the corpus's
    prefix breaks: ``realism.fit``). Recorded as a ``context_refresh`` event."""
    odds = rt.settings.context_refresh_per_call
    if odds <= 0 or call_id.endswith(".0"):
        return
    digest = hashlib.blake2b(f"{rt.settings.seed}|{call_id}|refresh".encode(), digest_size=8)
    if int.from_bytes(digest.digest(), "big") / 2**64 >= odds:
        return
    rt.refreshes += 1
    await rt.recorder.event(ContextRefresh(call_id=call_id, count=rt.refreshes), agent_id=agent_id)


def refreshed(messages: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    """``messages`` with the system message refreshed ``count`` times (``REFRESH_NOTE``)."""
    if not count or not messages or messages[0].get("role") != "system":
        return messages
    first = messages[0]
    note = REFRESH_NOTE.format(count=count)
    return [{**first, "content": f"{first.get('content') or ''}{note}"}, *messages[1:]]


def _follow_ups_left(state: OrchestratorState, settings: AgentSettings) -> bool:
    """The scenario has a follow-up the user has not sent yet."""
    return state.get("follow_ups_sent", 0) < len(settings.follow_ups)


def route_orchestrator(
    state: OrchestratorState, *, runtime: Runtime[AgentRuntime]
) -> list[Send] | str:
    """After a reply without tool calls: ``resume`` when it was cut at the length limit, else
    ``follow_up`` while the scenario has follow-ups left, else END (the task is done);
    otherwise one ``Send`` per delegation and one for direct tools."""
    if not state.get("tool_calls"):
        if state.get("cuts", 0):
            return "resume"
        return "follow_up" if _follow_ups_left(state, runtime.context.settings) else END
    call_id = state["call_id"]
    sends: list[Send] = []
    direct: list[tuple[int, dict[str, Any]]] = []
    for i, tc in enumerate(state.get("tool_calls", [])):
        d = valid_delegation(tc, contract.SUBAGENT_ROLES)
        if d is None:
            direct.append((i, tc))
        else:
            kind, task = d
            sends.append(
                Send(
                    kind,
                    DelegateTask(call_id=call_id, index=i, tool_call=tc, kind=kind, task=task),
                )
            )
    if direct:
        sends.insert(0, Send("tools", ToolsTask(call_id=call_id, calls=direct)))
    return sends


async def orchestrator_tools(state: ToolsTask, *, runtime: Runtime[AgentRuntime]) -> dict[str, Any]:
    rt = runtime.context
    agent_id = orchestrator_id(rt.session_id)
    allowed = tuple(t for t in rt.settings.orchestrator_tools if t != contract.DELEGATE)
    outcomes = await run_tools(
        rt, agent_id=agent_id, call_id=state["call_id"], calls=state["calls"], allowed=allowed
    )
    return {"results": {o.index: o for o in outcomes}}


async def delegate(state: DelegateTask, *, runtime: Runtime[AgentRuntime]) -> dict[str, Any]:
    """Run one sub-agent to its summary; the summary is the ``delegate`` tool result."""
    rt = runtime.context
    kind = state["kind"]
    sub = rt.settings.subagents.get(kind)
    parent = orchestrator_id(rt.session_id)
    rid = str(state["tool_call"]["id"])
    model_id = str(state["tool_call"].get("model_id", ""))
    child = subagent_id(state["call_id"], kind, state["index"])
    async with rt.delegations:
        start = rt.clock()
        if sub is None:
            summary, error = f"error: sub-agent kind {kind!r} is not configured", "not configured"
        else:
            await rt.recorder.agent_start(
                child, kind, parent_agent_id=parent, parent_tool_call_id=rid
            )
            try:
                final = await subagent_graph(kind).ainvoke(
                    SubagentState(
                        agent_id=child,
                        role=kind,
                        messages=[
                            {"role": "system", "content": sub.system_prompt},
                            {"role": "user", "content": state["task"]},
                        ],
                        seq=0,
                        depends_on=[],
                    ),
                    context=rt,
                    config={"recursion_limit": 4 * sub.max_turns + 10},
                )
            finally:
                await rt.recorder.agent_end(child)
            summary, error = str(final.get("summary", "")), None
        end = rt.clock()
    args = {"kind": kind, "task": state["task"]}
    await rt.recorder.tool_call(
        record_id=rid,
        agent_id=parent,
        llm_call_id=state["call_id"],
        name=contract.DELEGATE,
        arguments=args,
        facts=ToolFacts(
            start_ns=start,
            end_ns=end,
            output_bytes=len(summary.encode()),
            error=error,
        ),
        child_agent_id=child if sub is not None else None,
        model_call_id=model_id or None,
    )
    depends = child if sub is not None else rid
    return {
        "results": {
            state["index"]: ToolOutcome(
                index=state["index"], tool_call_id=rid, text=summary, depends_id=depends
            )
        }
    }


async def follow_up(state: OrchestratorState, *, runtime: Runtime[AgentRuntime]) -> dict[str, Any]:
    """The scenario's next follow-up as a user message (recorded as a ``follow_up`` event)."""
    rt = runtime.context
    n = state.get("follow_ups_sent", 0)
    await rt.recorder.event(FollowUp(index=n), agent_id=orchestrator_id(rt.session_id))
    return {
        "messages": [{"role": "user", "content": rt.settings.follow_ups[n]}],
        "follow_ups_sent": n + 1,
        "depends_on": [],
    }


async def orchestrator_resume(
    state: OrchestratorState, *, runtime: Runtime[AgentRuntime]
) -> dict[str, Any]:
    """After a reply cut at the length limit: a user message asking to go on."""
    rt = runtime.context
    agent_id = orchestrator_id(rt.session_id)
    return await ask_to_continue(rt, agent_id, rt.settings.max_tokens, state.get("call_id"))


def collect(state: OrchestratorState) -> dict[str, Any]:
    """Append the tool results in tool-call order; the next call depends on them."""
    results = state.get("results", {})
    msgs, deps = [], []
    for i, tc in enumerate(state.get("tool_calls", [])):
        o = results.get(i)
        if o is None:  # cannot happen unless a branch vanished; keep the history well-formed
            o = ToolOutcome(i, str(tc.get("id", "")), "error: no result", "")
        msgs.append(tool_message(o.tool_call_id, o.text))
        if o.depends_id:
            deps.append(o.depends_id)
    return {"messages": msgs, "depends_on": deps, "results": None}


def build_orchestrator_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The orchestrator graph (see the module docstring)."""
    g = StateGraph(OrchestratorState, context_schema=AgentRuntime)
    g.add_node("agent", orchestrator_agent)
    g.add_node("tools", orchestrator_tools, input_schema=ToolsTask)
    for kind in contract.SUBAGENT_ROLES:
        g.add_node(kind, delegate, input_schema=DelegateTask)
    g.add_node("collect", collect)
    g.add_node("follow_up", follow_up)
    g.add_node("resume", orchestrator_resume)
    g.add_edge(START, "agent")
    g.add_conditional_edges(
        "agent",
        route_orchestrator,
        path_map=["tools", *contract.SUBAGENT_ROLES, "follow_up", "resume", END],
    )
    for name in ("tools", *contract.SUBAGENT_ROLES):
        g.add_edge(name, "collect")
    g.add_edge("collect", "agent")
    g.add_edge("follow_up", "agent")
    g.add_edge("resume", "agent")
    return g.compile(name="orchestrator")


@functools.cache
def orchestrator_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled orchestrator graph, built once per process."""
    return build_orchestrator_graph()
