"""The records of a Dynamo request-trace import: ``dynamo_trace``'s requests and tool events as
sessions, agents, calls and tool calls (docs/trace-formats.md, "Import: Dynamo request traces").

* **Tree.** Each Dynamo session is an agent, its id the session id; a session whose
  ``parent_session_id`` names another is a sub-agent of that session's agent (role
  ``subagent``), nested as deep as the links go. Each tree's root is one agentload session (its
  id the root's session id; role ``orchestrator``); a parent named but never seen is an agent
  without calls. A request without session identity is a session of its own, ``rK`` (K its index
  among those requests). Two different parents named for one session, or sessions that are each
  other's parents, are an error.
* **Order and edges**, as Dynamo's own replay builds them (its docs, "How the Request DAG Is
  Built"): an agent's calls run in the order they were received; a sub-agent starts after its
  parent's last call that ended before the sub-agent's first request (replay's
  ``delegating_call``); the parent's first request received after that, when it arrived after
  the sub-agent's last call ended, waits for it (``depends_on`` names the sub-agent).
* **Tools.** A session's tool events with one ``tool_call_id`` are one ``tool_call``, emitted by
  the call whose ``finish_reason_metadata.tool_calls`` names that id, else by the agent's last
  call received before the tool started; the agent's first later call received after the tool
  ended waits for it. A parent's tool that spans the whole run of a sub-agent, when only one
  does, is that sub-agent's delegate tool call (``child_agent_id``). A tool before any call of
  its session, or of a session that made no request (itself or below it), has no call to
  belong to and is left out (counted in the summary).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from agentload.interop.content_free import At, Progress
from agentload.interop.dynamo_trace import Request, Rows, ToolEvent
from agentload.interop.import_io import ContentFreeCall, prefix_of
from agentload.trace.schema import TurnKind

__all__ = ["Clock", "build_records"]

_TURNS = {"user_message": TurnKind.USER.value, "tool_result": TurnKind.TOOL.value}


@dataclass(frozen=True, slots=True)
class Clock:
    """The trace clock of an import: ``mono`` ns stands for the wall time ``t0_ms``."""

    mono: int
    t0_ms: float

    def at(self, wall_ms: float) -> int:
        """A wall time of the source (ms since 1970) as trace ns."""
        return self.mono + round((wall_ms - self.t0_ms) * 1e6)


@dataclass(slots=True)
class _Tool:
    """One tool call: its session's events with one ``tool_call_id``, merged."""

    call_id: str
    name: str
    start_ms: float
    end_ms: float
    failed: str | None
    output_bytes: int | None
    output_tokens: int | None
    id: str = ""  # its id in the trace
    emitter: int = -1  # the index of the call that emitted it
    child: str | None = None  # the sub-agent it ran


@dataclass(slots=True)
class _Agent:
    """One Dynamo session: its requests (in received order once built), tools, children."""

    sid: str
    parent: str | None
    at: At
    requests: list[Request] = field(default_factory=list)
    tools: list[_Tool] = field(default_factory=list)
    children: list[str] = field(default_factory=list)
    deps: list[list[str]] = field(default_factory=list)  # per request: what it waits for


def build_records(rows: Rows, clock: Clock, progress: Progress) -> Iterator[dict[str, Any]]:
    """Every record of the import: one session after the other, in order of their start."""
    agents = _agents(rows)
    compact = [r for r in rows.requests if r.ctx.sid is None]
    units: list[tuple[float, int, str, Request | None]] = [
        (_first_ms(agents, a.sid), 0, a.sid, None) for a in agents.values() if a.parent is None
    ]
    for k, r in enumerate(compact):
        name, n = f"r{k}", 1
        while name in agents:
            n += 1
            name = f"r{k}~{n}"
        units.append((r.received_ms, 1, name, r))
    units.sort(key=lambda u: (u[0], u[1], u[2]))
    progress.total = len(units)
    taken = {u[2] for u in units} | set(agents)  # agent ids: no tool call may have one
    for n, (_, _, name, req) in enumerate(units, 1):
        if req is None:
            yield from _Session(agents, name, clock, rows.left_out, taken).records()
        else:
            yield from _single(name, req, clock)
        progress.done = n


