"""From traces to a replay plan: every recorded call as a node of its session's call graph.

Each call's request body is rebuilt from the trace (recorded messages, tools, parameters) with
the output length pinned to the recorded completion tokens. A call waits for its predecessors:

* the previous call of its agent, with the recorded gap ``submit(k+1) - last_token(k)``
  (when the call also waits for child agents: only the recorded tool time before it,
  ``max(end of its non-delegate tool deps) - last_token(k)``);
* for an agent's first call, its parent's delegating call, with the recorded spawn delay;
* the last call of every child agent it depends on (``depends_on``), with the recorded delay
  between the last child's end and this call's submit.

Replay sends a call at ``max(actual completion of pred + gap_scale * gap)`` over its preds, so
the recorded waits are measured from the actual completions on the target.

The payload digest is sha256 of the canonical JSON of the *traffic body*: messages, tools,
tool_choice, sampling parameters, ``max_tokens`` and the recorded extra fields — unsalted, and
without ``model``, ``stream``/``stream_options`` and the engine preset's extras, so two runs
against two systems (different model names, different engines) prove identical traffic.

A content-free trace (``header.redacted``) has no text to rebuild: each call's body is the
synthesized messages (``trace.synth``: the replay's tokenizer and seed) and ``max_tokens``,
no tools. Such a body is built when it is needed (its digest, its send) from the call's block
ids, never held: a plan of a long session holds its ids, not its prompts. Its digest covers the
synthesized body, so two runs with the same seed and tokenizer prove identical traffic. Its
reuse ceilings come from its token layout (``reuse.synth_ceilings``).

A plan is made for one salt mode (``--salt-at``, ``salt``): its calls' reuse ceilings
(``reuse``) are those of the prompts as that mode sends them, and the body builder and the
session pool read the mode from the plan, so what is sent and what is counted agree.

The plan's classes (``CallPlan``, ``SessionPlan``, ``Edge``) are ``callplan``'s; this module
builds them.
"""

from __future__ import annotations

import graphlib
import itertools
from collections.abc import Callable, Sequence
from typing import Any

from agentload.errors import ReplayError, TokenizerError
from agentload.replay.callplan import CallPlan, Edge, SessionPlan
from agentload.replay.reuse import (
    Ceiling,
    salt_tokens,
    salted_ceilings,
    synth_ceilings,
    synth_salt_tokens,
    unsalted_ceilings,
)
from agentload.replay.salt import SaltAt
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.prefix import seen_blocks
from agentload.trace.samples import call_end_ns
from agentload.trace.schema import LLMCallRecord
from agentload.trace.synth import Synthesizer
from agentload.trace.timeline import delegating_call, dependencies
from agentload.trace.trace import Trace, completion_of

__all__ = ["CallPlan", "Edge", "Selector", "SessionPlan", "build_plans", "traffic_body"]

# Body fields replay controls itself; a recorded value of these is not replayed as an extra.
_CONTROLLED = frozenset(
    {
        "model",
        "messages",
        "tools",
        "stream",
        "stream_options",
        "max_tokens",
        "max_completion_tokens",
        "ignore_eos",
        "min_tokens",
        "n",
    }
)


def traffic_body(trace: Trace, call: LLMCallRecord, expected_tokens: int) -> dict[str, Any]:
    """The unsalted traffic body of a recorded call (see the module docstring)."""
    body: dict[str, Any] = {"messages": trace.messages(call)}
    tools = trace.tools(call)
    if tools:
        body["tools"] = tools
    req = call.request
    for k in ("temperature", "top_p", "seed", "tool_choice"):
        v = getattr(req, k)
        if v is not None:
            body[k] = v
    for k, v in req.extra.items():
        if k not in _CONTROLLED:
            body[k] = v
    body["max_tokens"] = expected_tokens
    return body


def _native(trace: Trace, call: LLMCallRecord) -> dict[str, Any] | None:
    """The body to send in the call's recorded API; None for a chat call, and for one that
    continued a response stored on the recording's server (``previous_response_id``: no
    target has it), which goes as its chat form (the whole conversation)."""
    body = trace.native_body(call) if call.request.api != "chat" else None
    if body is not None and body.get("previous_response_id"):
        return None
    return body


def _expected(call: LLMCallRecord) -> int:
    n = completion_of(call.usage)
    if not n:
        n = 1
    return max(1, int(n))


Selector = Callable[[SessionPlan], set[str] | None]
"""Given a whole session's plan, the ids of the calls to keep (None: all of them; empty: leave
the session out). The kept set must hold every predecessor of a kept call (``fit``)."""


