"""Which session a new thread belongs to when no header says, and which root agents are side
agents: rule 7 of the threading rules (``threads``).

A side call (a title generated "for this conversation:", a summary, a small-model check) is a
request with instructions of its own made during a session. Without a session header it joins
the session whose root agent's user texts it wraps, or that wraps its own
(``Sides.side_session``); once the recording is over, every root agent of a session but its
main one that delegated nothing is a side agent (``Sides.side_agents``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from agentload.record.ledger import KEEP_UNCLAIMED, AgentState
from agentload.record.matching import user_texts
from agentload.record.parents import Parents

__all__ = ["Sides"]


class Sides(Parents):
    """The ledger with rules 3 and 5 (``Parents``) and rule 7's side calls."""

    def __init__(self) -> None:
        super().__init__()
        self._opened: OrderedDict[str, list[tuple[tuple[str, ...], list[str]]]] = OrderedDict()
        """Sessions no header names → each root agent's leading system ids and user texts."""

    def opened(
        self, session_id: str, static: tuple[str, ...], messages: list[dict[str, Any]]
    ) -> None:
        """Note a root agent of a session no header names: its instructions and user texts."""
        roots = self._opened.setdefault(session_id, [])
        roots.append((static, user_texts(messages)))
        self._opened.move_to_end(session_id)
        while len(self._opened) > KEEP_UNCLAIMED:
            self._opened.popitem(last=False)

    def side_session(self, static: tuple[str, ...], messages: list[dict[str, Any]]) -> str | None:
        """Rule 7: the latest session no header names whose root agent, under other
        instructions, and a new thread are one the other's wrapping: every user text of one is
        inside a user text of the other, and the other says more (a title generated "for this
        conversation:" and the user's request; a summary of it). Two threads with the same
        user texts are two sessions (two runs of one app)."""
        mine = user_texts(messages)
        if not mine:
            return None
        for sid in reversed(self._opened):
            for their_static, theirs in self._opened[sid]:
                if their_static != static and mine != theirs and _wraps(mine, theirs):
                    return sid
        return None

    def side_agents(self) -> list[AgentState]:
        """The side agents, decided once the recording is over: in a session with several root
        agents (none an agent header named), every root but the main one (the most calls, then
        the earliest) that delegated nothing: a title, a summary, a small-model check."""
        named = set(self._by_header.values())
        parents = {a.record.parent_agent_id for a in self.agents.values()}
        roots: dict[str, list[AgentState]] = {}
        for a in self.agents.values():
            if a.record.parent_agent_id is None and a.record.id not in named:
                roots.setdefault(a.record.session_id, []).append(a)
        out: list[AgentState] = []
        for group in roots.values():
            if len(group) < 2:
                continue
            main = max(group, key=lambda a: (a.seq, -a.record.start_ns))
            out.extend(a for a in group if a is not main and a.record.id not in parents)
        return out


def _wraps(a: list[str], b: list[str]) -> bool:
    """Whether every text of ``a`` is inside a text of ``b``, or every text of ``b`` inside one
    of ``a``."""
    return all(any(x in y for y in b) for x in a) or all(any(y in x for x in a) for y in b)
