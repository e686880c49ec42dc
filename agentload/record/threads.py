"""Who sent a call: sessions and agents rebuilt from the conversations the proxy sees.

A request carries its whole conversation (in the chat form, ``agentload.wire``), so the proxy
can tell which agent sent it. The rules, in this order (docs/record.md):

1. **Headers name the session.** A request with the session header (``--session-header``), or
   else with an agent's own session header (``NATIVE_SESSION_HEADERS``: Claude Code's
   ``x-claude-code-session-id``, Codex's ``session-id``), belongs to that session; with the
   agent header too, to that agent of it (created at its first call). The rules below then
   apply within that session only.
2. **Continuation.** A call whose messages start with an agent's previous request followed by
   that request's reply is that agent's next call (``seq`` + 1). The reply is compared as the
   agent carries it on (``same_reply``): the same tool-call count and names; each argument the
   model gave there with an equal value (strings up to surrounding whitespace; extra keys, the
   defaults a client fills in, allowed; malformed arguments, not a JSON object, match whatever
   repair the agent carries on); the same text up to surrounding whitespace; tool-call ids may
   differ (agents, ``generate`` among them, renumber them). After a failed call (no reply) the
   same prompt, or any extension of it, continues the agent. The longest match wins. An exact
   repeat of a prompt whose reply came back continues nothing (two sessions that start alike).
3. **Child by id.** A call that continues no agent and whose history carries the id of a call
   of the model (an assistant message's tool-call id, a tool message's ``tool_call_id``) that
   is still outstanding (emitted, no result seen yet), or that was a delegation-like call
   answered already (Codex's ``spawn_agent`` is answered at once; the last 4,096 are kept), is a
   sub-agent of that call: of several, the one whose task text (rule 5) it carries, else the
   one carried last. A handoff (the new agent takes over the conversation) and a forked
   sub-agent are linked so. By name: a new agent whose headers name it (``native.Identity``)
   is the sub-agent of the answered delegation-like call of its session whose JSON result
   gives one of its names (Codex's ``{"agent_id": THREAD}``); when it came before that result,
   the result links it then (``Placement.linked_agents``). Such an agent carrying several
   calls' ids that neither names nor task text tell apart waits for that result. An agent a
   header names closes only its own calls (a fork carries its parent's results).
4. **Dropped reply.** A call that extends an agent's previous request (not in flight, its reply
   received) with anything but an assistant message first is that agent's next call: the agent
   dropped the reply (malformed, say) and asked again. The longest match wins.
5. **Child by task text.** A call that starts while delegation-like calls are outstanding (or
   answered without a sub-agent yet: the last 256) is a sub-agent of the one whose longest
   string argument (12 characters or more) appears in its messages (a delegation: the task
   text becomes the sub-agent's prompt); with a rule 4 match, in the messages after that
   agent's prompt only. A call is
   *delegation-like* (``delegation_like``) when its tool's name, lower-cased, is ``task`` or
   ``agent``, contains ``agent``, or starts with ``delegate``, ``transfer_to_``, ``handoff`` or
   ``spawn``; when its arguments have a string ``subagent_type``, ``agent_type``, ``task``,
   ``prompt`` or ``input``; or when a call of the same tool name already got a sub-agent by id
   (rule 3) in this recording. No other call is ever a parent by text: a plain tool call of
   another session that happens to name the same text stays a plain tool call. Without a
   session header, a thread that opens with the same system messages as a root agent's first
   call is another session of that agent, not a delegation (its first prompt may well quote
   text of another session's call).
6. **New session.** Anything else starts a new session with a root agent (a new root agent of
   the session a header names).

A sub-agent's ``parent_tool_call_id`` is its call. A tool result (a ``tool`` message answering
an outstanding call) in any request closes that call: it becomes a ``tool_call`` record, timed
from the reply that emitted it to the request that carries its result (``observed_by: proxy``).
The continuing call ``depends_on`` each result it carries: the sub-agents that ran under a call,
else the call itself. A call's sub-agents end when its result is seen. An answered call that
gets its sub-agent later (rule 3) has its ``tool_call`` record written again, with
``child_agent_id`` (the last record of an id is the one that counts, as for agents).

Everything here is synchronous and in memory: ``Threads.route`` places one request, and
``Threads.answered`` records its reply, both on the proxy's event loop in arrival order.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentload.recorder.schema import AgentRecord, SessionRecord

__all__ = [
    "AgentState",
    "Outstanding",
    "Placement",
    "Threads",
    "delegation_like",
    "same_reply",
]

_MIN_ARG = 12
_SAFE = re.compile(r"[^A-Za-z0-9_.:-]")
_KEEP_ANSWERED = 4096
"""Answered delegation-like calls remembered for rule 3 (the oldest are forgotten first)."""
_KEEP_UNCLAIMED = 256
"""Of those, the ones without a sub-agent yet that rule 5 may match (the oldest forgotten)."""
_DELEGATION_NAME = re.compile(r"^(task|delegate.*|transfer_to_.*|handoff.*|spawn.*|.*agent.*)$")
_DELEGATION_ARGS = ("subagent_type", "agent_type", "task", "prompt", "input")


def delegation_like(name: str, arguments: str) -> bool:
    """Whether a tool call looks like a delegation by its name or arguments (rule 5)."""
    if _DELEGATION_NAME.match(name.lower()):
        return True
    args = _args_value(arguments)
    return isinstance(args, dict) and any(isinstance(args.get(k), str) for k in _DELEGATION_ARGS)


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


def _args_value(text: str) -> Any:
    try:
        return orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return text


def _text(content: Any) -> str:
    """The text of a chat message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _covers(mine: Any, theirs: Any) -> bool:
    """Whether the value the agent carries (``theirs``) is the model's (``mine``): every key
    there with an equal value (extra keys allowed), lists item by item, strings up to
    surrounding whitespace."""
    if isinstance(mine, dict):
        return isinstance(theirs, dict) and all(
            k in theirs and _covers(v, theirs[k]) for k, v in mine.items()
        )
    if isinstance(mine, list):
        return (
            isinstance(theirs, list)
            and len(mine) == len(theirs)
            and all(_covers(a, b) for a, b in zip(mine, theirs, strict=True))
        )
    if isinstance(mine, str):
        return isinstance(theirs, str) and mine.strip() == theirs.strip()
    if isinstance(mine, bool) or isinstance(theirs, bool):
        return mine is theirs
    return bool(mine == theirs)


