"""The capacity search in one run (``replay --capacity``, the default ``--capacity-search
ramp``): one point whose lanes the search moves, stage by stage.

The run starts with the search's first level. Each stage sets the lanes (``set_lanes``: new
lanes join their sessions mid-flight after a warm-up; lanes taken away are cancelled with their
calls in flight), waits until the new lanes are past their warm-up and every request sent
before the move has had its first token (the queue the load before built has been served),
then waits once more until every request sent before that moment has had its first token (the
first calls of the new lanes that were warm early queue behind the others' warm-up), then
measures from there: its window holds the requests sent from then on.

* **A ramp stage** (the doubling, ``search.CapacitySearch.ramp``) ends as soon as every
  objective has ``min_n`` requests, or ``ramp_n`` and an estimate misses (``enough``: a ramp
  that overshot stops at once), or the sequential test decided it, or after
  ``ramp_s`` seconds once every objective has ``ramp_n`` (``cap``), or at the full cap; the
  search takes it by its estimates (full probes confirm them). A level so loaded that little
  completes is not taken as met: the step waits for its ``ramp_n`` requests; only a level that
  sent fewer than ``ramp_n`` in all (a lane or two of long calls) is presumed to meet.
* **A full stage** (bisection, and the confirmation of the bracket's ends) ends by the
  steady-state rule (``steady``: the sequential test, or precise, or the ``--duration`` cap).

No stage waits for a warm-up from cold or for a drain: the next one starts where the last one
was decided, and its requests still in flight complete within the next one (they count in
the window they were sent in), unless their lane is taken away. Once the search is over every
lane is cancelled. A call cancelled is not recorded: a pass counted it as a miss while it was
in flight, so none is overturned; a fail or an estimate may lean a little towards the shorter
calls. Afterwards the run is cut into one point per stage
(``split_stages``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Sequence
from copy import copy
from dataclasses import dataclass, replace
from typing import Any, Protocol

from agentload.measure.capacity import Check, Stop, Verdict, check_text, margin
from agentload.measure.pointrun import PointRun
from agentload.measure.records import Phase, label_phases, steady_window
from agentload.measure.search import CapacitySearch
from agentload.measure.steady import LivePoint, Sequential, SteadyRule, window_samples

__all__ = ["StageDriver", "StageMark", "StagedPoint", "run_stages", "split_stages"]

SETTLE_POLL_S = 0.1


@dataclass
class StageMark:
    """One stage of the run (times in ns since the run's start)."""

    level: int
    full: bool
    begin_ns: int
    """When its lanes were set."""
    start_ns: int | None = None
    """When it had settled: its window starts (None: it never did)."""
    end_ns: int | None = None
    """When it was decided: its window ends (None: it was not)."""
    stop: Stop = Stop.ENDED
    met: bool | None = None
    """What the search took it as (None: not decided)."""


class StagedPoint(LivePoint, Protocol):
    """A running point whose lanes a staged search moves (``schedule.PointRunner``)."""

    def set_lanes(self, n: int) -> None:
        """Run ``n`` lanes from now."""

    def settling(self, since_ns: int) -> bool:
        """Lanes added are still in their warm-up, or a request sent before ``since_ns`` (when
        the lanes were moved) still waits for its first token."""

    def show(self, note: str) -> None:
        """What the progress display says of the search now."""


StageDriver = Callable[[StagedPoint], Coroutine[Any, Any, None]]
"""What moves a staged point's lanes while it runs (``run_stages`` with its search)."""


async def run_stages(
    runner: StagedPoint,
    search: CapacitySearch,
    slo: dict[str, float | None],
    pct: float,
    rule: SteadyRule,
    cap_s: float,
    marks: list[StageMark],
    told: Callable[[StageMark, list[Check]], str],
) -> None:
    """Run the search's stages on ``runner`` (each appended to ``marks``; ``told(mark,
    checks)`` once one is decided: what the progress line adds from then on, e.g. the
    bracket and the time left), then stop it. Cancelled (Ctrl-C), the stages decided
    stay in ``marks``."""
    await runner.wait_warm()
    clock, t0 = runner.clock, runner.t0
    tail = ""
    while (level := search.next_level()) is not None:
        full = search.full
        runner.set_lanes(level)
        mark = StageMark(level, full, 0 if not marks else clock() - t0)
        marks.append(mark)
        head = _measuring(mark, len(marks))
        runner.show(f"{head}: settling{tail}")
        deadline = clock() + int(cap_s * 1e9)
        since = mark.begin_ns
        for _ in range(2):  # the move's queue, then what the new lanes sent while warming
            while runner.settling(since) and clock() < deadline:
                await asyncio.sleep(SETTLE_POLL_S)
            since = clock() - t0
        mark.start_ns = clock() - t0

        def so_far(checks: list[Check], head: str = head, tail: str = tail) -> None:
            said = "; ".join(check_text(c) for c in checks)
            runner.show(f"{head}: so far {said or 'no request completed'}{tail}")

        mark.stop, mark.met, checks = await _measure(runner, mark, slo, pct, rule, cap_s, so_far)
        mark.end_ns = clock() - t0
        search.record(level, mark.met, full, margin(checks))
        tail = told(mark, checks)
    runner.mark_drain()
    runner.stop()
    runner.set_lanes(0)


def _measuring(mark: StageMark, n: int) -> str:
    kind = "probe" if mark.full else "ramp step"
    return f"capacity {kind} {n}: {mark.level} session{'s' if mark.level != 1 else ''}"


async def _measure(
    runner: StagedPoint,
    mark: StageMark,
    slo: dict[str, float | None],
    pct: float,
    rule: SteadyRule,
    cap_s: float,
    so_far: Callable[[list[Check]], None],
) -> tuple[Stop, bool, list[Check]]:
    """Measure one stage from ``mark.start_ns`` until it ends (module docstring); why, and
    whether the search takes it as met, and its checks at that look."""
    assert mark.start_ns is not None
    test = Sequential(rule)
    start = runner.clock()
    pause = rule.every_s
    while True:
        await asyncio.sleep(pause)
        elapsed = (runner.clock() - start) / 1e9
        capped = elapsed >= cap_s
        if elapsed < (rule.min_s if mark.full else min(rule.min_s, rule.ramp_s)) and not capped:
            continue
        t = time.perf_counter()
        now = window_samples(runner, mark.start_ns, slo, pct)
        why = test.look(now)
        got, pending = now.done, now.pending.requests
        checks = [s.check() for s in got]
        if why is Stop.DECIDED:
            return why, all(v is Verdict.PASS for v in test.decided.values()), checks
        so_far(checks)
        least = min((c.n for c in checks), default=0)
        quiet = least + pending < rule.ramp_n  # too little traffic to judge: presumed met
        if not mark.full and why is None and not capped:
            if least >= rule.min_n or (least >= rule.ramp_n and not all(c.met for c in checks)):
                why = Stop.ENOUGH
            elif elapsed >= rule.ramp_s and (least >= rule.ramp_n or quiet):
                why = Stop.CAP
        if why is not None or capped:
            return why or Stop.CAP, all(c.met or (quiet and c.n == 0) for c in checks), checks
        pause = max(rule.every_s, 20 * (time.perf_counter() - t))


def split_stages(run: PointRun, marks: Sequence[StageMark]) -> list[PointRun]:
    """The run cut into one point per stage: the requests sent and sessions started from its
    begin to the next one's (the last: to the end), labelled by its window; and, for the
    throughputs over its window (requests and sessions that ended in it), copies of those sent
    (started) before it began that ended inside its window, labelled ``ramp``."""
    out: list[PointRun] = []
    end_all = int(run.wall_s * 1e9)
    for i, m in enumerate(marks):
        begin = m.begin_ns
        until = marks[i + 1].begin_ns if i + 1 < len(marks) else end_all + 1
        start = m.start_ns if m.start_ns is not None else until
        stop = m.end_ns if m.end_ns is not None else min(until, end_all)
        reqs = [r for r in run.requests if begin <= r.send_ns < until]
        window = steady_window(start, stop, reqs, _RULE)
        label_phases(reqs, window)
        early = [r for r in run.requests if r.send_ns < begin and start <= r.end_ns <= stop]
        reqs = [copy(r) for r in early] + reqs
        for r in reqs[: len(early)]:
            r.phase = Phase.WARMUP if r.phase == Phase.WARMUP else Phase.RAMP
        sessions = [
            s
            for s in run.sessions
            if begin <= s.start_ns < until or (s.start_ns < begin and start <= s.end_ns <= stop)
        ]
        timeline = [t for t in run.timeline if begin <= t["t_ns"] < until]
        wall = (min(until, end_all) - begin) / 1e9
        share = wall / run.wall_s if run.wall_s > 0 else 0.0
        out.append(
            replace(
                run,
                requests=reqs,
                sessions=sessions,
                window=window,
                warmup_start_ns=begin,
                warmup_end_ns=start,
                timeline=timeline,
                wall_s=wall,
                max_active_sessions=max((t["active_sessions"] for t in timeline), default=0),
                max_inflight=max((t["inflight"] for t in timeline), default=0),
                cpu_s=None if run.cpu_s is None else run.cpu_s * share,
            )
        )
    return out


_RULE = (
    "a capacity stage's: from when its lanes had settled (new ones past their warm-up, every "
    "request sent before then past its first token) to its decision (measure.capacity_stages)"
)
