"""When a capacity probe has measured enough: the steady-state rule (``--capacity``).

A probe point runs with lanes that recycle sessions and no fixed length. Its warm-up is the
runner's: every lane's first session joins its trace mid-flight and replays, unmeasured, what
it needs of the calls before (``--start-at random``); the measured window opens when every lane
is past that. From then on the watcher looks every ``every_s`` at the requests sent inside
the window that have completed (less often when a look takes long: every 20 times its own
time at least, so that looking costs the sending loop at most ~5%), and ends the window (the runner stops sending; requests in
flight complete and count) at the first look where

* at least ``min_s`` seconds were measured and every objective has at least ``min_n``
  requests, and
* every objective is settled: its verdict is decided (the whole 95% interval on one side of
  the threshold), or the interval's half-width is at most ``tolerance`` of its estimate;

or when the cap (``--duration``: measured seconds, 300 by default) is reached, whatever the
intervals say.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from agentload.measure.capacity import (
    Check,
    Stop,
    Verdict,
    check_objectives,
    session_latencies,
)
from agentload.measure.records import Phase, RequestRecord, SessionResult

__all__ = ["LivePoint", "SteadyRule", "settled", "watch"]


class LivePoint(Protocol):
    """A point as it runs, as the rule reads it and ends its window: on one machine replay's
    ``PointRunner`` itself, on Ray the workers' records merged (``sharded_point.LiveShards``).
    Times are ``clock()`` ns; the records' are ns since ``t0``."""

    @property
    def t0(self) -> int: ...

    @property
    def warm_end(self) -> int:
        """When every lane was past its warm-up (set once ``wait_warm`` returned)."""

    @property
    def records(self) -> Sequence[RequestRecord]: ...

    @property
    def sessions(self) -> Sequence[SessionResult]: ...

    @property
    def clock(self) -> Callable[[], int]: ...

    async def wait_warm(self) -> None: ...

    def mark_drain(self) -> None:
        """The full load ends now: the measured window closes here."""

    def stop(self) -> None:
        """Stop sending; requests in flight complete."""


@dataclass(frozen=True)
class SteadyRule:
    """The rule's numbers (see the module docstring)."""

    min_s: float = 5.0
    min_n: int = 30
    tolerance: float = 0.05
    every_s: float = 0.5


def settled(checks: list[Check], rule: SteadyRule) -> Stop | None:
    """Why the window may end now given ``checks`` (None: not yet)."""
    if not checks or any(c.n < rule.min_n for c in checks):
        return None
    if all(c.verdict is not Verdict.UNCERTAIN for c in checks):
        return Stop.DECIDED
    for c in checks:
        width = c.rel_halfwidth()
        if c.verdict is Verdict.UNCERTAIN and (width is None or width > rule.tolerance):
            return None
    return Stop.PRECISE


async def watch(
    runner: LivePoint, slo: dict[str, float | None], pct: float, rule: SteadyRule
) -> Stop:
    """End ``runner``'s window by the rule once it is settled (the cap is the runner's own
    ``--duration`` deadline); why it ended."""
    await runner.wait_warm()
    start = runner.warm_end
    pause = rule.every_s
    while True:
        await asyncio.sleep(pause)
        if runner.clock() - start < rule.min_s * 1e9:
            continue
        t = time.perf_counter()
        w = start - runner.t0
        done = [r for r in runner.records if r.send_ns >= w and r.phase != Phase.WARMUP]
        jobs = session_latencies(runner.sessions, w)
        why = settled(check_objectives(done, slo, pct, jobs), rule)
        if why is not None:
            runner.mark_drain()
            runner.stop()
            return why
        # a look sorts every request so far, on the loop that sends: at most ~5% of its time
        pause = max(rule.every_s, 20 * (time.perf_counter() - t))
