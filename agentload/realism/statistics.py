"""The statistics of ``agentload realism``: each defined once, computed the same way for our
traces and for a corpus of real ones, from the trace model alone (lengths, agents, timings,
``turn``), so a content-free import and a full generated trace are measured alike.

Every statistic has a **unit**: a call, an agent or a session. ``observe(trace)`` returns, per
session, the unit values of each statistic (``Observations``). A call statistic is summarized
per session by its median (the band of ``judge`` is over per-session medians, so one long
session does not outweigh the others); an agent or session statistic's values are its units.

Times are read on the trace's timeline with its modeled waits (``trace.timeline``,
``GapMode.MODELED``) unless asked otherwise. ``STATISTICS`` lists them in table order; the
definitions (``Statistic.definition``) are the text of docs/realism.md.
"""

from __future__ import annotations

import itertools
import statistics as pystats
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from agentload.trace.samples import call_end_ns, completion_tokens, reuse_by_session, tool_kind
from agentload.trace.schema import LLMCallRecord, TurnKind
from agentload.trace.timeline import GapMode, turn_of, with_gaps
from agentload.trace.trace import Trace

__all__ = [
    "STATISTICS",
    "AgentView",
    "Observations",
    "SessionView",
    "Statistic",
    "Unit",
    "observe",
    "session_views",
    "statistic",
]

_NS = 1e9
REUSE_BLOCK = 64
"""Cache reuse is counted in blocks of this many tokens (the Weka format's), so a trace of
16-token blocks and one of 64 are measured alike."""


class Unit(StrEnum):
    """What one value of a statistic describes."""

    CALL = "call"
    AGENT = "agent"
    SESSION = "session"


class Kind(StrEnum):
    """How a value reads: a token count, seconds, a count, a share."""

    TOKENS = "tokens"
    SECONDS = "s"
    COUNT = "count"
    SHARE = "share"


@dataclass
class Gap:
    """One gap before an agent's call: its length (s), what the call appends, and the kind
    of the tool that ended last before it (None when it follows no tool call)."""

    seconds: float
    turn: TurnKind | None
    tool: str | None
    root: bool


@dataclass
class AgentView:
    """One agent of a session: its calls in order, whether it is the root, its gaps."""

    calls: list[LLMCallRecord]
    root: bool
    prompts: list[int]
    outputs: list[int]
    gaps: list[Gap] = field(default_factory=list)


@dataclass
class SessionView:
    """What the statistics read of one session."""

    id: str
    agents: list[AgentView]
    wall_s: float
    reuse: tuple[int, int]
    root_request_s: float = 0.0
    """The time the root agents' requests were in flight (submit to end), summed."""

    @property
    def roots(self) -> list[AgentView]:
        return [a for a in self.agents if a.root]

    @property
    def subs(self) -> list[AgentView]:
        return [a for a in self.agents if not a.root]


@dataclass(frozen=True)
class Statistic:
    """One statistic: its key, its title, its unit and kind, the sentence that defines it,
    and the function giving a session's unit values."""

    key: str
    title: str
    unit: Unit
    kind: Kind
    definition: str
    values: Callable[[SessionView], list[float]]
    timed: bool = False
    """Read on the timeline (gaps, wall time): carries the modeled waits of a trace that has
    them."""


def _growth(a: AgentView) -> list[float]:
    return [float(c - p) for p, c in itertools.pairwise(a.prompts)]


def _appended(a: AgentView) -> list[float]:
    return [
        float(a.prompts[i] - a.prompts[i - 1] - a.outputs[i - 1]) for i in range(1, len(a.calls))
    ]


def _gaps(s: SessionView, turn: TurnKind, root_only: bool, tool: str | None = None) -> list[float]:
    return [
        g.seconds
        for a in s.agents
        if a.root or not root_only
        for g in a.gaps
        if g.turn is turn and (tool is None or g.tool == tool)
    ]


def _per_call(f: Callable[[AgentView], list[float]]) -> Callable[[SessionView], list[float]]:
    return lambda s: [x for a in s.agents for x in f(a)]


def _has_subs(s: SessionView) -> bool:
    return any(a.calls for a in s.subs)


