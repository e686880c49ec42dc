"""Who sent a call: sessions and agents rebuilt from the conversations the proxy sees.

A request carries its whole conversation (in the chat form, ``agentload.wire``), so the proxy
can tell which agent sent it. The rules, in this order (docs/record.md):

1. **Explicit headers win.** A request with the session header (``--session-header``) belongs to
   that session; with the agent header too, to that agent of it (created at its first call).
   The rules below then apply within that session only.
2. **Continuation.** A call whose messages start with an agent's previous request followed by
   that request's reply is that agent's next call (``seq`` + 1). The reply is compared as the
   agent carries it on: same tool-call names and arguments (as JSON values, so re-serialized
   arguments match; malformed ones, not a JSON object, match whatever repair the agent carries
   on) and the same text up to surrounding whitespace; tool-call ids may differ (agents,
   ``generate`` among them, renumber them). After a failed call (no reply) the same
   prompt, or any extension of it, continues the agent. The longest match wins.
3. **Child agent.** A call that continues no agent but starts while tool calls are outstanding
   (emitted, no result seen yet) is a sub-agent of one of them: of the call whose id its
   history carries (a handoff: the new agent takes over the conversation), else of the call
   whose longest string argument (12 characters or more) appears in its messages (a delegation:
   the task text becomes the sub-agent's prompt). Its ``parent_tool_call_id`` is that call. A
   thread that opens with the same system messages as a root agent's first call is another
   session of that agent, not a delegation (its first prompt may well quote a path another
   session's call names), unless its history carries the call's id.
4. **New session.** Anything else starts a new session with a root agent.

A tool result (a ``tool`` message answering an outstanding call) in any request closes that
call: it becomes a ``tool_call`` record, timed from the reply that emitted it to the request
that carries its result (``observed_by: proxy``). The continuing call ``depends_on`` each result
it carries: the sub-agents that ran under a call, else the call itself. A call's sub-agents end
when its result is seen.

Everything here is synchronous and in memory: ``Threads.route`` places one request, and
``Threads.answered`` records its reply, both on the proxy's event loop in arrival order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentload.recorder.schema import AgentRecord, SessionRecord

__all__ = ["AgentState", "Outstanding", "Placement", "Threads", "same_reply"]

_MIN_ARG = 12
_SAFE = re.compile(r"[^A-Za-z0-9_.:-]")


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
    ended_agents: list[AgentRecord] = field(default_factory=list)


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
        if mine != _args_value(str(fy.get("arguments", ""))):
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
        self._prefixes = _Prefixes()
        self._by_header: dict[tuple[str, str], str] = {}
        self._n_sessions = 0
        self._root_static: set[tuple[str, ...]] = set()  # leading system message ids of roots

    # -- placing a request -------------------------------------------------------------------
    def route(
        self,
        messages: list[dict[str, Any]],
        ids: list[str],
        now_ns: int,
        session_hint: str | None = None,
        agent_hint: str | None = None,
    ) -> Placement:
        """Place a request (its chat messages and their content ids) arriving at ``now_ns``."""
        session_id: str | None = None
        new_session: SessionRecord | None = None
        if session_hint:
            session_id, new_session = self._session_for(session_hint, now_ns)
        hashes = _Prefixes.hashes(ids)
        agent: AgentState | None = None
        new_from = 0
        carried: dict[str, Any] | None = None
        if session_id is not None and agent_hint:
            aid = self._by_header.get((session_id, agent_hint))
            agent = self.agents.get(aid) if aid else None
            if agent is not None and agent.last_ids is not None:
                new_from, carried = self._resume_point(agent, messages, ids)
        if agent is None and not (session_id is not None and agent_hint):
            agent, new_from, carried = self._continuation(messages, hashes, session_id)
        placement_new: AgentRecord | None = None
        if agent is None:
            static = _static_ids(messages, ids)
            parent = self._parent(messages, session_id, static)
            if parent is None and static:
                self._root_static.add(static)
            if parent is None and session_id is None:
                session_id, new_session = self._new_session(now_ns)
            elif parent is not None:
                session_id = parent.session_id
            assert session_id is not None
            agent = self._new_agent(session_id, parent, now_ns, agent_hint)
            placement_new = agent.record
            if parent is not None:
                parent.children.append(agent.record.id)
        if carried is not None and agent.last_reply is not None:
            self._learn_client_ids(agent.last_reply, carried)
        closed, ended = self._close_results(messages[new_from:], now_ns)
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
            agent, call_id, seq, depends, new_session, placement_new, closed, ended
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
    ) -> tuple[AgentState | None, int, dict[str, Any] | None]:
        for k in range(len(messages), 0, -1):
            for aid in self._prefixes.at(k, hashes[k]):
                a = self.agents[aid]
                if a.in_flight or (session_id is not None and a.record.session_id != session_id):
                    continue
                if a.last_reply is None:
                    return a, k, None
                if k < len(messages) and same_reply(a.last_reply, messages[k]):
                    return a, k + 1, messages[k]
        return None, 0, None

    def _parent(
        self, messages: list[dict[str, Any]], session_id: str | None, static: tuple[str, ...]
    ) -> Outstanding | None:
        """Rule 3: the outstanding call a new thread is a sub-agent of, if any."""
        pending = [
            o
            for key, o in self.outstanding.items()
            if key == o.server_id and (session_id is None or o.session_id == session_id)
        ]
        if not pending:
            return None
        carried_ids: set[str] = set()
        texts: list[str] = []
        for m in messages:
            for tc in m.get("tool_calls") or ():
                carried_ids.add(str(tc.get("id", "")))
            if m.get("tool_call_id"):
                carried_ids.add(str(m["tool_call_id"]))
            texts.append(_text(m.get("content")))
        for o in reversed(pending):
            if o.server_id in carried_ids or (o.client_id and o.client_id in carried_ids):
                return o
        if static and static in self._root_static:
            return None  # another session of a root agent
        text = "\n".join(texts)
        best: tuple[tuple[int, int, int], Outstanding] | None = None
        for o in pending:
            for s in _strings(_args_value(o.arguments)):
                if len(s) >= _MIN_ARG and s in text:
                    # Longest argument first; among equals, the call with the fewest children,
                    # then the latest emitted (a sub-agent starts right after its call).
                    score = (len(s), -len(o.children), o.emitted_ns)
                    if best is None or score > best[0]:
                        best = (score, o)
        return best[1] if best else None

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
        n = sum(1 for a in self.agents.values() if a.record.session_id == session_id)
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
        self, new: list[dict[str, Any]], now_ns: int
    ) -> tuple[list[Closed], list[AgentRecord]]:
        closed: list[Closed] = []
        ended: list[AgentRecord] = []
        carried_args: dict[str, str] = {}
        for m in new:
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                carried_args[str(tc.get("id", ""))] = str(fn.get("arguments", ""))
            if m.get("role") != "tool":
                continue
            o = self.outstanding.get(str(m.get("tool_call_id", "")))
            if o is None:
                continue
            self.outstanding.pop(o.server_id, None)
            if o.client_id:
                self.outstanding.pop(o.client_id, None)
            args = carried_args.get(o.id, o.arguments)
            closed.append(Closed(o, _text(m.get("content")), args, now_ns))
            for child in o.children:
                c = self.agents.get(child)
                if c is not None and c.record.end_ns is None and not c.in_flight:
                    c.record.end_ns = c.last_end_ns or now_ns
                    ended.append(c.record)
        return closed, ended

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
    (``subagent_type``, ``kind``, ``agent``, ``role`` arguments), else the tool's name."""
    if parent is None:
        return "agent"
    args = _args_value(parent.arguments)
    if isinstance(args, dict):
        for key in ("subagent_type", "kind", "agent", "role"):
            v = args.get(key)
            if isinstance(v, str) and 0 < len(v) <= 40:
                return v
    return parent.name or "subagent"
