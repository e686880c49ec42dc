"""A trace's timeline with or without its modeled waits, and what each call's prompt appends.

A generated trace records what was measured (``submit_ns``, tool times ...) and, per call, a
modeled wait (``llm_call.wait_ns``, drawn from ``header.waits``) that the agents did not sleep
through unless the run said so (``header.waits.slept``: ``generate --pace real``). Whoever reads
times from a trace (replay's gaps, the realism statistics, the exports) reads them on one of two
timelines (``GapMode``):

* ``modeled`` (the default everywhere): measured + modeled, the gaps of a real session;
* ``measured``: what the run measured, the modeled waits left out.

``with_gaps(trace, mode)`` returns the trace on that timeline: each call moved later by the
waits on its causal chain, ``shift(call) = max(shift(previous call of its agent) | shift(the
delegating call, for an agent's first call), shift(last call of each child agent it waited for))
+ its own wait`` (minus, for ``measured`` on a slept trace), its tool calls with it, each
agent's start with its first call's predecessors and its end with its last call, each session's
end with its latest call. Measured durations (an answer's stream, a tool's run) are unchanged.
A trace without modeled waits is returned as it is.

``turn_of(trace, call)``: ``llm_call.turn`` when recorded; else an agent's first call is a user
turn (a root agent) or a brief (a sub-agent); a later call with tool results among the messages
after its last assistant message appends tool results, one with a user message only is a user
turn; a content-free call without ``turn`` appends tool results when it names dependencies, else
it is not known (None).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from enum import StrEnum
from typing import Any

from agentload.trace.samples import call_end_ns
from agentload.trace.schema import LLMCallRecord, Timings, TurnKind
from agentload.trace.trace import Trace

__all__ = [
    "GapMode",
    "appended_turn",
    "call_shifts",
    "delegating_call",
    "dependencies",
    "describe_waits",
    "has_waits",
    "turn_of",
    "with_gaps",
]


class GapMode(StrEnum):
    """Which timeline a reader of a trace's times uses (module docstring)."""

    MODELED = "modeled"
    MEASURED = "measured"


def _sign(trace: Trace, mode: GapMode) -> int:
    """+1: add the waits; -1: take them out; 0: the recorded times are the timeline."""
    info = trace.header.waits
    if info is None:
        return 0
    if mode is GapMode.MODELED and not info.slept:
        return 1
    if mode is GapMode.MEASURED and info.slept:
        return -1
    return 0


def has_waits(trace: Trace) -> bool:
    """Whether any call of the trace carries a modeled wait."""
    return trace.header.waits is not None and any(c.wait_ns for c in trace.calls.values())


def delegating_call(
    trace: Trace,
    agent_id: str,
    calls_of: Callable[[str], Sequence[LLMCallRecord]] | None = None,
) -> LLMCallRecord | None:
    """The parent's call that started agent ``agent_id``: its delegate tool call's emitting
    call (by the agent's ``parent_tool_call_id``, else by the tool call naming it as its
    child), else the parent's last call that ended before the agent's first; ``calls_of``: an
    agent's calls in order (default: all of them, ``Trace.calls_of``)."""
    agent = trace.agents.get(agent_id)
    tc = None
    if agent is not None and agent.parent_tool_call_id:
        tc = trace.tool_call(agent.session_id, agent.parent_tool_call_id)
    if tc is None:
        tc = next((t for t in trace.tool_calls.values() if t.child_agent_id == agent_id), None)
    if tc is not None and tc.llm_call_id in trace.calls:
        return trace.calls[tc.llm_call_id]
    if agent is None or agent.parent_agent_id is None:
        return None
    calls = calls_of or trace.calls_of
    mine = calls(agent_id)
    if not mine:
        return None
    first = mine[0].timings.submit_ns
    before = [c for c in calls(agent.parent_agent_id) if call_end_ns(c) <= first]
    return before[-1] if before else None


def dependencies(trace: Trace, session_id: str, deps: Sequence[str]) -> tuple[set[str], list[int]]:
    """What ``depends_on`` names: the child agents a call waited for (named, or by their
    delegate tool call), and the end ns of its other tool calls."""
    children: set[str] = set()
    tool_ends: list[int] = []
    for d in deps:
        if d in trace.agents:
            children.add(d)
            continue
        tc = trace.tool_call(session_id, d)
        if tc is None:
            continue
        if tc.child_agent_id:
            children.add(tc.child_agent_id)
        else:
            tool_ends.append(tc.end_ns)
    return children, tool_ends


