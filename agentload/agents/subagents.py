"""The sub-agents' LangGraph graph (one per kind), and what the orchestrator's graph shares with it.

Sub-agent (one graph per kind)::

    START → agent ─route_subagent─┬→ tools → agent
                                  ├→ resume → agent  (cut at max_tokens, turns left)
                                  └→ finish → END

A sub-agent's reply cut at the length limit is resumed the same way as the orchestrator's
(``agents.graphs``) while it has turns left (at most ``MAX_CUT_REPLIES`` in a row); a summary
still cut says so. Shared by both graphs: the message-list reducer, counting cut replies in a
row, and ``RESUME_PROMPT``, the user message that asks an agent to go on.

The session-scoped pieces come in as the run-time context (``AgentRuntime``), so the graphs
compile once per process.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from agentload import contract
from agentload.agents.runtime import AgentRuntime
from agentload.agents.steps import call_model, run_tools, tool_message
from agentload.trace.events import Continue

__all__ = [
    "MAX_CUT_REPLIES",
    "RESUME_PROMPT",
    "SubagentState",
    "append_list",
    "ask_to_continue",
    "build_subagent_graph",
    "cuts_in_a_row",
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


def append_list(old: list[Any], new: list[Any]) -> list[Any]:
    """The message-list reducer: a node's new items go after the old ones."""
    return [*old, *new] if new else old


def cuts_in_a_row(before: int, cut: bool) -> int:
    """Replies cut at the length limit in a row, this one included."""
    return before + 1 if cut else 0


async def ask_to_continue(
    rt: AgentRuntime, agent_id: str, max_tokens: int | None, after: str | None
) -> dict[str, Any]:
    """``RESUME_PROMPT`` as the next user message (recorded as a ``continue`` event)."""
    await rt.recorder.event(Continue(after=after), agent_id=agent_id)
    prompt = RESUME_PROMPT.format(max_tokens=max_tokens if max_tokens is not None else "?")
    return {"messages": [{"role": "user", "content": prompt}], "depends_on": []}


class SubagentState(TypedDict, total=False):
    """A sub-agent's graph state (also the payload its delegation node builds)."""

    agent_id: str
    role: str
    messages: Annotated[list[dict[str, Any]], append_list]
    tool_calls: list[dict[str, Any]]
    call_id: str
    seq: int
    depends_on: list[str]
    summary: str
    cuts: int


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
        "cuts": cuts_in_a_row(state.get("cuts", 0), turn.cut),
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
    return await ask_to_continue(rt, state["agent_id"], sub.max_tokens, state.get("call_id"))


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
def subagent_graph(kind: str) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled graph of one sub-agent kind, built once per process."""
    return build_subagent_graph(kind)
