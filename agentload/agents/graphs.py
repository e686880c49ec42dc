"""The LangGraph graphs: the orchestrator and one sub-agent graph per kind, assembled in the open.

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

Sub-agent (one graph per kind)::

    START → agent ─route_subagent─┬→ tools → agent
                                  ├→ resume → agent  (cut at max_tokens, turns left)
                                  └→ finish → END

A sub-agent's reply cut at the length limit is resumed the same way while it has turns left
(at most ``MAX_CUT_REPLIES`` in a row); a summary still cut says so.

The session-scoped pieces (endpoint client, toolbox, recorder) come in as the run-time context
(``AgentRuntime``), so the graphs compile once per process.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send

from agentload import contract
from agentload.agents.limits import SessionEnd
from agentload.agents.runtime import AgentRuntime, AgentSettings, orchestrator_id, subagent_id
from agentload.agents.steps import (
    ToolOutcome,
    call_model,
    run_tools,
    tool_message,
    valid_delegation,
)
from agentload.agents.tracing import ToolFacts

__all__ = [
    "MAX_CUT_REPLIES",
    "RESUME_PROMPT",
    "OrchestratorState",
    "SubagentState",
    "build_orchestrator_graph",
    "build_subagent_graph",
    "orchestrator_graph",
    "route_orchestrator",
    "route_subagent",
    "subagent_graph",
]


MAX_CUT_REPLIES = 3
"""The most replies in a row an agent may have cut at ``max_tokens``; the orchestrator's next one
ends the session ``length`` (a sub-agent's, its run)."""
RESUME_PROMPT = (
    "Your last reply was cut off at the output limit of {max_tokens} tokens. Continue from "
    "where it stopped, more briefly, or call a tool."
)
"""The user message that asks an agent to go on after a reply cut at the length limit."""


def _append(old: list[Any], new: list[Any]) -> list[Any]:
    return [*old, *new] if new else old


def _merge_results(
    old: dict[int, ToolOutcome], new: dict[int, ToolOutcome] | None
) -> dict[int, ToolOutcome]:
    """Parallel branches add their outcomes; ``None`` clears them (after ``collect``)."""
    if new is None:
        return {}
    return {**old, **new}


class OrchestratorState(TypedDict, total=False):
    """The orchestrator's graph state."""

    messages: Annotated[list[dict[str, Any]], _append]
    tool_calls: list[dict[str, Any]]
    call_id: str
    seq: int
    depends_on: list[str]
    results: Annotated[dict[int, ToolOutcome], _merge_results]
    follow_ups_sent: int
    cuts: int


class SubagentState(TypedDict, total=False):
    """A sub-agent's graph state (also the payload its delegation node builds)."""

    agent_id: str
    role: str
    messages: Annotated[list[dict[str, Any]], _append]
    tool_calls: list[dict[str, Any]]
    call_id: str
    seq: int
    depends_on: list[str]
    summary: str
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
    turn = await call_model(
        rt,
        agent_id=orchestrator_id(rt.session_id),
        role=contract.ORCHESTRATOR,
        seq=seq,
        messages=state["messages"],
        tools=s.schemas(s.orchestrator_tools),
        depends_on=state.get("depends_on", []),
        max_tokens=s.max_tokens,
    )
    rt.last_orch_end_ns = rt.clock()
    # context_target is in server tokens: the server's count, else ours times the run's ratio.
    server = turn.result.prompt_tokens
    if (server if server is not None else turn.prompt_tokens * s.token_ratio) >= s.context_target:
        raise SessionEnd("context_target")
    cuts = _cuts(state.get("cuts", 0), turn.cut)
    if cuts >= MAX_CUT_REPLIES:
        raise SessionEnd(
            "length",
            f"{cuts} orchestrator replies in a row were cut at max_tokens {s.max_tokens} "
            "(finish_reason length)",
        )
    done = not turn.tool_calls and not cuts and not _follow_ups_left(state, s)
    if not done and seq + 1 >= s.max_rounds:
        raise SessionEnd("max_rounds")
    return {
        "messages": [turn.message],
        "tool_calls": turn.tool_calls,
        "call_id": turn.call_id,
        "seq": seq + 1,
        "cuts": cuts,
    }


def _cuts(before: int, cut: bool) -> int:
    """Replies cut at the length limit in a row, this one included."""
    return before + 1 if cut else 0


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
    await rt.recorder.event("follow_up", agent_id=orchestrator_id(rt.session_id), index=n)
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
    return await _resume(rt, agent_id, rt.settings.max_tokens, state.get("call_id"))


async def _resume(
    rt: AgentRuntime, agent_id: str, max_tokens: int | None, after: str | None
) -> dict[str, Any]:
    """``RESUME_PROMPT`` as the next user message (recorded as a ``continue`` event)."""
    await rt.recorder.event("continue", agent_id=agent_id, after=after)
    prompt = RESUME_PROMPT.format(max_tokens=max_tokens if max_tokens is not None else "?")
    return {"messages": [{"role": "user", "content": prompt}], "depends_on": []}


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


# -- sub-agents --------------------------------------------------------------------------------
async def subagent_agent(state: SubagentState, *, runtime: Runtime[AgentRuntime]) -> dict[str, Any]:
    rt = runtime.context
    sub = rt.settings.subagents[state["role"]]
    seq = state.get("seq", 0)
    turn = await call_model(
        rt,
        agent_id=state["agent_id"],
        role=state["role"],
        seq=seq,
        messages=state["messages"],
        tools=rt.settings.schemas(sub.tools),
        depends_on=state.get("depends_on", []),
        max_tokens=sub.max_tokens,
    )
    return {
        "messages": [turn.message],
        "tool_calls": turn.tool_calls,
        "call_id": turn.call_id,
        "seq": seq + 1,
        "cuts": _cuts(state.get("cuts", 0), turn.cut),
    }


def route_subagent(state: SubagentState, *, runtime: Runtime[AgentRuntime]) -> str:
    """While turns remain: ``tools`` when the reply calls tools, ``resume`` when it was cut at
    the length limit (fewer than ``MAX_CUT_REPLIES`` in a row); else ``finish``."""
    max_turns = runtime.context.settings.subagents[state["role"]].max_turns
    if state.get("seq", 0) < max_turns:
        if state.get("tool_calls"):
            return "tools"
        if 0 < state.get("cuts", 0) < MAX_CUT_REPLIES:
            return "resume"
    return "finish"


async def subagent_tools(state: SubagentState, *, runtime: Runtime[AgentRuntime]) -> dict[str, Any]:
    rt = runtime.context
    allowed = rt.settings.subagents[state["role"]].tools
    outcomes = await run_tools(
        rt,
        agent_id=state["agent_id"],
        call_id=state["call_id"],
        calls=list(enumerate(state.get("tool_calls", []))),
        allowed=allowed,
    )
    return {
        "messages": [tool_message(o.tool_call_id, o.text) for o in outcomes],
        "depends_on": [o.depends_id for o in outcomes],
    }


async def subagent_resume(
    state: SubagentState, *, runtime: Runtime[AgentRuntime]
) -> dict[str, Any]:
    """After a sub-agent's reply cut at the length limit: a user message asking to go on."""
    rt = runtime.context
    sub = rt.settings.subagents[state["role"]]
    return await _resume(rt, state["agent_id"], sub.max_tokens, state.get("call_id"))


def subagent_finish(state: SubagentState) -> dict[str, Any]:
    """The summary: the last reply's text (or a note when it stopped without one)."""
    last = state["messages"][-1] if state.get("messages") else {}
    text = str(last.get("content") or "").strip() if last.get("role") == "assistant" else ""
    if not text:
        text = f"({state['role']} stopped after {state.get('seq', 0)} calls without a summary)"
    elif state.get("cuts", 0):
        text += "\n[this summary was cut at the length limit]"
    return {"summary": text}


def build_subagent_graph(kind: str) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The graph of one sub-agent kind (see the module docstring)."""
    if kind not in contract.SUBAGENT_ROLES:
        raise ValueError(f"unknown sub-agent kind {kind!r}; valid: {contract.SUBAGENT_ROLES}")
    g = StateGraph(SubagentState, context_schema=AgentRuntime)
    g.add_node("agent", subagent_agent)
    g.add_node("tools", subagent_tools)
    g.add_node("resume", subagent_resume)
    g.add_node("finish", subagent_finish)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", route_subagent, path_map=["tools", "resume", "finish"])
    g.add_edge("tools", "agent")
    g.add_edge("resume", "agent")
    g.add_edge("finish", END)
    return g.compile(name=kind)


@functools.cache
def orchestrator_graph() -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled orchestrator graph, built once per process."""
    return build_orchestrator_graph()


@functools.cache
def subagent_graph(kind: str) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled graph of one sub-agent kind, built once per process."""
    return build_subagent_graph(kind)
