"""What the proxy knows of one recording: the bookkeeping under the threading rules.

The rules that place a request are ``threads`` (rules 3 and 5: ``parents``); this is the state they read and the records
they make: each agent as it is followed (``AgentState``), the tool calls the model emitted whose
results are not in yet (``Outstanding``), the ones whose results came (``Closed``: delegation-like
ones remembered for rule 3, those still without a sub-agent for rule 5), agents by their last
request's message ids (``Prefixes``), the sessions, and where a placed request goes
(``Placement``). ``Ledger`` makes sessions and agents, learns an agent's own ids for the model's
tool calls, closes the calls whose results a request carries (ending their sub-agents), and
takes each reply in (``answered``: its tool calls become outstanding).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from agentload.record.matching import (
    args_value,
    content_text,
    delegation_like,
    names_in,
    same_reply,
)
from agentload.trace.schema import AgentRecord, ContextPolicy, SessionRecord

REBUILT_MIN_CHARS = 24
"""The shortest reply text that identifies its agent when a later call carries it (rule 6)."""

__all__ = [
    "AgentState",
    "Closed",
    "Ledger",
    "Outstanding",
    "Placement",
    "Prefixes",
]

_SAFE = re.compile(r"[^A-Za-z0-9_.:-]")
_KEEP_ANSWERED = 4096
"""Answered delegation-like calls remembered for rule 3 (the oldest are forgotten first)."""
KEEP_UNCLAIMED = 256
"""Of those, the ones without a sub-agent yet that rule 5 may match (the oldest forgotten)."""


@dataclass
class AgentState:
    """One agent as the proxy follows it."""

    record: AgentRecord
    seq: int = 0
    last_ids: list[str] | None = None
    last_reply: dict[str, Any] | None = None
    last_call_id: str | None = None
    last_end_ns: int | None = None
    in_flight: int = 0
    names: tuple[str, ...] = ()
    """What its headers call it (``native.Identity.names``): a spawn call's result may say."""


