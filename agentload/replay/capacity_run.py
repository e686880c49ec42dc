"""``replay --capacity``: replay's probe of the search (``measure.capacity_search``): the
``--repeat`` points at a level, each ended by the steady-state rule (``measure.steady``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from agentload.measure.capacity import Stop
from agentload.measure.capacity_search import ProbeRun
from agentload.measure.points import Point
from agentload.measure.steady import LivePoint, SteadyRule, watch
from agentload.options.replay import ReplayConfig
from agentload.replay.points import Watcher

__all__ = ["DEFAULT_CAP_S", "watched"]

DEFAULT_CAP_S = 300.0
"""A probe's cap (measured seconds) when --duration is not given."""


def watched(
    repeated: Callable[[int, int, Sequence[Watcher | None]], Awaitable[list[Point]]],
    cfg: ReplayConfig,
    points: list[Point],
    rule: SteadyRule | None = None,
) -> ProbeRun:
    """Replay's probe: the ``--repeat`` points at a level (``repeated(first index, level,
    watchers)``), each ended by the steady-state rule (``steady``)."""
    slo, pct, steady = dict(cfg.slo or {}), cfg.slo_percentile, rule or SteadyRule()

    async def probe(level: int) -> tuple[list[Point], list[Stop]]:
        why: list[list[Stop]] = [[] for _ in range(cfg.repeat)]
        runs = await repeated(len(points), level, [_watcher(w, slo, pct, steady) for w in why])
        stops = [
            w[0] if w else Stop.ENDED if p.interrupted else Stop.CAP
            for w, p in zip(why, runs, strict=False)
        ]
        return runs, stops

    return probe


def _watcher(
    why: list[Stop], slo: dict[str, float | None], pct: float, rule: SteadyRule
) -> Watcher:
    """The steady-state rule beside a probe; why it ended the window goes into ``why``."""

    async def watcher(runner: LivePoint) -> None:
        why.append(await watch(runner, slo, pct, rule))

    return watcher
