"""Whose sub-agent a new thread is: rules 3 and 5 of the threading rules (``threads``).

``Parents`` adds to the bookkeeping (``ledger.Ledger``) the search for the call a thread that
continues no agent was started by: by name (the answered delegation-like call whose result
names the new agent), by id (an outstanding or answered delegation-like call whose id its
history carries), then by task text (a delegation-like call whose long string argument its
messages carry). The rules themselves, and their order, are in ``threads``' docstring.
"""

from __future__ import annotations

from typing import Any

from agentload.record.ledger import AgentState, Closed, Ledger, Outstanding
from agentload.record.matching import (
    args_value,
    content_text,
    delegation_like,
    names_in,
    static_ids,
    strings_in,
    thread_text,
)

__all__ = ["Parents"]

_MIN_ARG = 12


class Parents(Ledger):
    """The ledger of one recording, with rules 3 and 5 (see the module docstring);
    ``threads.Threads`` places requests with it."""

    def _parent(
        self,
        messages: list[dict[str, Any]],
        ids: list[str],
        session_id: str | None,
        names: tuple[str, ...],
        retry: tuple[AgentState, int] | None,
    ) -> tuple[Outstanding | None, Closed | None]:
        """Rules 3 and 5 for a call that continues no agent: the call it is a sub-agent of (by
        name, by id, then by task text) and that call's close when it was answered."""
        parent, answered = self._parent_by_name(names, session_id)
        if parent is None:
            parent, answered = self._parent_by_id(messages, session_id, names)
        if parent is not None:
            self._spawners.add(parent.name)
        else:
            # rule 5; with a rule 4 match, only its new messages can hold a task text
            static = static_ids(messages, ids)
            start = retry[1] if retry is not None else 0
            parent, answered = self._parent_by_text(messages, start, session_id, static)
            if parent is None and retry is None and static:
                self._root_static.add(static)
        if parent is not None:
            self._unclaimed.pop(parent.server_id, None)
        return parent, answered

    def _fork_of(
        self, agent: AgentState, messages: list[dict[str, Any]], new_from: int
    ) -> Outstanding | None:
        """Rule 3, a fork that came first: a call that continues ``agent`` (its last request and
        reply) but whose new messages carry, outside the tool results, the task text of a
        delegation-like call of that reply still waiting for its result is that call's forked
        sub-agent (Qwen Code forks an ``agent`` call with the parent's whole history, the
        spawn's "Fork started" result and then the directive; the fork's first request may
        come before the parent's next one). The parent's own next call carries the results
        only."""
        reply = agent.last_reply or {}
        pending: list[tuple[Outstanding, Closed | None]] = [
            (o, None)
            for tc in reply.get("tool_calls") or ()
            if (o := self.outstanding.get(str(tc.get("id", "")))) is not None
            and self._delegating(o)
        ]
        if not pending:
            return None
        told = "\n".join(
            content_text(m.get("content")) for m in messages[new_from:] if m.get("role") != "tool"
        )
        found = _best_by_text(pending, told)
        if found is None:
            return None
        self._spawners.add(found[0].name)
        return found[0]

    def _parent_by_name(
        self, names: tuple[str, ...], session_id: str | None
    ) -> tuple[Outstanding | None, Closed | None]:
        """Rule 3, by name: the answered delegation-like call of the session whose result
        names the new agent (a string of its JSON equal to one of ``names``)."""
        if not names or session_id is None:
            return None, None
        for c in reversed(self._unclaimed.values()):
            if c.call.session_id == session_id and names_in(c.result) & set(names):
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
                if m.get("role") == "tool" and names_in(content_text(m.get("content"))) & wanted:
                    cid = str(m.get("tool_call_id", ""))
                    for f in found:
                        if cid in (f[0].server_id, f[0].client_id):
                            return f
        if len(found) > 1:
            by_text = _best_by_text(found, thread_text(messages, 0))
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
        if not pending:
            return None, None
        if session_id is None and static and static in self._root_static:
            # another session of a root agent quotes its task; a sub-agent under its parent's
            # own instructions (opencode's) is given the task itself as its user message
            asked = {
                content_text(m.get("content")).strip()
                for m in messages[start:]
                if m.get("role") == "user"
            }
            pending = [p for p in pending if asked & set(strings_in(args_value(p[0].arguments)))]
        return _best_by_text(pending, thread_text(messages, start)) or (None, None)


def _best_by_text(
    candidates: list[tuple[Outstanding, Closed | None]], text: str
) -> tuple[Outstanding, Closed | None] | None:
    """The candidate call whose string argument (12 characters or more) ``text`` carries:
    one delegation-like by itself first, then the longest argument; among equals, the call
    with the fewest children, then the latest emitted (a sub-agent starts right after its
    call)."""
    best: tuple[tuple[bool, int, int, int], tuple[Outstanding, Closed | None]] | None = None
    for o, c in candidates:
        for s in strings_in(args_value(o.arguments)):
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