def build_plans(
    traces: Sequence[Trace],
    salt_at: SaltAt = "after-system",
    select: Selector | None = None,
    synth: Synthesizer | None = None,
) -> list[SessionPlan]:
    """Every session of every trace as a ``SessionPlan`` for salt mode ``salt_at``, with the
    mode's reuse ceilings (a salted mode's when the trace's tokenizer loads). ``select`` may
    keep part of a session (it is
    planned again from the kept calls, so its gaps, width and ceilings are those of what is
    sent) or leave it out. ``synth`` synthesizes the prompts of content-free traces (default:
    o200k_base, seed 0). Raises ``ReplayError`` when no trace has a call; returns [] when
    ``select`` left every session out."""
    plans: list[SessionPlan] = []
    any_calls = False
    for ti, trace in enumerate(traces):
        prefix = f"{ti}:" if len(traces) > 1 else ""
        syn = None
        if trace.header.redacted:
            syn = synth = synth or Synthesizer()
        counter = _counter(trace) if salt_at != "off" and syn is None else None
        t0 = min((c.timings.submit_ns for c in trace.calls.values()), default=0)
        by_session: dict[str, list[LLMCallRecord]] = {}
        for c in trace.calls.values():
            by_session.setdefault(c.session_id, []).append(c)
        for sid in sorted(
            by_session, key=lambda s: min(c.timings.submit_ns for c in by_session[s])
        ):
            any_calls = True
            plan = _session_plan(trace, sid, by_session[sid], prefix, syn, t0)
            keep = select(plan) if select is not None else None
            if keep is not None and len(keep) < len(plan.calls):
                if not keep:
                    continue
                kept = [c for c in by_session[sid] if c.id in keep]
                plan = _session_plan(trace, sid, kept, prefix, syn, t0)
            plan.salt_at = salt_at
            for cp in plan.calls.values():
                cp.salt_at = salt_at
            if syn is not None:
                _synth_ceilings(plan, syn, salt_at)
            elif salt_at == "off":
                calls = _ordered(plan)
                blocks = [trace.blocks(trace.calls[c.id]) for c in calls]
                _set(calls, unsalted_ceilings(blocks, trace.header.block_size, _succs(calls)))
            elif counter is not None:
                _salt_ceilings(plan, counter, trace.header.block_size, salt_at)
            plans.append(plan)
    if not any_calls:
        names = ", ".join(t.path for t in traces)
        raise ReplayError(f"{names}: no llm_call records to replay")
    return plans


def _counter(trace: Trace) -> ChatTokenCounter | None:
    """The trace's tokenizer (None when it cannot be loaded here, e.g. an hf: file)."""
    try:
        return ChatTokenCounter(trace.header.tokenizer)
    except TokenizerError:
        return None


def _ordered(plan: SessionPlan) -> list[CallPlan]:
    return [plan.calls[c] for c in plan.order]


def _succs(calls: list[CallPlan]) -> list[list[int]]:
    """Per call (in this order), the indexes of the calls that wait for it."""
    index = {c.id: i for i, c in enumerate(calls)}
    return [[index[s] for s in c.succs] for c in calls]


def _set(calls: list[CallPlan], ceilings: Sequence[Ceiling]) -> None:
    for c, (within, cross) in zip(calls, ceilings, strict=True):
        c.within_tokens, c.cross_tokens = within, cross


def _salt_ceilings(
    plan: SessionPlan, counter: ChatTokenCounter, block_size: int, salt_at: SaltAt
) -> None:
    calls = _ordered(plan)
    prompts = [(c.traffic["messages"], c.traffic.get("tools")) for c in calls]
    _set(calls, salted_ceilings(counter, block_size, prompts, _succs(calls), salt_at))
    for c in calls:
        c.salt_tokens = salt_tokens(counter, c.traffic["messages"], salt_at)


def _synth_ceilings(plan: SessionPlan, synth: Synthesizer, salt_at: SaltAt) -> None:
    calls = _ordered(plan)
    layouts = [c.synth[1] for c in calls if c.synth is not None]
    recorded, ceilings = synth_ceilings(synth, layouts, _succs(calls), salt_at)
    _set(calls, ceilings)
    salt = synth_salt_tokens(synth, salt_at)
    for c, n in zip(calls, recorded, strict=True):
        c.ceiling_tokens = n
        c.salt_tokens = salt


def _session_plan(
    trace: Trace,
    sid: str,
    calls: list[LLMCallRecord],
    prefix: str,
    synth: Synthesizer | None,
    trace_t0: int,
) -> SessionPlan:
    """The plan of session ``sid``: its ``calls`` (sorted here by submit time), each waiting
    for its predecessors (see the module docstring)."""
    calls.sort(key=lambda c: (c.timings.submit_ns, c.seq))
    by_agent: dict[str, list[LLMCallRecord]] = {}
    for c in calls:
        by_agent.setdefault(c.agent_id, []).append(c)
    for lst in by_agent.values():
        lst.sort(key=lambda c: c.seq)
    plans = _call_plans(trace, sid, calls, prefix, synth, trace_t0)
    _link(trace, by_agent, plans)
    _check_acyclic(trace, sid, plans)
    order = [c.id for c in calls]
    duration = max(p.rel_end_ns for p in plans.values())
    return SessionPlan(
        key=prefix + sid,
        session_id=sid,
        trace_path=trace.path,
        calls=plans,
        order=order,
        duration_ns=duration,
        n_agents=len(by_agent),
        max_width=_max_width(list(plans.values())),
    )