def call_shifts(
    trace: Trace, mode: GapMode = GapMode.MODELED
) -> tuple[dict[str, int], dict[str, int]]:
    """Per llm_call id: (its shift on ``mode``'s timeline, the shift of its predecessors
    before its own wait), both ns; empty when the recorded times are the timeline."""
    sign = _sign(trace, mode)
    if sign == 0 or not has_waits(trace):
        return {}, {}
    shift: dict[str, int] = {}
    base: dict[str, int] = {}
    prev_of: dict[str, str] = {}
    last_of: dict[str, str] = {}
    for aid in {c.agent_id for c in trace.calls.values()}:
        calls = trace.calls_of(aid)
        for p, c in itertools.pairwise(calls):
            prev_of[c.id] = p.id
        last_of[aid] = calls[-1].id
    order = sorted(trace.calls.values(), key=lambda c: (c.timings.submit_ns, c.seq))
    for c in order:
        pred = prev_of.get(c.id)
        if pred is None:
            parent = delegating_call(trace, c.agent_id)
            pred = parent.id if parent is not None else None
        b = shift.get(pred, 0) if pred is not None else 0
        for child in dependencies(trace, c.session_id, c.depends_on)[0]:
            last = last_of.get(child)
            if last is not None and last in shift:
                b = max(b, shift[last])
        base[c.id] = b
        shift[c.id] = b + sign * (c.wait_ns or 0)
    return shift, base


def _moved(t: Timings, d: int) -> Timings:
    return t.model_copy(
        update={
            "submit_ns": t.submit_ns + d,
            "first_token_ns": None if t.first_token_ns is None else t.first_token_ns + d,
            "last_token_ns": None if t.last_token_ns is None else t.last_token_ns + d,
        }
    )


def with_gaps(trace: Trace, mode: GapMode = GapMode.MODELED) -> Trace:
    """``trace`` on ``mode``'s timeline (module docstring); the trace itself when that is the
    recorded one."""
    shift, base = call_shifts(trace, mode)
    if not shift or not any(shift.values()):
        return trace
    calls = {
        k: c.model_copy(update={"timings": _moved(c.timings, shift[k])}) if shift[k] else c
        for k, c in trace.calls.items()
    }
    tool_calls = {}
    for k, tc in trace.tool_calls.items():
        d = shift.get(tc.llm_call_id, 0)
        tool_calls[k] = (
            tc.model_copy(update={"start_ns": tc.start_ns + d, "end_ns": tc.end_ns + d})
            if d
            else tc
        )
    agents = {}
    for k, a in trace.agents.items():
        mine = trace.calls_of(k)
        if not mine:
            agents[k] = a
            continue
        d0, d1 = base[mine[0].id], shift[mine[-1].id]
        agents[k] = a.model_copy(
            update={
                "start_ns": a.start_ns + d0,
                "end_ns": None if a.end_ns is None else a.end_ns + d1,
            }
        )
    latest: dict[str, int] = {}
    for k, c in trace.calls.items():
        latest[c.session_id] = max(latest.get(c.session_id, 0), shift[k])
    sessions = {
        k: s.model_copy(update={"end_ns": s.end_ns + latest.get(k, 0)})
        if s.end_ns is not None and latest.get(k)
        else s
        for k, s in trace.sessions.items()
    }
    out = Trace(
        path=trace.path,
        header=trace.header,
        sessions=sessions,
        agents=agents,
        blobs=trace.blobs,
        calls=calls,
        tool_calls=tool_calls,
        events=trace.events,
        truncated=trace.truncated,
        counts=trace.counts,
    )
    out.share_tool_index(trace)
    return out


def turn_of(trace: Trace, call: LLMCallRecord) -> TurnKind | None:
    """What ``call``'s prompt appends after its agent's previous call (module docstring)."""
    if call.turn is not None:
        return call.turn
    if call.seq == 0:
        agent = trace.agents.get(call.agent_id)
        sub = agent is not None and agent.parent_agent_id is not None
        return TurnKind.BRIEF if sub else TurnKind.USER
    if not call.messages:
        return TurnKind.TOOL if call.depends_on else None
    return appended_turn(trace.messages(call))


def appended_turn(
    messages: Sequence[dict[str, Any]], *, first_of_sub: bool = False
) -> TurnKind | None:
    """What a request appends after its agent's last reply, read from its messages (what
    follows the last assistant message): a sub-agent's first request (``first_of_sub``) is its
    brief; tool results among them make it ``tool``; else a user message makes it ``user``;
    None when neither is there."""
    if first_of_sub:
        return TurnKind.BRIEF
    tail_start = 0
    for i, m in enumerate(messages):
        if m.get("role") == "assistant":
            tail_start = i + 1
    roles = {m.get("role") for m in messages[tail_start:]}
    if "tool" in roles:
        return TurnKind.TOOL
    if "user" in roles:
        return TurnKind.USER
    return None


def describe_waits(trace: Trace) -> str:
    """One line: the model of ``trace``'s modeled waits and whether they were slept."""
    info = trace.header.waits
    if info is None:
        return "none"
    parts = []
    for name in ("after_tool", "after_tool_subagent", "before_user"):
        g = getattr(info.model, name)
        if g is not None:
            parts.append(f"{name} median {g.median_s:g} s")
    slept = "slept (--pace real)" if info.slept else "not slept"
    return f"modeled ({'; '.join(parts)}; {slept}), fitted to {info.model.source}"
