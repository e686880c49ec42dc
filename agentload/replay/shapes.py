"""Load shapes and the pool of session instances a point draws from.

``LoadShape`` says how sessions are offered (lanes or Poisson arrivals, bounds, gap scale,
warm-up); ``SessionSource`` hands out session instances round-robin over the plans,
replicated and salted (as each plan's ``salt_at`` says); ``LiveStats`` are the counters a running point keeps for the progress
display and the timeline; what a point produced is a ``measure.pointrun.PointRun``.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentload.options.engines import session_headers as session_headers_of
from agentload.options.load import LoadOptions
from agentload.replay.plan import CallPlan, SessionPlan
from agentload.replay.salt import make_salt

__all__ = [
    "LiveStats",
    "LoadShape",
    "PointView",
    "SessionInstance",
    "SessionSource",
    "Shard",
    "session_headers",
]


@dataclass(frozen=True)
class LoadShape:
    """How sessions are offered to the target at one point: the run's load options as given,
    and what the point decides itself."""

    load: LoadOptions = field(default_factory=LoadOptions)
    """The run's load options (the schedule, arrival rate, duration, gaps, joins, seed)."""
    concurrency: int = 1
    """This point's lanes (one level of ``load.levels``); ignored with an arrival rate or the
    recorded schedule."""
    sessions: int | None = None
    """Stop after this many session instances were started (the point's count: ``--sessions``,
    else every recorded session at least once; None: ``--duration`` bounds the point)."""
    session_header: str | None = None
    parent_header: str | None = None
    """With it, each agent is a session of its own under its parent's (``CallPlan.agent_session``;
    the engine preset's ``parent_header``)."""


def session_headers(shape: LoadShape, instance: str, call: CallPlan) -> dict[str, str] | None:
    """The session headers of ``call`` sent in session instance ``instance``: the instance's
    id; with a parent header, its agent's own session id and its parent's (a sub-agent's)."""
    return session_headers_of(
        shape.session_header,
        shape.parent_header,
        instance,
        call.agent_session(instance),
        call.parent_session(instance),
    )


@dataclass
class SessionInstance:
    """One replay of a recorded session."""

    index: int
    plan: SessionPlan
    salt: str | None
    join_ns: int | None
    session_id: str


@dataclass
class LiveStats:
    """Counters the progress display and the timeline read while a point runs."""

    active_sessions: int = 0
    max_active_sessions: int = 0
    done_sessions: int = 0
    """Sessions that sent every planned call."""
    cut_sessions: int = 0
    """Sessions that ended before their last planned call (the run stopped: ``--duration``,
    Ctrl-C)."""
    inflight: int = 0
    max_inflight: int = 0
    requests: int = 0
    errors: int = 0
    output_tokens: int = 0
    ttfts: deque[int] = field(default_factory=lambda: deque(maxlen=256))


class PointView(Protocol):
    """What live progress reads of a running point: its shape and counters (a
    ``PointRunner``, or the sum over the workers of a sharded run)."""

    @property
    def shape(self) -> LoadShape: ...

    @property
    def stats(self) -> LiveStats: ...

    @property
    def note(self) -> str:
        """What the line says of the point instead of its number and load (a capacity
        search's stage), or ""."""


@dataclass(frozen=True)
class Shard:
    """The session instances one worker of a sharded replay (``replay --ray``) runs: those
    whose number ``i`` falls in its lanes (``lanes``: ``lo <= i % lanes[2] < hi``, closed loop,
    so a worker with more lanes gets as many more sessions), else ``i % of == index``
    (arrivals, the recorded schedule). Every instance belongs to exactly one worker, and
    instance ``i`` is the same (plan, salt, join point) whichever worker runs it."""

    index: int
    of: int
    lanes: tuple[int, int, int] | None = None

    def owns(self, i: int) -> bool:
        if self.lanes is not None:
            lo, hi, total = self.lanes
            return lo <= i % total < hi
        return i % self.of == self.index


class SessionSource:
    """Session instances: round-robin over the plans, replicated and salted (``shard``: only
    the instances of one worker, numbered as on one machine)."""

    def __init__(
        self,
        plans: Sequence[SessionPlan],
        shape: LoadShape,
        nonce: str,
        shard: Shard | None = None,
    ) -> None:
        self.plans = plans
        self.shape = shape
        self.nonce = nonce
        self.shard = shard
        self.next_index = 0

    def next(self, join_random: bool) -> SessionInstance | None:
        i = self.next_index
        limit = self.shape.sessions
        if self.shard is not None:
            while not self.shard.owns(i) and (limit is None or i < limit):
                i += 1
        if limit is not None and i >= limit:
            return None
        self.next_index = i + 1
        plan = self.plans[i % len(self.plans)]
        join = None
        if join_random and plan.last_submit_ns > 0:
            join = int(random.Random(f"{self.shape.load.seed}:{i}").uniform(0, plan.last_submit_ns))
        salt = make_salt(self.nonce, i) if plan.salt_at != "off" else None
        return SessionInstance(i, plan, salt, join, f"{self.nonce}-{i}")