def same_reply(reply: dict[str, Any], carried: dict[str, Any]) -> bool:
    """Whether ``carried`` (a message of a later request) is ``reply`` as the agent carries it
    on (rule 2 of the module docstring)."""
    if carried.get("role") != "assistant":
        return False
    a, b = reply.get("tool_calls") or [], carried.get("tool_calls") or []
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        fx, fy = x.get("function") or {}, y.get("function") or {}
        if fx.get("name") != fy.get("name"):
            return False
        mine = _args_value(str(fx.get("arguments", "")))
        if not isinstance(mine, dict):
            continue  # malformed (cut at max_tokens, not an object): agents repair it their way
        if not _covers(mine, _args_value(str(fy.get("arguments", "")))):
            return False
    return _text(reply.get("content")).strip() == _text(carried.get("content")).strip()


class _Prefixes:
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


class Threads:
    """The sessions and agents of one recording (see the module docstring)."""

    def __init__(self) -> None:
        self.agents: dict[str, AgentState] = {}
        self.sessions: dict[str, SessionRecord] = {}
        self.outstanding: dict[str, Outstanding] = {}  # by server id and by client id
        self._answered: OrderedDict[str, Closed] = OrderedDict()  # delegation-like, both ids
        self._unclaimed: OrderedDict[str, Closed] = OrderedDict()  # of those, still childless
        self._spawners: set[str] = set()  # tool names that got a sub-agent by id (rule 3)
        self._prefixes = _Prefixes()
        self._by_header: dict[tuple[str, str], str] = {}
        self._n_sessions = 0
        self._n_agents: dict[str, int] = {}  # agents so far, by session
        self._root_static: set[tuple[str, ...]] = set()  # leading system message ids of roots

    # -- placing a request -------------------------------------------------------------------
    def route(
        self,
        messages: list[dict[str, Any]],
        ids: list[str],
        now_ns: int,
        session_hint: str | None = None,
        agent_hint: str | None = None,
        names: tuple[str, ...] = (),
    ) -> Placement:
        """Place a request (its chat messages and their content ids) arriving at ``now_ns``;
        the hints and names are what its headers say (``native.identity``)."""
        session_id: str | None = None
        new_session: SessionRecord | None = None
        if session_hint:
            session_id, new_session = self._session_for(session_hint, now_ns)
        hashes = _Prefixes.hashes(ids)
        agent: AgentState | None = None
        new_from = 0
        carried: dict[str, Any] | None = None
        relinked: list[Closed] = []
        if session_id is not None and agent_hint:
            aid = self._by_header.get((session_id, agent_hint))
            agent = self.agents.get(aid) if aid else None
            if agent is not None and agent.last_ids is not None:
                new_from, carried = self._resume_point(agent, messages, ids)
        placement_new: AgentRecord | None = None
        if agent is None:
            retry: tuple[AgentState, int] | None = None
            if not (session_id is not None and agent_hint):
                agent, new_from, carried, retry = self._continuation(messages, hashes, session_id)
            if agent is None:
                parent, answered = self._parent_by_name(names, session_id)
                if parent is None:
                    parent, answered = self._parent_by_id(messages, session_id, names)
                if parent is not None:
                    self._spawners.add(parent.name)
                else:
                    # rule 5; with a rule 4 match, only its new messages can hold a task text
                    static = _static_ids(messages, ids)
                    start = retry[1] if retry is not None else 0
                    parent, answered = self._parent_by_text(messages, start, session_id, static)
                    if parent is None and retry is not None:
                        agent, new_from = retry  # rule 4: it dropped its reply and asked again
                    elif parent is None and static:
                        self._root_static.add(static)
                if answered is not None:
                    relinked.append(answered)
                if parent is not None:
                    self._unclaimed.pop(parent.server_id, None)
                if agent is None:
                    if parent is None and session_id is None:
                        session_id, new_session = self._new_session(now_ns)
                    elif parent is not None:
                        session_id = parent.session_id
                    assert session_id is not None
                    agent = self._new_agent(session_id, parent, now_ns, agent_hint)
                    agent.names = names
                    placement_new = agent.record
                    if parent is not None:
                        parent.children.append(agent.record.id)
        if carried is not None and agent.last_reply is not None:
            self._learn_client_ids(agent.last_reply, carried)
        # An agent a header names closes only its own calls: a fork's history carries its
        # parent's results (Codex: "aborted" for a spawn still running), the parent the real ones.
        own = agent.record.id if agent_hint else None
        closed, ended, linked = self._close_results(messages[new_from:], now_ns, own)
        depends: list[str] = []
        for c in closed:
            if c.call.agent_id == agent.record.id:
                depends.extend(c.call.children or [c.call.id])
        seq = agent.seq
        agent.seq += 1
        agent.in_flight += 1
        call_id = f"{agent.record.id}.{seq}"
        agent.last_ids, agent.last_reply, agent.last_call_id = list(ids), None, call_id
        self._prefixes.put(agent.record.id, ids, hashes)
        return Placement(
            agent, call_id, seq, depends, new_session, placement_new, closed + relinked, ended,
            linked,
        )  # fmt: skip

    def _resume_point(
        self, agent: AgentState, messages: list[dict[str, Any]], ids: list[str]
    ) -> tuple[int, dict[str, Any] | None]:
        """Where the new messages of an agent's call start (after its last prompt and reply)."""
        last = agent.last_ids or []
        k = len(last)
        if ids[:k] != last:
            return 0, None
        if (
            agent.last_reply is not None
            and k < len(messages)
            and same_reply(agent.last_reply, messages[k])
        ):
            return k + 1, messages[k]
        return k, None

    def _continuation(
        self, messages: list[dict[str, Any]], hashes: list[int], session_id: str | None
    ) -> tuple[AgentState | None, int, dict[str, Any] | None, tuple[AgentState, int] | None]:
        """Rule 2: the agent a call continues, where its new messages start and the reply as
        carried; else (None, 0, None, rule 4's agent and where its new messages start)."""
        retry: tuple[AgentState, int] | None = None
        for k in range(len(messages), 0, -1):
            for aid in self._prefixes.at(k, hashes[k]):
                a = self.agents[aid]
                if a.in_flight or (session_id is not None and a.record.session_id != session_id):
                    continue
                if a.last_reply is None:
                    return a, k, None, None
                if k < len(messages):
                    if same_reply(a.last_reply, messages[k]):
                        return a, k + 1, messages[k], None
                    if retry is None and messages[k].get("role") != "assistant":
                        retry = (a, k)
        return None, 0, None, retry

    def _parent_by_name(
        self, names: tuple[str, ...], session_id: str | None
    ) -> tuple[Outstanding | None, Closed | None]:
        """Rule 3, by name: the answered delegation-like call of the session whose result
        names the new agent (a string of its JSON equal to one of ``names``)."""
        if not names or session_id is None:
            return None, None
        for c in reversed(self._unclaimed.values()):
            if c.call.session_id == session_id and _names_in(c.result) & set(names):
                return c.call, c
        return None, None

    def _parent_by_id(
        self, messages: list[dict[str, Any]], session_id: str | None, names: tuple[str, ...] = ()
    ) -> tuple[Outstanding | None, Closed | None]:
        """Rule 3: the call a new thread's history carries the id of, if it is outstanding or
        an answered delegation-like call; that call's close when answered. Of several, the one
        whose result, as the thread carries it, gives one of the thread's ``names``; else the
        one whose task text (rule 5) the thread carries; else, for a thread with names, none
        yet (the result that names it will link it); else the one carried last."""
        if not self.outstanding and not self._answered:
            return None, None
        found: list[tuple[Outstanding, Closed | None]] = []
        for m in reversed(messages):
            carried = [str(tc.get("id", "")) for tc in m.get("tool_calls") or ()]
            if m.get("tool_call_id"):
                carried.append(str(m["tool_call_id"]))
            for cid in reversed(carried):
                o = self.outstanding.get(cid)
                c = self._answered.get(cid) if o is None else None
                if c is not None:
                    o = c.call
                if (
                    o is not None
                    and (session_id is None or o.session_id == session_id)
                    and all(o is not f[0] for f in found)
                ):
                    found.append((o, c))
        if len(found) > 1 and names:
            wanted = set(names)
            for m in messages:
                if m.get("role") == "tool" and _names_in(_text(m.get("content"))) & wanted:
                    cid = str(m.get("tool_call_id", ""))
                    for f in found:
                        if cid in (f[0].server_id, f[0].client_id):
                            return f
        if len(found) > 1:
            by_text = _best_by_text(found, _thread_text(messages, 0))
            if by_text is not None:
                return by_text
            if names:  # no guess: the spawn's result will name it (Codex forks a spawn that
                return None, None  # is still running with its output "aborted")
        return found[0] if found else (None, None)

    def _parent_by_text(
        self,
        messages: list[dict[str, Any]],
        start: int,
        session_id: str | None,
        static: tuple[str, ...],
    ) -> tuple[Outstanding | None, Closed | None]:
        """Rule 5: the delegation-like call, outstanding or answered without a sub-agent yet,
        whose task text ``messages[start:]`` carry; that call's close when answered."""
        pending: list[tuple[Outstanding, Closed | None]] = [
            (o, None)
            for key, o in self.outstanding.items()
            if key == o.server_id
            and (session_id is None or o.session_id == session_id)
            and self._delegating(o)
        ]
        pending.extend(
            (c.call, c)
            for c in self._unclaimed.values()
            if session_id is None or c.call.session_id == session_id
        )
        if not pending or (session_id is None and static and static in self._root_static):
            return None, None  # nothing delegated, or another session of a root agent
        return _best_by_text(pending, _thread_text(messages, start)) or (None, None)

    def _delegating(self, o: Outstanding) -> bool:
        return delegation_like(o.name, o.arguments) or o.name in self._spawners

    def _session_for(self, hint: str, now_ns: int) -> tuple[str, SessionRecord | None]:
        """The session a session header names (created at its first request)."""
        sid = "h-" + _SAFE.sub("_", hint)[:64]
        if sid in self.sessions:
            return sid, None
        rec = SessionRecord(id=sid, start_ns=now_ns, meta={"from_header": hint[:200]})
        self.sessions[sid] = rec
        return sid, rec

    def _new_session(self, now_ns: int) -> tuple[str, SessionRecord]:
        sid = f"p{self._n_sessions}"
        self._n_sessions += 1
        rec = SessionRecord(id=sid, start_ns=now_ns)
        self.sessions[sid] = rec
        return sid, rec

    def _new_agent(
        self, session_id: str, parent: Outstanding | None, now_ns: int, header_name: str | None
    ) -> AgentState:
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
            done = Closed(o, _text(m.get("content")), args, now_ns)
            closed.append(done)
            for child in o.children:
                c = self.agents.get(child)
                if c is not None and c.record.end_ns is None and not c.in_flight:
                    c.record.end_ns = c.last_end_ns or now_ns
                    ended.append(c.record)
            if self._delegating(o):
                self._remember(done)
                if not o.children:  # a sub-agent that started before its spawn was answered
                    linked.extend(self._link_by_name(o, done.result))
                if not o.children:
                    self._unclaimed[o.server_id] = done
                    while len(self._unclaimed) > _KEEP_UNCLAIMED:
                        self._unclaimed.popitem(last=False)
        return closed, ended, linked

    def _link_by_name(self, o: Outstanding, result: str) -> list[AgentRecord]:
        """Rule 3, by name, the other way round: the root agents of the call's session,
        started before its result was seen, that the result names become its sub-agents."""
        named = _names_in(result)
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

    def unanswered(self) -> list[Outstanding]:
        """Tool calls still waiting for their result."""
        seen: set[int] = set()
        out = []
        for o in self.outstanding.values():
            if id(o) not in seen:
                seen.add(id(o))
                out.append(o)
        return out


