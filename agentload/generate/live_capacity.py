"""``generate --capacity``: the live benchmark's capacity search.

The search is replay's (``measure.capacity_search``: doubling, then bisection; the verdict over a
probe's measured requests at ``--slo-percentile`` with distribution-free intervals). A live
probe at parallelism P is rounds of generate runs, each ``max(--sessions, 2P)`` sessions with
P at a time (its own trace, ``…-pP-rR.agentload.jsonl.zst``; its window is the live rule:
from the start to the first lane with no session left). After each round the probe is judged
over all its rounds' requests by replay's sequential test (``measure.steady.Sequential``: each
objective decided after 30, 60, 120… requests, or its interval within 5% of its estimate); it
ends when that test ends it or after ``MAX_ROUNDS`` rounds (``cap``). A round's sessions have
all completed, so none is in flight when it is judged.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agentload.generate.dispatch import generate
from agentload.generate.options import GenerateOptions
from agentload.generate.run import RunResult
from agentload.generate.sessions import ProgressSink
from agentload.measure.capacity import Stop, objective_samples, session_latencies
from agentload.measure.points import Point
from agentload.measure.records import Phase
from agentload.measure.steady import Look, Pending, Sequential, SteadyRule

__all__ = ["MAX_ROUNDS", "LiveProbe"]

MAX_ROUNDS = 3
"""The most rounds of one probe (its cap)."""
LIVE_STEADY = SteadyRule(min_s=0.0)
"""Replay's rule but for the measured seconds: a live round's window is what its sessions gave."""


class LiveProbe:
    """``await probe(level)``: one probe's rounds (see the module docstring); each run is
    appended to ``runs`` and its parallelism to ``levels`` (the live document's points)."""

    def __init__(
        self,
        opts: GenerateOptions,
        trace_for: Callable[[int, int], Path],
        progress: ProgressSink | None,
        point_of: Callable[[RunResult, int], Point],
    ) -> None:
        self.opts, self.trace_for, self.progress, self.point_of = (
            opts,
            trace_for,
            progress,
            point_of,
        )
        self.runs: list[RunResult] = []
        self.levels: list[int] = []
        self.current: tuple[Path, int] | None = None
        """The trace and parallelism of the round running (what Ctrl-C leaves)."""

    async def __call__(self, level: int) -> tuple[list[Point], list[Stop]]:
        opts = self.opts
        slo, pct = dict(opts.slo or {}), opts.slo_percentile
        sessions = max(opts.sessions, 2 * level)
        points: list[Point] = []
        stops: list[Stop] = []
        test = Sequential(LIVE_STEADY)
        for r in range(MAX_ROUNDS):
            self.current = (self.trace_for(level, r), level)
            one = opts.model_copy(
                update={
                    "levels": [level],
                    "sessions": sessions,
                    "out": self.current[0],
                    "capacity": False,
                }  # one plain run
            )
            run = await generate(one, self.progress)
            self.runs.append(run)
            self.levels.append(level)
            point = self.point_of(run, level)
            points.append(point)
            measured = [x for p in points for x in p.requests if x.phase == Phase.MEASURED]
            jobs = [ms for p in points for ms in session_latencies(p.sessions, p.window.start_ns)]
            got = objective_samples(measured, slo, pct, jobs)
            why = test.look(Look(got, got, Pending()))
            if why is not None or point.interrupted or r == MAX_ROUNDS - 1:
                stops.append(Stop.ENDED if point.interrupted else why or Stop.CAP)
                break
            stops.append(Stop.ENDED)
        return points, stops
