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
synthesized messages (``recorder.synth``: the replay's tokenizer and seed) and ``max_tokens``,
no tools. Such a body is built when it is needed (its digest, its send) from the call's block
ids, never held: a plan of a long session holds its ids, not its prompts. Its digest covers the
synthesized body, so two runs with the same seed and tokenizer prove identical traffic. Its
reuse ceilings come from its token layout (``reuse.synth_ceilings``).

A plan is made for one salt mode (``--salt-at``, ``salt``): its calls' reuse ceilings
(``reuse``) are those of the prompts as that mode sends them, and the body builder and the
session pool read the mode from the plan, so what is sent and what is counted agree.
"""

from __future__ import annotations

import graphlib
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentload.errors import ReplayError, TokenizerError
from agentload.hashing import canonical_json, sha256_hex
from agentload.recorder.prefix import seen_blocks
from agentload.recorder.schema import LLMCallRecord
from agentload.recorder.synth import Layout, Synthesizer
from agentload.recorder.trace import Trace
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


@dataclass(frozen=True)
class Edge:
    """``call`` may be sent ``gap_ns * gap_scale`` after predecessor ``pred`` completed."""

    pred: str
    gap_ns: int


@dataclass
class CallPlan:
    """One recorded call, ready to send."""

    id: str
    key: str
    """Unique key across all given traces (``call id``, prefixed by the trace index when
    several traces are given)."""
    session_id: str
    agent_id: str
    seq: int
    traffic: dict[str, Any]
    """The unsalted traffic body (see the module docstring); of a synthesized call, all but its
    messages (``body()`` adds them)."""
    expected_tokens: int
    """Recorded completion tokens (the server's when reported, else ours): the pinned length."""
    prompt_tokens: int
    """Recorded prompt tokens (server's when reported, else ours)."""
    ceiling_tokens: int
    """Prompt tokens reusable from earlier calls of the session: leading blocks of this call
    already present in earlier calls' block lists, times the trace's block size (the recorded
    sharing; the ceiling when ``within_tokens`` is not known)."""
    rel_submit_ns: int
    """Recorded submit time, relative to the session's first submit."""
    rel_end_ns: int
    preds: list[Edge] = field(default_factory=list)
    succs: list[str] = field(default_factory=list)
    recorded_gap_ns: int | None = None
    """Recorded wait after the previous call of the same agent (None for an agent's first)."""
    salt_at: SaltAt = "after-system"
    """Where the salt goes in the call's body (``salt``): the mode it was planned for."""
    within_tokens: int | None = None
    """Prompt tokens of the call as sent reusable from its own session instance (``reuse``);
    None when not computed (the trace's tokenizer cannot be loaded)."""
    cross_tokens: int | None = None
    """Prompt tokens of the call as sent that another instance can have put in the cache
    (``reuse``); None when not computed."""
    prompt_tokens_ours: int = 0
    """Recorded prompt tokens in agentload's count (the trace's tokenizer), unsalted."""
    salt_tokens: int = 0
    """Tokens the salt line adds to the prompt in agentload's count (0 unsalted or when not
    computed)."""
    synth: tuple[Synthesizer, Layout] | None = None
    """A content-free call's synthesizer and layout (None: the trace has the messages)."""
    rel_trace_submit_ns: int = 0
    """Recorded submit time, relative to the earliest submit of its trace (``--schedule
    recorded``)."""
    api: str = "chat"
    """The API the call was recorded in (``chat``, ``responses``, ``messages``)."""
    native: dict[str, Any] | None = None
    """The body as recorded in ``api`` when that is not chat (``request.native``)."""
    send_api: str = "chat"
    """The API it is sent in: ``api`` when the target speaks it (``use_api``), else chat (its
    Chat Completions translation, ``traffic``)."""
    _digest: str | None = None

    def use_api(self, api: str) -> None:
        """Send the call in ``api`` (its recorded API, or chat)."""
        if api not in ("chat", self.api) or (api != "chat" and self.native is None):
            raise ValueError(f"call {self.id}: cannot be sent in {api}")
        if api != self.send_api:
            self.send_api = api
            self._digest = None

    def body(self) -> dict[str, Any]:
        """The unsalted traffic body, messages included (built anew for a synthesized call); in
        its recorded API when sent in it (``send_api``), length pinned to ``expected_tokens``."""
        if self.send_api != "chat" and self.native is not None:
            key = "max_output_tokens" if self.send_api == "responses" else "max_tokens"
            return {**self.native, key: self.expected_tokens}
        if self.synth is None:
            return self.traffic
        synth, layout = self.synth
        return {"messages": synth.messages(layout), **self.traffic}

    def ceiling(self) -> int:
        """The KV-survival ceiling of the call as sent: the larger of ``within_tokens`` and
        ``cross_tokens`` (``ceiling_tokens`` when they are not known)."""
        if self.within_tokens is None or self.cross_tokens is None:
            return self.ceiling_tokens
        return max(self.within_tokens, self.cross_tokens)

    def within(self) -> int:
        """The part of the ceiling reusable from the call's own session instance."""
        return self.ceiling_tokens if self.within_tokens is None else self.within_tokens

    def ours(self) -> int:
        """Prompt tokens of the call as sent (salt included), in agentload's count."""
        return self.prompt_tokens_ours + self.salt_tokens

    @property
    def digest(self) -> str:
        """sha256 of the canonical unsalted traffic body (in the API it is sent in)."""
        if self._digest is None:
            self._digest = sha256_hex(canonical_json(self.body()))
        return self._digest


@dataclass
class SessionPlan:
    """One recorded session: its calls as a graph, in recorded submit order."""

    key: str
    session_id: str
    trace_path: str
    calls: dict[str, CallPlan]
    order: list[str]
    """Call ids by recorded submit time."""
    duration_ns: int
    n_agents: int
    max_width: int
    """Most calls of this session the recording had in flight at once."""
    salt_at: SaltAt = "after-system"
    """The salt mode it was planned for (every call's ``salt_at``)."""

    @property
    def last_submit_ns(self) -> int:
        return self.calls[self.order[-1]].rel_submit_ns if self.order else 0


def _last_ns(c: LLMCallRecord) -> int:
    t = c.timings
    return t.last_token_ns or t.first_token_ns or t.submit_ns


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
    u = call.usage
    n = u.completion_tokens if u.completion_tokens is not None else u.completion_tokens_ours
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
    calls.sort(key=lambda c: (c.timings.submit_ns, c.seq))
    t0 = calls[0].timings.submit_ns
    by_agent: dict[str, list[LLMCallRecord]] = {}
    for c in calls:
        by_agent.setdefault(c.agent_id, []).append(c)
    for lst in by_agent.values():
        lst.sort(key=lambda c: c.seq)
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
            rel_end_ns=_last_ns(c) - t0,
            synth=syn,
            rel_trace_submit_ns=c.timings.submit_ns - trace_t0,
            api=c.request.api,
            native=_native(trace, c),
        )
    _link(trace, by_agent, plans)
    try:
        graphlib.TopologicalSorter(
            {p.id: [e.pred for e in p.preds] for p in plans.values()}
        ).prepare()
    except graphlib.CycleError as exc:
        raise ReplayError(
            f"{trace.path}: session {sid}: calls wait on each other in a cycle ({exc.args[1]})"
        ) from None
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


def _delegating_call(
    trace: Trace, agent_id: str, by_agent: dict[str, list[LLMCallRecord]]
) -> LLMCallRecord | None:
    """The parent's call that started ``agent_id`` (its delegate tool call's emitting call)."""
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
    first = by_agent[agent_id][0].timings.submit_ns
    before = [c for c in by_agent.get(agent.parent_agent_id, []) if _last_ns(c) <= first]
    return before[-1] if before else None


def _child_agents(trace: Trace, session_id: str, deps: list[str]) -> tuple[set[str], list[int]]:
    """(child agent ids, end ns of the non-delegate tool deps) named by ``depends_on``."""
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


def _link(
    trace: Trace, by_agent: dict[str, list[LLMCallRecord]], plans: dict[str, CallPlan]
) -> None:
    for agent_id, lst in by_agent.items():
        first = lst[0]
        parent = _delegating_call(trace, agent_id, by_agent)
        if parent is not None and parent.id in plans:
            gap = first.timings.submit_ns - _last_ns(parent)
            plans[first.id].preds.append(Edge(parent.id, max(0, gap)))
        for prev, cur in itertools.pairwise(lst):
            children, tool_ends = _child_agents(trace, cur.session_id, cur.depends_on)
            children = {a for a in children if a in by_agent and a != agent_id}
            p = plans[cur.id]
            full_gap = max(0, cur.timings.submit_ns - _last_ns(prev))
            p.recorded_gap_ns = full_gap
            if not children:
                p.preds.append(Edge(prev.id, full_gap))
                continue
            tool_gap = max(tool_ends) - _last_ns(prev) if tool_ends else 0
            p.preds.append(Edge(prev.id, max(0, tool_gap)))
            lasts = [by_agent[a][-1] for a in children]
            post = max(0, cur.timings.submit_ns - max(_last_ns(c) for c in lasts))
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