def _agents(rows: Rows) -> dict[str, _Agent]:
    """The agents (Dynamo sessions) of ``rows``, linked to their parents and children."""
    agents: dict[str, _Agent] = {}

    def node(sid: str, parent: str | None, at: At) -> _Agent:
        a = agents.get(sid)
        if a is None:
            a = agents[sid] = _Agent(sid, parent, at)
        elif parent is not None and a.parent is None:
            a.parent = parent
        elif parent is not None and parent != a.parent:
            at.sub("agent_context").fail(
                "parent_session_id",
                f"{parent!r} for session {sid!r}, which named {a.parent!r} before (one parent a "
                "session)",
            )
        return a

    for r in rows.requests:
        if r.ctx.sid is not None:
            node(r.ctx.sid, r.ctx.parent, r.at).requests.append(r)
    events: dict[tuple[str, str], list[ToolEvent]] = {}
    for t in rows.tools:
        assert t.ctx.sid is not None  # (read_rows leaves out tools without one)
        node(t.ctx.sid, t.ctx.parent, t.at)
        events.setdefault((t.ctx.sid, t.call_id), []).append(t)
    for (sid, _), evs in events.items():
        agents[sid].tools.append(_merge(evs, rows.left_out))
    for a in list(agents.values()):
        if a.parent is not None and a.parent not in agents:
            agents[a.parent] = _Agent(a.parent, None, a.at)
    _check_cycles(agents)
    for a in agents.values():
        if a.parent is not None:
            agents[a.parent].children.append(a.sid)
    return _pruned(agents, rows.left_out)


def _pruned(agents: dict[str, _Agent], left_out: Counter[str]) -> dict[str, _Agent]:
    """``agents`` without the sessions that made no request, themselves or below them (their
    tools have no call to belong to: counted)."""
    busy: dict[str, bool] = {}

    def made_calls(sid: str) -> bool:
        if sid not in busy:
            a = agents[sid]
            busy[sid] = bool(a.requests) | any([made_calls(c) for c in a.children])
        return busy[sid]

    kept = {sid: a for sid, a in agents.items() if made_calls(sid)}
    for a in agents.values():
        if a.sid not in kept:
            if a.tools:
                left_out["tool calls of sessions without requests left out"] += len(a.tools)
        else:
            a.children = [c for c in a.children if c in kept]
    return kept


def _check_cycles(agents: dict[str, _Agent]) -> None:
    """An error when sessions are each other's parents (no root to start from)."""
    for a in agents.values():
        chain = [a.sid]
        p = a.parent
        while p is not None:
            if p in chain:
                a.at.sub("agent_context").fail(
                    "parent_session_id",
                    f"sessions are each other's parents ({' -> '.join([*chain, p])})",
                )
            chain.append(p)
            p = agents[p].parent


def _merge(evs: list[ToolEvent], left_out: Counter[str]) -> _Tool:
    """One tool call from its events: start and end from the tool's own times, else from the
    events' (a tool with only a ``tool_start`` lasts no time, counted)."""
    ends = [e for e in evs if e.kind != "tool_start"]
    start = next((e.start_ms for e in evs if e.start_ms is not None), None)
    end = next((e.end_ms for e in ends if e.end_ms is not None), None)
    dur = next((e.duration_ms for e in evs if e.duration_ms is not None), None)
    if start is None:
        starts = [e.time_ms for e in evs if e.kind == "tool_start"]
        if starts:
            start = min(starts)
        else:  # (ends is not empty: evs holds no tool_start)
            start = (end if end is not None else ends[-1].time_ms) - (dur or 0.0)
    if end is None:
        if not ends:
            left_out["tool calls without a tool_end kept as lasting no time"] += 1
        end = ends[-1].time_ms if ends else start + (dur or 0.0)
    last_ev = ends[-1] if ends else evs[-1]
    return _Tool(
        call_id=evs[0].call_id,
        name=last_ev.name,
        start_ms=start,
        end_ms=max(start, end),
        failed=next((e.failed for e in ends if e.failed), None),
        output_bytes=next((e.output_bytes for e in ends if e.output_bytes is not None), None),
        output_tokens=next((e.output_tokens for e in ends if e.output_tokens is not None), None),
    )


def _first_ms(agents: dict[str, _Agent], sid: str) -> float:
    """When the tree under ``sid`` first did anything (ms since 1970)."""
    a = agents[sid]
    times = [r.received_ms for r in a.requests] + [t.start_ms for t in a.tools]
    times += [_first_ms(agents, c) for c in a.children]
    return min(times)


