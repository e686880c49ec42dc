"""Who sent a call: sessions and agents rebuilt from the conversations the proxy sees.

A request carries its whole conversation (in the chat form, ``agentload.wire``), so the proxy
can tell which agent sent it. The rules, in this order (docs/record.md):

1. **Headers name the session.** A request with the session header (``--session-header``), or
   else with an agent's own session header (``NATIVE_SESSION_HEADERS``: Claude Code's
   ``x-claude-code-session-id``, Codex's ``session-id``), belongs to that session; with the
   agent header too, to that agent of it (created at its first call). The rules below then
   apply within that session only.
2. **Continuation.** A call whose messages start with an agent's previous request followed by
   that request's reply is that agent's next call (``seq`` + 1); a reply carried back changed
   (``reply_match``: its text dropped, reworded or in parts, its calls matched by the model's
   own ids or by name and arguments) still is, below one carried exactly. The reply is compared as the
   agent carries it on (``same_reply``): the same tool-call count and names; each argument the
   model gave there with an equal value (strings up to surrounding whitespace; extra keys, the
   defaults a client fills in, allowed; malformed arguments, not a JSON object, match whatever
   repair the agent carries on); the same text up to surrounding whitespace; tool-call ids may
   differ (agents, ``generate`` among them, renumber them). After a failed call (no reply) the
   same prompt, or any extension of it, continues the agent. The longest match wins. An exact
   repeat of a prompt whose reply came back continues nothing (two sessions that start alike).
3. **Forks that come first.** A call that continues an agent by rule 2 but whose new messages
   carry, outside the tool results, the task text of a delegation-like call of that agent's
   reply still waiting for its result is that call's forked sub-agent (``Parents._fork_of``:
   Qwen Code's fork is the parent's history, the spawn's "Fork started", then the directive);
   it closes none of its parent's calls. A fork still working when its call's result comes
   is no dependency of the parent's next call (``Ledger._finished``).
   **Child by id.** A call that continues no agent and whose history carries the id of a call
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
6. **Rebuilt history.** A call that matches none of the above and carries an agent's last reply
   (text only, at least ``REBUILT_MIN_CHARS`` characters, the agent not in flight; in the
   session a header names), followed by more messages, is that agent's next call: the agent
   rebuilt what comes before it (aider re-sends its repository map and the files in the chat
   as they are now, and moves its reminder to its newest message). The latest such reply in
   the call wins.
7. **Side calls, new session.** Without a session header, a thread that would start a new
   session joins the latest session whose root agent, under other instructions, wraps its user
   texts or is wrapped by them (``Sides.side_session``: a title "for this conversation:" and
   the user's request). Anything else starts a new session with a root agent (a new root agent
   of the session a header names). At the end, every root agent of a session but its main one
   (the most calls) that delegated nothing is a side agent, role ``side`` (``side_agents``).

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

from typing import Any

from agentload.record.ledger import AgentState, Closed, Outstanding, Placement, Prefixes
from agentload.record.matching import CHANGED, OTHER, reply_match, static_ids
from agentload.record.sides import Sides
from agentload.trace.schema import AgentRecord, ContextPolicy, SessionRecord

__all__ = ["Threads"]


class Threads(Sides):
    """The sessions and agents of one recording (see the module docstring): ``route`` places a
    request by the rules; the search for a new thread's parent (rules 3 and 5) is ``Parents``';
    the bookkeeping, and ``answered`` for its reply, are ``Ledger``'s."""

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
        hashes = Prefixes.hashes(ids)
        agent, new_from, carried, retry = self._known_agent(
            messages, ids, hashes, session_id, agent_hint
        )
        relinked: list[Closed] = []
        placement_new: AgentRecord | None = None
        forked = self._forked(agent, messages, new_from, now_ns, names, carried, agent_hint)
        if forked is not None:  # rule 3: a fork that came first
            agent, placement_new, carried = forked, forked.record, None
        elif agent is None:
            parent, answered = self._parent(messages, ids, session_id, names, retry)
            if answered is not None:
                relinked.append(answered)
            rebuilt = self.rebuilt(messages, session_id) if parent is None and not retry else None
            if parent is None and retry is not None:
                agent, new_from = retry  # rule 4: it dropped its reply and asked again
            elif rebuilt is not None:
                agent, new_from = rebuilt  # rule 6: it rebuilt what comes before its reply
            else:
                if parent is None and session_id is None:
                    session_id, new_session = self._root_session(messages, ids, now_ns)
                agent = self._new_thread(session_id, parent, now_ns, agent_hint, names)
                if parent is not None and _carries_call(messages, parent.id, parent.server_id):
                    # its parent's history, the spawn in it
                    agent.record.context_policy = ContextPolicy.FORKED
                placement_new = agent.record
        if carried is not None and agent.last_reply is not None:
            self._learn_client_ids(agent.last_reply, carried)
        # An agent a header names closes only its own calls: a fork's history carries its
        # parent's results (Codex: "aborted" for a spawn still running), the parent the real ones.
        own = agent.record.id if agent_hint or forked is not None else None
        closed, ended, linked = self._close_results(messages[new_from:], now_ns, own)
        depends = self._depends(agent, closed)
        seq, call_id = self._next_call(agent, ids, hashes)
        return Placement(
            agent,
            call_id,
            seq,
            depends,
            new_session,
            placement_new,
            closed + relinked,
            ended,
            linked,
        )

    def _depends(self, agent: AgentState, closed: list[Closed]) -> list[str]:
        """What a call of ``agent`` depends on: each tool call of its own whose result it
        carries now, or the sub-agents that call spawned and that have finished."""
        depends: list[str] = []
        for c in closed:
            if c.call.agent_id == agent.record.id:
                done = [a for a in c.call.children if self._finished(a)]
                depends.extend(done or [c.call.id])
        return depends

    def _known_agent(
        self,
        messages: list[dict[str, Any]],
        ids: list[str],
        hashes: list[int],
        session_id: str | None,
        agent_hint: str | None,
    ) -> tuple[AgentState | None, int, dict[str, Any] | None, tuple[AgentState, int] | None]:
        """Rules 1 and 2: the agent a header names, else the agent the call continues; where its
        new messages start, the reply as carried, and rule 4's agent as in ``_continuation``."""
        if session_id is not None and agent_hint:
            aid = self._by_header.get((session_id, agent_hint))
            agent = self.agents.get(aid) if aid else None
            if agent is not None and agent.last_ids is not None:
                new_from, carried = self._resume_point(agent, messages, ids)
                return agent, new_from, carried, None
            return agent, 0, None, None
        return self._continuation(messages, hashes, session_id)

    def _new_thread(
        self,
        session_id: str | None,
        parent: Outstanding | None,
        now_ns: int,
        agent_hint: str | None,
        names: tuple[str, ...],
    ) -> AgentState:
        """The new agent a call starts: a sub-agent of ``parent`` in its session, else a root
        agent of ``session_id``."""
        if parent is not None:
            session_id = parent.session_id
        assert session_id is not None
        agent = self._new_agent(session_id, parent, now_ns, agent_hint)
        agent.names = names
        if parent is not None:
            parent.children.append(agent.record.id)
        return agent

    def _forked(
        self,
        agent: AgentState | None,
        messages: list[dict[str, Any]],
        new_from: int,
        now_ns: int,
        names: tuple[str, ...],
        carried: dict[str, Any] | None,
        agent_hint: str | None,
    ) -> AgentState | None:
        """Rule 3, a fork that came first: the new sub-agent, when the call continuing ``agent``
        is its spawn's fork (``Parents._fork_of``); else None."""
        if agent is None or carried is None or agent_hint:
            return None
        spawn = self._fork_of(agent, messages, new_from)
        if spawn is None:
            return None
        fork = self._new_thread(agent.record.session_id, spawn, now_ns, None, names)
        fork.record.context_policy = ContextPolicy.FORKED
        return fork

    def _root_session(
        self, messages: list[dict[str, Any]], ids: list[str], now_ns: int
    ) -> tuple[str, SessionRecord | None]:
        """Rule 7 without a session header: the session a side call belongs to, else a new one
        (whose root's instructions and user texts are noted for the side calls to come)."""
        static = static_ids(messages, ids)
        joined = self.side_session(static, messages)
        if joined is not None:
            self.opened(joined, static, messages)
            return joined, None
        sid, rec = self._new_session(now_ns)
        self.opened(sid, static, messages)
        return sid, rec

    def _next_call(self, agent: AgentState, ids: list[str], hashes: list[int]) -> tuple[int, str]:
        """Count a placed call against its agent (its ``seq`` and call id), which it leaves in
        flight and with the call's messages as its last request."""
        seq = agent.seq
        agent.seq += 1
        agent.record.end_ns = None  # an agent ended with its call's result may go on (a fork)
        agent.in_flight += 1
        call_id = f"{agent.record.id}.{seq}"
        agent.last_ids, agent.last_reply, agent.last_call_id = list(ids), None, call_id
        self._prefixes.put(agent.record.id, ids, hashes)
        return seq, call_id

    # -- the rules ---------------------------------------------------------------------------

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
            and reply_match(agent.last_reply, messages[k]) >= CHANGED
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
            best: tuple[int, AgentState] | None = None
            for aid in self._prefixes.at(k, hashes[k]):
                a = self.agents[aid]
                if a.in_flight or (session_id is not None and a.record.session_id != session_id):
                    continue
                if a.last_reply is None:
                    return a, k, None, None
                if k < len(messages):
                    score = reply_match(a.last_reply, messages[k])
                    if score > OTHER and (best is None or score > best[0]):
                        best = (score, a)
                    elif retry is None and messages[k].get("role") != "assistant":
                        retry = (a, k)
            if best is not None:
                return best[1], k + 1, messages[k], None
        return None, 0, None, retry


def _carries_call(messages: list[dict[str, Any]], *ids: str) -> bool:
    """Whether an assistant message of ``messages`` made the call of one of ``ids``."""
    return any(
        str(tc.get("id", "")) in ids
        for m in messages
        if m.get("role") == "assistant"
        for tc in m.get("tool_calls") or ()
    )