STATISTICS: tuple[Statistic, ...] = (
    Statistic(
        "output_tokens_per_call",
        "output tokens per call",
        Unit.CALL,
        Kind.TOKENS,
        "each call's completion tokens (the server's count, else ours)",
        _per_call(lambda a: [float(x) for x in a.outputs]),
    ),
    Statistic(
        "prompt_growth_per_call",
        "prompt growth per call",
        Unit.CALL,
        Kind.TOKENS,
        "each call's prompt tokens less its agent's previous call's (every call but an "
        "agent's first; negative after a compaction)",
        _per_call(_growth),
    ),
    Statistic(
        "appended_tokens_per_call",
        "tokens appended per call",
        Unit.CALL,
        Kind.TOKENS,
        "the prompt growth less the previous call's output tokens: what the prompt gained "
        "besides the model's own answer (tool results, a user's message)",
        _per_call(_appended),
    ),
    Statistic(
        "gap_after_tool_s",
        "gap before a call that follows tool results",
        Unit.CALL,
        Kind.SECONDS,
        "for each call whose prompt appends tool results (`turn` tool), its submit less its "
        "agent's previous call's end: the tools' run time and the loop's wait",
        lambda s: _gaps(s, TurnKind.TOOL, root_only=False),
        timed=True,
    ),
    Statistic(
        "gap_before_user_s",
        "gap before a user turn",
        Unit.CALL,
        Kind.SECONDS,
        "for each user turn of a root agent after its first call, its submit less the "
        "previous call's end: the person reading and typing",
        lambda s: _gaps(s, TurnKind.USER, root_only=True),
        timed=True,
    ),
    Statistic(
        "first_prompt_tokens_root",
        "first prompt, root agent",
        Unit.AGENT,
        Kind.TOKENS,
        "the prompt tokens of each root agent's first call",
        lambda s: [float(a.prompts[0]) for a in s.roots if a.calls],
    ),
    Statistic(
        "last_prompt_tokens_root",
        "prompt at the root agent's last call",
        Unit.AGENT,
        Kind.TOKENS,
        "the prompt tokens of each root agent's last call: where its context grew to",
        lambda s: [float(a.prompts[-1]) for a in s.roots if a.calls],
    ),
    Statistic(
        "calls_per_root_agent",
        "calls per root agent",
        Unit.AGENT,
        Kind.COUNT,
        "the calls of each root agent",
        lambda s: [float(len(a.calls)) for a in s.roots if a.calls],
    ),
    Statistic(
        "user_turns_per_session",
        "user turns per session",
        Unit.SESSION,
        Kind.COUNT,
        "the calls of a session's root agents that are user turns (`turn` user), the first "
        "included",
        lambda s: [float(sum(1 for a in s.roots for g in _turns(a) if g is TurnKind.USER))],
    ),
    Statistic(
        "first_prompt_tokens_sub",
        "first prompt, sub-agent",
        Unit.AGENT,
        Kind.TOKENS,
        "the prompt tokens of each sub-agent's first call",
        lambda s: [float(a.prompts[0]) for a in s.subs if a.calls],
    ),
    Statistic(
        "calls_per_subagent",
        "calls per sub-agent",
        Unit.AGENT,
        Kind.COUNT,
        "the calls of each sub-agent",
        lambda s: [float(len(a.calls)) for a in s.subs if a.calls],
    ),
    Statistic(
        "subagents_per_session",
        "sub-agents per session (sessions that have any)",
        Unit.SESSION,
        Kind.COUNT,
        "the sub-agents that made a call, per session that has one",
        lambda s: [float(sum(1 for a in s.subs if a.calls))] if _has_subs(s) else [],
    ),
    Statistic(
        "subagent_call_share",
        "share of calls made by sub-agents (sessions that have any)",
        Unit.SESSION,
        Kind.SHARE,
        "per session with a sub-agent's call, its sub-agents' calls over all its calls",
        lambda s: (
            [sum(len(a.calls) for a in s.subs) / sum(len(a.calls) for a in s.agents)]
            if _has_subs(s)
            else []
        ),
    ),
    Statistic(
        "session_wall_s",
        "session wall time, less the root agent's requests",
        Unit.SESSION,
        Kind.SECONDS,
        "each session's first call's submit to its last call's end, less the time its root "
        "agents' requests were in flight (the server's time, which a replay takes from its "
        "target): the tools', the sub-agents' and the people's time",
        lambda s: [s.wall_s - s.root_request_s] if s.wall_s > 0 else [],
        timed=True,
    ),
    Statistic(
        "prefix_reuse",
        "cache reuse (share of prompt tokens already sent)",
        Unit.SESSION,
        Kind.SHARE,
        "per session, its prompt tokens whose 64-token block it had already sent earlier "
        "(chained block hashes, regrouped; a trace of another size at its own) over all its "
        "prompt tokens",
        lambda s: [s.reuse[0] / s.reuse[1]] if s.reuse[1] else [],
    ),
)
"""The statistics in table order."""


def _turns(a: AgentView) -> list[TurnKind | None]:
    first: list[TurnKind | None] = [TurnKind.USER] if a.root and a.calls else []
    return first + [g.turn for g in a.gaps]