def _thread_text(messages: list[dict[str, Any]], start: int) -> str:
    return "\n".join(_text(m.get("content")) for m in messages[start:])


def _best_by_text(
    candidates: list[tuple[Outstanding, Closed | None]], text: str
) -> tuple[Outstanding, Closed | None] | None:
    """The candidate call whose string argument (12 characters or more) ``text`` carries:
    one delegation-like by itself first, then the longest argument; among equals, the call
    with the fewest children, then the latest emitted (a sub-agent starts right after its
    call)."""
    best: tuple[tuple[bool, int, int, int], tuple[Outstanding, Closed | None]] | None = None
    for o, c in candidates:
        for s in _strings(_args_value(o.arguments)):
            if len(s) >= _MIN_ARG and s in text:
                score = (
                    delegation_like(o.name, o.arguments),
                    len(s),
                    -len(o.children),
                    o.emitted_ns,
                )
                if best is None or score > best[0]:
                    best = (score, (o, c))
    return best[1] if best else None


def _names_in(result: str) -> set[str]:
    """The strings of a tool result that is a JSON object or list (Codex's ``spawn_agent``
    answers ``{"agent_id": ...}``); empty for any other result."""
    text = result.strip()
    if not text.startswith(("{", "[")) or len(text) > 65_536:
        return set()
    try:
        return set(_strings(orjson.loads(text)))
    except orjson.JSONDecodeError:
        return set()


def _static_ids(messages: list[dict[str, Any]], ids: list[str]) -> tuple[str, ...]:
    """The content ids of a request's leading system (or developer) messages."""
    out = []
    for m, mid in zip(messages, ids, strict=False):
        if m.get("role") not in ("system", "developer"):
            break
        out.append(mid)
    return tuple(out)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _role(parent: Outstanding | None) -> str:
    """``agent`` for a root; for a sub-agent its kind when the delegating call names one
    (``subagent_type``, ``agent_type``, ``kind``, ``agent``, ``role`` arguments), else the tool's name."""
    if parent is None:
        return "agent"
    args = _args_value(parent.arguments)
    if isinstance(args, dict):
        for key in ("subagent_type", "agent_type", "kind", "agent", "role"):
            v = args.get(key)
            if isinstance(v, str) and 0 < len(v) <= 40:
                return v
    return parent.name or "subagent"