@dataclass
class Outstanding:
    """A tool call the model emitted whose result the proxy has not seen yet."""

    server_id: str
    name: str
    arguments: str
    agent_id: str
    session_id: str
    llm_call_id: str
    emitted_ns: int
    client_id: str | None = None
    children: list[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        """The id the agent uses for it (its own when it renumbered the model's)."""
        return self.client_id or self.server_id


@dataclass
class Closed:
    """A tool call whose result arrived: what its ``tool_call`` record needs."""

    call: Outstanding
    result: str
    arguments: str
    end_ns: int


@dataclass
class Placement:
    """Where one request goes, and the records its arrival makes."""

    agent: AgentState
    call_id: str
    seq: int
    depends_on: list[str]
    new_session: SessionRecord | None = None
    new_agent: AgentRecord | None = None
    closed: list[Closed] = field(default_factory=list)
    """The tool calls whose ``tool_call`` record its arrival writes: those whose results it
    carries, and an answered call that just got its sub-agent (rule 3; written again)."""
    ended_agents: list[AgentRecord] = field(default_factory=list)
    linked_agents: list[AgentRecord] = field(default_factory=list)
    """Agents found to be sub-agents of a call whose result its arrival carries (rule 3,
    by name); their records are written again."""


class Prefixes:
    """Agents keyed by (length, hash) of their last request's message ids."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[int, int], list[str]] = {}
        self._key_of: dict[str, tuple[int, int]] = {}

    @staticmethod
    def hashes(ids: list[str]) -> list[int]:
        """``out[k]``: the hash of ``ids[:k]`` (``out[0]`` of the empty list)."""
        out = [0]
        h = 0
        for i in ids:
            h = hash((h, i))
            out.append(h)
        return out

    def put(self, agent_id: str, ids: list[str], hashes: list[int]) -> None:
        self.drop(agent_id)
        key = (len(ids), hashes[len(ids)])
        self._by_key.setdefault(key, []).append(agent_id)
        self._key_of[agent_id] = key

    def drop(self, agent_id: str) -> None:
        key = self._key_of.pop(agent_id, None)
        if key is not None:
            lst = self._by_key[key]
            lst.remove(agent_id)
            if not lst:
                del self._by_key[key]

    def at(self, k: int, h: int) -> list[str]:
        return self._by_key.get((k, h), [])


def _role(parent: Outstanding | None) -> str:
    """``agent`` for a root; for a sub-agent its kind when the delegating call names one
    (``subagent_type``, ``agent_type``, ``agent_name`` (Gemini CLI's ``invoke_agent``), ``kind``,
    ``agent``, ``role`` arguments), else the tool's name."""
    if parent is None:
        return "agent"
    args = args_value(parent.arguments)
    if isinstance(args, dict):
        for key in ("subagent_type", "agent_type", "agent_name", "kind", "agent", "role"):
            v = args.get(key)
            if isinstance(v, str) and 0 < len(v) <= 40:
                return v
    return parent.name or "subagent"


class Ledger:
    """The sessions, agents and tool calls of one recording, as the threading rules keep
    them (``threads.Threads`` places requests with them)."""

    def __init__(self) -> None:
        self.agents: dict[str, AgentState] = {}
        self.sessions: dict[str, SessionRecord] = {}
        self.outstanding: dict[str, Outstanding] = {}  # by server id and by client id
        self._answered: OrderedDict[str, Closed] = OrderedDict()  # delegation-like, both ids
        self._unclaimed: OrderedDict[str, Closed] = OrderedDict()  # of those, still childless
        self._spawners: set[str] = set()  # tool names that got a sub-agent by id (rule 3)
        self._prefixes = Prefixes()
        self._by_header: dict[tuple[str, str], str] = {}
        self._n_sessions = 0
        self._n_agents: dict[str, int] = {}  # agents so far, by session
        self._root_static: set[tuple[str, ...]] = set()  # leading system message ids of roots
        self._by_reply: dict[int, str] = {}  # a text-only last reply's text hash → its agent
        self._reply_of: dict[str, int] = {}  # agent id → its key in _by_reply (rule 6)

    # -- sessions, agents and their tool calls -------------------------------------------------
    def _finished(self, agent_id: str) -> bool:
        """Whether a sub-agent counts as done when its call's result comes: a fresh one always
        (its parent waited for it; ``generate`` may cut one at its call budget); a fork when it
        is not in flight and its last reply called no tool. A fork still working (running in
        the background, its spawn answered "started" at once) is no dependency of its parent's
        next call, and not ended by it."""
        a = self.agents.get(agent_id)
        if a is None or a.record.context_policy != ContextPolicy.FORKED:
            return a is not None
        return not a.in_flight and not (a.last_reply or {}).get("tool_calls")

    def _delegating(self, o: Outstanding) -> bool:
        """Whether a call may have sub-agents: delegation-like, or its tool already spawned one."""
        return delegation_like(o.name, o.arguments) or o.name in self._spawners

    def _session_for(self, hint: str, now_ns: int) -> tuple[str, SessionRecord | None]:
        """The session a session header names (created at its first request)."""
        sid = header_session_id(hint)
        if sid in self.sessions:
            return sid, None
        rec = SessionRecord(id=sid, start_ns=now_ns, meta={"from_header": hint[:200]})
        self.sessions[sid] = rec
        return sid, rec

    def _new_session(self, now_ns: int) -> tuple[str, SessionRecord]:
        """A session no header names (``p0``, ``p1``, ...)."""
        sid = f"p{self._n_sessions}"
        self._n_sessions += 1
        rec = SessionRecord(id=sid, start_ns=now_ns)
        self.sessions[sid] = rec
        return sid, rec

    def _new_agent(
        self, session_id: str, parent: Outstanding | None, now_ns: int, header_name: str | None
    ) -> AgentState:
        """A new agent of the session (a sub-agent of ``parent`` if given), known by its header."""
        n = self._n_agents.get(session_id, 0)
        self._n_agents[session_id] = n + 1
        aid = f"{session_id}.a{n}"
        rec = AgentRecord(
            id=aid,
            session_id=session_id,
            parent_agent_id=parent.agent_id if parent else None,
            parent_tool_call_id=parent.id if parent else None,
            role=_role(parent),
            start_ns=now_ns,
        )
        state = AgentState(rec)
        self.agents[aid] = state
        if header_name is not None:
            self._by_header[(session_id, header_name)] = aid
        return state

    def _learn_client_ids(self, reply: dict[str, Any], carried: dict[str, Any]) -> None:
        """The agent's ids for the reply's tool calls, by position."""
        for mine, theirs in zip(
            reply.get("tool_calls") or (), carried.get("tool_calls") or (), strict=False
        ):
            o = self.outstanding.get(str(mine.get("id", "")))
            cid = str(theirs.get("id", ""))
            if o is not None and cid and cid != o.server_id and o.client_id is None:
                o.client_id = cid
                self.outstanding[cid] = o
                for child in o.children:
                    c = self.agents.get(child)
                    if c is not None and c.record.parent_tool_call_id == o.server_id:
                        c.record.parent_tool_call_id = cid

    def _close_results(
        self, new: list[dict[str, Any]], now_ns: int, own: str | None = None
    ) -> tuple[list[Closed], list[AgentRecord], list[AgentRecord]]:
        """Close the calls whose results ``new`` carries (only agent ``own``'s when given)."""
        closed: list[Closed] = []
        ended: list[AgentRecord] = []
        linked: list[AgentRecord] = []
        carried_args: dict[str, str] = {}
        for m in new:
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                carried_args[str(tc.get("id", ""))] = str(fn.get("arguments", ""))
            if m.get("role") != "tool":
                continue
            o = self.outstanding.get(str(m.get("tool_call_id", "")))
            if o is None or (own is not None and o.agent_id != own):
                continue
            self.outstanding.pop(o.server_id, None)
            if o.client_id:
                self.outstanding.pop(o.client_id, None)
            args = carried_args.get(o.id, o.arguments)
            done = Closed(o, content_text(m.get("content")), args, now_ns)
            closed.append(done)
            for child in o.children:
                c = self.agents.get(child)
                if (
                    c is not None
                    and c.record.end_ns is None
                    and not c.in_flight
                    and self._finished(child)
                ):
                    c.record.end_ns = c.last_end_ns or now_ns
                    ended.append(c.record)
            if self._delegating(o):
                self._remember(done)
                if not o.children:  # a sub-agent that started before its spawn was answered
                    linked.extend(self._link_by_name(o, done.result))
                if not o.children:
                    self._unclaimed[o.server_id] = done
                    while len(self._unclaimed) > KEEP_UNCLAIMED:
                        self._unclaimed.popitem(last=False)
        return closed, ended, linked

    def _link_by_name(self, o: Outstanding, result: str) -> list[AgentRecord]:
        """Rule 3, by name, the other way round: the root agents of the call's session,
        started before its result was seen, that the result names become its sub-agents."""
        named = names_in(result)
        if not named:
            return []
        out: list[AgentRecord] = []
        for a in self.agents.values():
            rec = a.record
            if (
                rec.session_id == o.session_id
                and rec.parent_agent_id is None
                and rec.id != o.agent_id
                and named & set(a.names)
            ):
                rec.parent_agent_id, rec.parent_tool_call_id = o.agent_id, o.id
                rec.role = _role(o)
                o.children.append(rec.id)
                self._spawners.add(o.name)
                out.append(rec)
        return out

    def _remember(self, done: Closed) -> None:
        """Keep an answered delegation-like call for rule 3 (by both of its ids, bounded)."""
        for key in {done.call.server_id, done.call.id}:
            self._answered[key] = done
            self._answered.move_to_end(key)
        while len(self._answered) > _KEEP_ANSWERED:
            self._answered.popitem(last=False)

    # -- its reply ---------------------------------------------------------------------------
    def answered(
        self,
        placement: Placement,
        reply: dict[str, Any] | None,
        end_ns: int,
    ) -> None:
        """Record the reply (chat-form assistant message, None when the call failed) of a
        placed request; its tool calls become outstanding."""
        a = placement.agent
        a.in_flight = max(0, a.in_flight - 1)
        a.last_end_ns = end_ns
        if a.last_call_id != placement.call_id:
            return  # a later call of the same agent was placed meanwhile
        a.last_reply = reply
        self._remember_reply(a, reply)
        for tc in (reply or {}).get("tool_calls") or ():
            fn = tc.get("function") or {}
            sid = str(tc.get("id", ""))
            if not sid:
                continue
            self.outstanding[sid] = Outstanding(
                server_id=sid,
                name=str(fn.get("name", "")),
                arguments=str(fn.get("arguments", "")),
                agent_id=a.record.id,
                session_id=a.record.session_id,
                llm_call_id=placement.call_id,
                emitted_ns=end_ns,
            )

    def _remember_reply(self, a: AgentState, reply: dict[str, Any] | None) -> None:
        """Index an agent's last reply by its text when it is text only (rule 6 looks it up)."""
        aid = a.record.id
        old = self._reply_of.pop(aid, None)
        if old is not None and self._by_reply.get(old) == aid:
            del self._by_reply[old]
        text = content_text((reply or {}).get("content")).strip()
        if reply is not None and not reply.get("tool_calls") and len(text) >= REBUILT_MIN_CHARS:
            self._by_reply[hash(text)] = aid
            self._reply_of[aid] = hash(text)

    def rebuilt(
        self, messages: list[dict[str, Any]], session_id: str | None
    ) -> tuple[AgentState, int] | None:
        """Rule 6: the agent whose last reply (text only, answered, not in flight) the call
        carries, followed by more messages, and where its new messages start; the latest such
        reply in the call wins."""
        for k in range(len(messages) - 2, -1, -1):
            m = messages[k]
            if m.get("role") != "assistant" or m.get("tool_calls"):
                continue
            aid = self._by_reply.get(hash(content_text(m.get("content")).strip()))
            a = self.agents.get(aid) if aid else None
            if a is None or a.in_flight or a.last_reply is None or not same_reply(a.last_reply, m):
                continue
            if session_id is None or a.record.session_id == session_id:
                return a, k + 1
        return None

    def unanswered(self) -> list[Outstanding]:
        """Tool calls still waiting for their result."""
        seen: set[int] = set()
        out = []
        for o in self.outstanding.values():
            if id(o) not in seen:
                seen.add(id(o))
                out.append(o)
        return out


def header_session_id(hint: str) -> str:
    """The trace's id of the session a session header names."""
    return "h-" + _SAFE.sub("_", hint)[:64]
