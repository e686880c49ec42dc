"""When a capacity probe has measured enough: the steady-state rule (``--capacity``).

A probe point runs with lanes that recycle sessions and no fixed length. Its warm-up is the
runner's: every lane's first session joins its trace mid-flight and replays, unmeasured, what it
needs of the calls before (``--start-at random``); the measured window opens when every lane is
past that and every request sent before then has had its first token. From then on the watcher
looks every ``every_s`` at the requests sent inside the window that have completed (less often
when a look takes long: every 20 times its own time at least, so that looking costs the sending
loop at most ~5%), and ends the window (the runner stops sending; requests in flight complete
and count) at the first look where

* at least ``min_s`` seconds were measured, and
* every objective is decided, or one failed: a sequential test (``Sequential``) that looks at
  each objective when its sample has reached ``first_look`` (45) requests, then 1.5, 2.25…
  times as many.
  A look runs two tests: one over every request completed, the requests in flight counted as
  misses for a pass (``capacity.judge``; a request streaming already adds its known TTFT to the
  TTFT sample instead), and one over the complete prefix (the requests sent before the
  earliest still in flight: all completed, so no slow one is missing); the objective is
  decided when one says pass or fail and the other does not say the opposite. The ``k``-th
  look spends ``α / 2^(k+2)`` of the error on each test (α = 5%), so all the looks together are
  wrong at most α of the time: a probe whose p90 TTFT is far under its limit passes after
  45 requests, one near the limit runs on; or
* every objective not decided has at least ``min_n`` requests and a 90% interval whose half-width
  is at most ``tolerance`` of its estimate (``precise``: the estimate decides);

or when the cap (``--duration``: measured seconds, 300 by default) is reached, whatever the
intervals say.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from agentload.measure.capacity import (
    ALPHA,
    Sample,
    Stop,
    Verdict,
    judge,
    objective_samples,
    session_latencies,
)
from agentload.measure.records import Phase, RequestRecord, SessionResult
from agentload.options.slo import Objective

__all__ = ["LivePoint", "Look", "Pending", "Sequential", "SteadyRule", "watch", "window_samples"]


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

    def pending(self, since_ns: int) -> Pending:
        """The requests sent, and the sessions started from their first call, at ``since_ns``
        (ns since ``t0``) or later that are still in flight."""


@dataclass(frozen=True)
class Pending:
    """What a running point has in flight of a window: requests (not warm-up) sent and sessions
    started from their first call since its start, and the earliest send (start) among them (ns
    since the point's ``t0``; None: none)."""

    requests: int = 0
    sessions: int = 0
    first_request_ns: int | None = None
    first_session_ns: int | None = None
    ttft_ms: tuple[float, ...] | None = None
    """The TTFTs of those requests that are streaming already (None: not known, every one in
    flight counts as waiting for its first token)."""
    first_waiting_ns: int | None = None
    """The earliest send among those still waiting for their first token (with ``ttft_ms``)."""

    def count(self, obj: Objective) -> int:
        """How many of ``obj``'s sample are still to come."""
        if obj is Objective.SESSION:
            return self.sessions
        if obj is Objective.TTFT and self.ttft_ms is not None:
            return self.requests - len(self.ttft_ms)
        return self.requests

    def cut(self, obj: Objective) -> int | None:
        """Where ``obj``'s complete prefix ends: the earliest send (start) still to come."""
        if obj is Objective.SESSION:
            return self.first_session_ns
        if obj is Objective.TTFT and self.ttft_ms is not None:
            return self.first_waiting_ns
        return self.first_request_ns


@dataclass(frozen=True)
class SteadyRule:
    """The rule's numbers (see the module docstring)."""

    min_s: float = 5.0
    min_n: int = 30
    first_look: int = 45
    """The sequential test's first look: the fewest requests that can decide at its error
    (α/4: 42 all on the good side of a p90 threshold); then every 1.5 times as many."""
    tolerance: float = 0.05
    every_s: float = 0.5
    ramp_s: float = 10.0
    ramp_n: int = 5
    """A ramp step of a staged search (``capacity_stages``) ends after ``ramp_s`` seconds once
    each objective has ``ramp_n`` requests."""


class Sequential:
    """The sequential test of one probe (module docstring): each objective's next look and its
    decision, kept from look to look."""

    def __init__(self, rule: SteadyRule) -> None:
        self.rule = rule
        self.looks: dict[Objective, int] = {}
        self.decided: dict[Objective, Verdict] = {}

    def look(self, now: Look) -> Stop | None:
        """Why the window may end now, given what completed and what is in flight (None: not
        yet)."""
        rule, got = self.rule, now.done
        for s, whole in zip(got, now.prefix, strict=True):
            obj, n = s.objective, len(s.values)
            k = self.looks.get(obj, 0)
            if obj in self.decided or n < _look_at(rule, k):
                continue
            m = now.pending.count(obj)
            alpha = ALPHA / 2 ** (k + 2)  # two tests a look
            hib = obj.higher_is_better
            said = {
                judge(s.values, s.quantile, s.threshold, hib, alpha, m),
                judge(whole.values, whole.quantile, whole.threshold, hib, alpha),
            } - {Verdict.UNCERTAIN}
            if len(said) == 1:
                self.decided[obj] = said.pop()
            while _look_at(rule, k) <= n:
                k += 1
            self.looks[obj] = k
        if not got:
            return None
        if Verdict.FAIL in self.decided.values() or len(self.decided) == len(got):
            return Stop.DECIDED
        for s in got:
            if s.objective in self.decided:
                continue
            width = s.check().rel_halfwidth()
            if len(s.values) < rule.min_n or width is None or width > rule.tolerance:
                return None
        return Stop.PRECISE


def _look_at(rule: SteadyRule, k: int) -> int:
    """The sample size of the sequential test's ``k``-th look."""
    return int(rule.first_look * 1.5**k)


@dataclass(frozen=True)
class Look:
    """One look at a window: the samples of what completed (``done``), of the complete prefix
    (``prefix``: what was sent, or started, before the earliest still in flight: every one of
    those completed, so it is a sample no slow request is missing from) and what is in flight."""

    done: list[Sample]
    prefix: list[Sample]
    pending: Pending


async def watch(
    runner: LivePoint, slo: dict[str, float | None], pct: float, rule: SteadyRule
) -> Stop:
    """End ``runner``'s window by the rule once it is settled (the cap is the runner's own
    ``--duration`` deadline); why it ended."""
    await runner.wait_warm()
    start = runner.warm_end
    test = Sequential(rule)
    pause = rule.every_s
    while True:
        await asyncio.sleep(pause)
        if runner.clock() - start < rule.min_s * 1e9:
            continue
        t = time.perf_counter()
        w = start - runner.t0
        why = test.look(window_samples(runner, w, slo, pct))
        if why is not None:
            runner.mark_drain()
            runner.stop()
            return why
        # a look sorts every request so far, on the loop that sends: at most ~5% of its time
        pause = max(rule.every_s, 20 * (time.perf_counter() - t))


def window_samples(runner: LivePoint, since: int, slo: dict[str, float | None], pct: float) -> Look:
    """A look at the requests sent (sessions started) at ``since`` (ns since the point's
    start) or later: those completed (with the TTFTs of those streaming already: known), the
    complete prefix of each objective, and those in flight."""
    done = [r for r in runner.records if r.send_ns >= since and r.phase != Phase.WARMUP]
    fly = runner.pending(since)
    got = _samples(done, runner.sessions, since, None, slo, pct, fly.ttft_ms or ())
    if not fly.requests and not fly.sessions:
        return Look(got, got, fly)
    by_cut: dict[int | None, list[Sample]] = {}  # at most three cuts: sampled once each
    prefix = []
    for i, s in enumerate(got):
        cut = fly.cut(s.objective)
        if cut not in by_cut:
            by_cut[cut] = _samples(done, runner.sessions, since, cut, slo, pct, ())
        prefix.append(by_cut[cut][i])
    return Look(got, prefix, fly)


def _samples(
    done: list[RequestRecord],
    sessions: Sequence[SessionResult],
    since: int,
    cut: int | None,
    slo: dict[str, float | None],
    pct: float,
    ttfts: Sequence[float],
) -> list[Sample]:
    """The samples of what was sent (started) before ``cut`` (None: all), ``ttfts`` added to
    TTFT's."""
    if cut is not None:
        done = [r for r in done if r.send_ns < cut]
        sessions = [s for s in sessions if s.start_ns < cut]
    got = objective_samples(done, slo, pct, session_latencies(sessions, since))
    if ttfts:
        got = [
            replace(s, values=sorted([*s.values, *ttfts])) if s.objective is Objective.TTFT else s
            for s in got
        ]
    return got