def _call_plans(
    trace: Trace,
    sid: str,
    calls: list[LLMCallRecord],
    prefix: str,
    synth: Synthesizer | None,
    trace_t0: int,
) -> dict[str, CallPlan]:
    """Every call of session ``sid`` (in submit order) as a ``CallPlan`` by id, not yet
    linked: its body, pinned length, recorded times and recorded reuse."""
    t0 = calls[0].timings.submit_ns
    block = trace.header.block_size
    seen: set[str] = set()
    plans: dict[str, CallPlan] = {}
    for c in calls:
        blocks = trace.blocks(c)
        n = seen_blocks(blocks, seen)
        seen.update(blocks)
        exp = _expected(c)
        ours = c.usage.prompt_tokens_ours
        syn = None
        if synth is not None:
            syn = (synth, synth.layout(c.id, blocks, ours, block))
            ours = syn[1].tokens
        plans[c.id] = CallPlan(
            id=c.id,
            key=prefix + c.id,
            session_id=sid,
            agent_id=c.agent_id,
            seq=c.seq,
            traffic={"max_tokens": exp} if syn else traffic_body(trace, c, exp),
            expected_tokens=exp,
            prompt_tokens=trace.prompt_tokens(c),
            prompt_tokens_ours=ours,
            ceiling_tokens=n * block,
            rel_submit_ns=c.timings.submit_ns - t0,
            rel_end_ns=call_end_ns(c) - t0,
            synth=syn,
            rel_trace_submit_ns=c.timings.submit_ns - trace_t0,
            api=c.request.api,
            native=_native(trace, c),
        )
        plans[c.id].agent_path, plans[c.id].parent_path = _lineage(trace, c.agent_id)
    return plans


def _lineage(trace: Trace, agent_id: str) -> tuple[str, str | None]:
    """``CallPlan.agent_path`` and ``parent_path`` of ``agent_id``'s calls."""
    agent = trace.agents.get(agent_id)
    parent = agent.parent_agent_id if agent is not None else None
    if parent is None:
        return "", None
    grand = trace.agents.get(parent)
    return agent_id, (parent if grand is not None and grand.parent_agent_id else "")


def _check_acyclic(trace: Trace, sid: str, plans: dict[str, CallPlan]) -> None:
    """Raise ``ReplayError`` when calls of session ``sid`` wait on each other in a cycle."""
    try:
        graphlib.TopologicalSorter(
            {p.id: [e.pred for e in p.preds] for p in plans.values()}
        ).prepare()
    except graphlib.CycleError as exc:
        raise ReplayError(
            f"{trace.path}: session {sid}: calls wait on each other in a cycle ({exc.args[1]})"
        ) from None


def _link(
    trace: Trace, by_agent: dict[str, list[LLMCallRecord]], plans: dict[str, CallPlan]
) -> None:
    for agent_id, lst in by_agent.items():
        first = lst[0]
        parent = delegating_call(trace, agent_id, lambda a: by_agent.get(a, []))
        if parent is not None and parent.id in plans:
            gap = first.timings.submit_ns - call_end_ns(parent)
            plans[first.id].preds.append(Edge(parent.id, max(0, gap)))
        for prev, cur in itertools.pairwise(lst):
            children, tool_ends = dependencies(trace, cur.session_id, cur.depends_on)
            children = {a for a in children if a in by_agent and a != agent_id}
            p = plans[cur.id]
            full_gap = max(0, cur.timings.submit_ns - call_end_ns(prev))
            p.recorded_gap_ns = full_gap
            if not children:
                p.preds.append(Edge(prev.id, full_gap))
                continue
            tool_gap = max(tool_ends) - call_end_ns(prev) if tool_ends else 0
            p.preds.append(Edge(prev.id, max(0, tool_gap)))
            lasts = [by_agent[a][-1] for a in children]
            post = max(0, cur.timings.submit_ns - max(call_end_ns(c) for c in lasts))
            for c in lasts:
                p.preds.append(Edge(c.id, post))
    for p in plans.values():
        for e in p.preds:
            plans[e.pred].succs.append(p.id)


def _max_width(calls: list[CallPlan]) -> int:
    events = sorted(
        [(c.rel_submit_ns, 1) for c in calls] + [(c.rel_end_ns, -1) for c in calls],
        key=lambda e: (e[0], e[1]),
    )
    width = best = 0
    for _, d in events:
        width += d
        best = max(best, width)
    return max(best, 1)