def _single(name: str, r: Request, clock: Clock) -> Iterator[dict[str, Any]]:
    """A request without session identity: a session of one agent and one call."""
    rec = _call_record(r, (name, name), 0, clock, None, [], [])
    start, end = rec["timings"]["submit_ns"], _end_ns(rec)
    meta: dict[str, Any] = {"source_file": r.at.file, "source_record": r.at.record}
    if r.request_id:
        meta["request_id"] = r.request_id
    yield {"type": "session", "id": name, "start_ns": start, "end_ns": end, "meta": meta}
    yield {
        "type": "agent",
        "id": name,
        "session_id": name,
        "role": "orchestrator",
        "start_ns": start,
        "end_ns": end,
    }
    yield rec


def _end_ns(call: dict[str, Any]) -> int:
    t = call["timings"]
    return int(t.get("last_token_ns") or t["submit_ns"])


def _call_record(
    r: Request,
    ids: tuple[str, str],
    seq: int,
    clock: Clock,
    prev: tuple[str, list[str]] | None,
    deps: list[str],
    refs: list[dict[str, Any]],
    brief: bool = False,
) -> dict[str, Any]:
    """The ``llm_call`` of request ``r``, the ``seq``-th of agent ``aid`` of session ``sid``
    (``ids``)."""
    sid, aid = ids
    submit = clock.at(r.received_ms)
    turn = TurnKind.BRIEF.value if brief else _TURNS.get(r.ctx.trigger or "")
    rec = ContentFreeCall(
        call_id=f"{aid}.{seq}",
        session_id=sid,
        agent_id=aid,
        seq=seq,
        model=r.model or "unknown",
        n_in=r.n_in,
        n_out=r.n_out,
        submit_ns=submit,
        first_token_ns=None if r.ttft_ms is None else submit + round(r.ttft_ms * 1e6),
        last_token_ns=submit + round(r.total_ms * 1e6),
        prefix=prefix_of(prev, [str(h) for h in r.hashes]),
        depends_on=deps,
        tool_calls=refs,
        finish_reason=r.finish,
        turn=turn,
    ).record()
    if r.cached is not None:
        rec["usage"]["cached_tokens"] = min(r.cached, r.n_in)
    return rec