def statistic(key: str) -> Statistic:
    """The statistic of ``key``; ``gap_after_tool_s.KIND`` is the gap after tool results of
    that tool kind (``trace.samples.tool_kind``)."""
    for s in STATISTICS:
        if s.key == key:
            return s
    base, _, tool = key.partition(".")
    if base == "gap_after_tool_s" and tool:
        return Statistic(
            key,
            f"gap before a call that follows tool results: {tool}",
            Unit.CALL,
            Kind.SECONDS,
            f"the gaps after tool results whose last-ending tool is of kind {tool}",
            lambda s: _gaps(s, TurnKind.TOOL, root_only=False, tool=tool),
            timed=True,
        )
    raise KeyError(key)


@dataclass
class Observations:
    """Per statistic key, per session, the unit values."""

    values: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    tool_kinds: set[str] = field(default_factory=set)
    sessions: int = 0

    def extend(self, other: Observations, prefix: str = "") -> None:
        """Pool ``other`` into these (its session ids prefixed, so two files never merge)."""
        for key, by_session in other.values.items():
            mine = self.values.setdefault(key, {})
            for sid, xs in by_session.items():
                mine[prefix + sid] = xs
        self.tool_kinds |= other.tool_kinds
        self.sessions += other.sessions

    def units(self, key: str) -> list[float]:
        """The values a band is taken over: per-session medians for a call statistic, else
        every unit."""
        by_session = self.values.get(key, {})
        if statistic(key).unit is Unit.CALL:
            return [float(pystats.median(xs)) for xs in by_session.values() if xs]
        return [x for xs in by_session.values() for x in xs]

    def pooled(self, key: str) -> list[float]:
        """Every unit value, pooled over sessions (the distance is taken over these)."""
        return [x for xs in self.values.get(key, {}).values() for x in xs]


def _last_tools(trace: Trace) -> dict[str, str]:
    """Per llm_call id, the kind of its tool call (not a delegation) that ended last."""
    ends: dict[str, tuple[int, str]] = {}
    for tc in trace.tool_calls.values():
        if tc.child_agent_id is not None or tc.name == "delegate":
            continue
        old = ends.get(tc.llm_call_id)
        if old is None or tc.end_ns >= old[0]:
            ends[tc.llm_call_id] = (tc.end_ns, tool_kind(tc.name))
    return {k: kind for k, (_, kind) in ends.items()}


def _agent_view(
    trace: Trace, calls: list[LLMCallRecord], root: bool, tools: dict[str, str]
) -> AgentView:
    view = AgentView(
        calls=calls,
        root=root,
        prompts=[trace.prompt_tokens(c) for c in calls],
        outputs=[completion_tokens(c) for c in calls],
    )
    for prev, cur in itertools.pairwise(calls):
        seconds = max(0, cur.timings.submit_ns - call_end_ns(prev)) / _NS
        view.gaps.append(Gap(seconds, turn_of(trace, cur), tools.get(prev.id), root))
    return view


def session_views(trace: Trace, mode: GapMode = GapMode.MODELED) -> list[SessionView]:
    """Each session of ``trace`` as the statistics read it, times on ``mode``'s timeline."""
    timed = with_gaps(trace, mode)
    tools = _last_tools(timed)
    by_session: dict[str, list[str]] = defaultdict(list)
    for aid in dict.fromkeys(c.agent_id for c in timed.calls.values()):
        by_session[timed.calls_of(aid)[0].session_id].append(aid)
    reuse = reuse_by_session(trace, REUSE_BLOCK)
    views = []
    for sid, aids in by_session.items():
        agents = []
        lo = hi = None
        for aid in aids:
            calls = timed.calls_of(aid)
            rec = timed.agents.get(aid)
            root = rec is None or rec.parent_agent_id is None
            agents.append(_agent_view(timed, calls, root, tools))
            for c in calls:
                lo = c.timings.submit_ns if lo is None else min(lo, c.timings.submit_ns)
                hi = call_end_ns(c) if hi is None else max(hi, call_end_ns(c))
        wall = ((hi or 0) - (lo or 0)) / _NS
        busy = sum(call_end_ns(c) - c.timings.submit_ns for a in agents if a.root for c in a.calls)
        views.append(
            SessionView(
                id=sid,
                agents=agents,
                wall_s=wall,
                reuse=reuse.get(sid, (0, 0)),
                root_request_s=busy / _NS,
            )
        )
    return views


def observe(trace: Trace, mode: GapMode = GapMode.MODELED) -> Observations:
    """Every statistic's unit values per session of ``trace``, times on ``mode``'s timeline."""
    views = session_views(trace, mode)
    out = Observations(sessions=len(views))
    for view in views:
        for a in view.agents:
            out.tool_kinds.update(g.tool for g in a.gaps if g.tool is not None)
    for view in views:
        for stat in STATISTICS:
            out.values.setdefault(stat.key, {})[view.id] = stat.values(view)
        for kind in sorted(out.tool_kinds):
            st = statistic(f"gap_after_tool_s.{kind}")
            out.values.setdefault(st.key, {})[view.id] = st.values(view)
    return out