class _Session:
    """The records of the tree rooted at Dynamo session ``root``."""

    def __init__(
        self,
        agents: dict[str, _Agent],
        root: str,
        clock: Clock,
        left_out: Counter[str],
        agent_ids: set[str],
    ) -> None:
        self.agents, self.root, self.clock, self.left_out = agents, root, clock, left_out
        self.order = self._order(root)
        self.tool_ids = set(agent_ids)  # the ids depends_on may name: unique in the session

    def _order(self, sid: str) -> list[str]:
        """``sid`` and the agents under it, depth first, children by their first request."""
        kids = sorted(self.agents[sid].children, key=lambda c: (_first_ms(self.agents, c), c))
        return [sid] + [x for c in kids for x in self._order(c)]

    def records(self) -> Iterator[dict[str, Any]]:
        """The session, then each agent followed by its calls (each followed by the tool calls
        it emitted)."""
        for sid in self.order:
            self._plan(self.agents[sid])
        for sid in self.order:
            self._join(self.agents[sid])
        calls = {sid: self._calls(self.agents[sid]) for sid in self.order}
        spans: dict[str, tuple[int, int]] = {}
        for sid in reversed(self.order):  # children before parents: a span covers its children
            spans[sid] = self._span(self.agents[sid], calls[sid], spans)
        start, end = spans[self.root]
        models = sorted({r.model for s in self.order for r in self.agents[s].requests if r.model})
        yield {
            "type": "session",
            "id": self.root,
            "start_ns": start,
            "end_ns": end,
            "meta": {"source_id": self.root, "models": models},
        }
        for sid in self.order:
            yield self._agent_record(self.agents[sid], spans[sid])
            tools = self.agents[sid].tools
            for i, call in enumerate(calls[sid]):
                yield call
                yield from (self._tool_record(t, sid, call["id"]) for t in tools if t.emitter == i)

    def _plan(self, a: _Agent) -> None:
        """Order ``a``'s requests, give each tool its id and its emitting call, and make the
        first call after a tool's end wait for it."""
        a.requests.sort(key=lambda r: r.received_ms)  # (stable: ties in file order)
        a.deps = [[] for _ in a.requests]
        received = [r.received_ms for r in a.requests]
        named = {cid: i for i, r in enumerate(a.requests) for cid, _ in r.called}
        kept = []
        for t in sorted(a.tools, key=lambda t: (t.start_ms, t.call_id)):
            t.emitter = named.get(t.call_id, bisect.bisect_right(received, t.start_ms) - 1)
            if t.emitter < 0:
                self.left_out["tool calls before any request of their session left out"] += 1
                continue
            t.id = t.call_id if t.call_id not in self.tool_ids else f"{a.sid}/{t.call_id}"
            n = 1
            while t.id in self.tool_ids:  # (a sub-agent named like that, or a third use)
                n += 1
                t.id = f"{a.sid}/{t.call_id}~{n}"
            self.tool_ids.add(t.id)
            kept.append(t)
            waiter = max(t.emitter + 1, bisect.bisect_left(received, t.end_ms))
            if waiter < len(a.requests):
                a.deps[waiter].append(t.id)
        a.tools = kept

    def _join(self, parent: _Agent) -> None:
        """Make ``parent``'s first request after each sub-agent's first wait for it when it
        arrived after the sub-agent's last call ended; link a tool that spans the sub-agent."""
        received = [r.received_ms for r in parent.requests]
        for cid in parent.children:
            child = self.agents[cid]
            if not child.requests:
                continue
            first = child.requests[0].received_ms
            last = max(r.end_ms for r in child.requests)
            waiter = bisect.bisect_left(received, first)
            if waiter < len(received) and received[waiter] >= last:
                parent.deps[waiter].append(cid)
            spanning = [t for t in parent.tools if t.start_ms <= first and t.end_ms >= last]
            if len(spanning) == 1 and spanning[0].child is None:
                spanning[0].child = cid

    def _calls(self, a: _Agent) -> list[dict[str, Any]]:
        """``a``'s calls, in order."""
        out: list[dict[str, Any]] = []
        prev: tuple[str, list[str]] | None = None
        for seq, r in enumerate(a.requests):
            refs = [
                {"id": t.id, "name": t.name, "arguments": "{}"} for t in a.tools if t.emitter == seq
            ]
            known = {t.call_id for t in a.tools if t.emitter == seq}
            refs += [{"id": c, "name": n, "arguments": "{}"} for c, n in r.called if c not in known]
            brief = seq == 0 and a.parent is not None
            rec = _call_record(
                r, (self.root, a.sid), seq, self.clock, prev, a.deps[seq], refs, brief
            )
            out.append(rec)
            prev = (rec["id"], [str(h) for h in r.hashes])
        return out

    def _span(
        self, a: _Agent, calls: list[dict[str, Any]], spans: dict[str, tuple[int, int]]
    ) -> tuple[int, int]:
        """When ``a`` started and ended (ns): its calls, its tools, its sub-agents."""
        starts = [c["timings"]["submit_ns"] for c in calls]
        ends = [_end_ns(c) for c in calls]
        starts += [self.clock.at(t.start_ms) for t in a.tools]
        ends += [self.clock.at(t.end_ms) for t in a.tools]
        starts += [spans[c][0] for c in a.children]
        ends += [spans[c][1] for c in a.children]
        return min(starts), max(ends)

    def _agent_record(self, a: _Agent, span: tuple[int, int]) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "type": "agent",
            "id": a.sid,
            "session_id": self.root,
            "role": "orchestrator" if a.parent is None else "subagent",
            "start_ns": span[0],
            "end_ns": span[1],
        }
        if a.parent is not None:
            rec["parent_agent_id"] = a.parent
            tool = next((t for t in self.agents[a.parent].tools if t.child == a.sid), None)
            if tool is not None:
                rec["parent_tool_call_id"] = tool.id
        return rec

    def _tool_record(self, t: _Tool, aid: str, call_id: str) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "type": "tool_call",
            "id": t.id,
            "session_id": self.root,
            "agent_id": aid,
            "llm_call_id": call_id,
            "name": t.name,
            "arguments": {},
            "start_ns": self.clock.at(t.start_ms),
            "end_ns": self.clock.at(t.end_ms),
            "output_bytes": t.output_bytes or 0,
        }
        if t.output_tokens is not None:
            rec["output_tokens"] = t.output_tokens
        if t.failed is not None:
            rec["error"] = t.failed
        if t.child is not None:
            rec["child_agent_id"] = t.child
        return rec
