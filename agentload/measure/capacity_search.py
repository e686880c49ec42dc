"""The capacity search of ``--capacity`` (replay's, and ``generate``'s live one): the probes
of the search, their verdicts and the answer.

``search_capacity`` asks the search (``search``) for a level, has the caller's probe run it
(replay: ``--repeat`` points whose window the steady-state rule ends, ``steady``; generate:
rounds of live runs), judges it (``capacity``), and so on until the search is over; then it
builds results.json's ``capacity`` object and its one-line answer.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Awaitable, Callable, Sequence

from agentload.measure.capacity import (
    AtCapacity,
    Capacity,
    Check,
    Probe,
    Stop,
    Verdict,
    check_objectives,
    check_text,
    margin,
    point_verdict,
    samples,
    session_latencies,
)
from agentload.measure.capacity_stages import StagedPoint, StageDriver, StageMark, run_stages
from agentload.measure.points import Point
from agentload.measure.records import Phase
from agentload.measure.search import CapacitySearch
from agentload.measure.steady import SteadyRule
from agentload.options.capacity import CapacityOptions, SearchMethod
from agentload.options.slo import Objective
from agentload.options.values import parse_resolution
from agentload.quantiles import percentile

__all__ = ["ProbeRun", "StagedRun", "judge_probe", "search_capacity", "search_in_one_run"]

ProbeRun = Callable[[int], Awaitable[tuple[list[Point], list[Stop]]]]
"""``probe(level)``: run one probe's points at ``level`` (``--repeat`` of them, or a live
probe's rounds); its points and why each one's window ended."""


async def search_capacity(opts: CapacityOptions, probe: ProbeRun, points: list[Point]) -> Capacity:
    """Run the search's probes, each its own points (appended to ``points``); the capacity
    object."""
    slo = dict(opts.slo or {})
    search = _search(opts)
    began = time.monotonic()
    probes: list[Probe] = []
    while (level := search.next_level()) is not None:
        runs, stops = await probe(level)
        first = len(points)
        points += runs
        pr = judge_probe(level, runs, stops, first, slo, opts.slo_percentile)
        probes.append(pr)
        print(_probe_line(len(probes), pr), file=sys.stderr, flush=True)
        if not runs or runs[-1].interrupted:
            break
        search.record(level, pr.met, margin=margin(pr.checks))
    return _capacity(opts, search, probes, points, "probes", time.monotonic() - began)


StagedRun = Callable[[StageDriver, list[StageMark]], Awaitable[list[Point]]]
"""``staged(driver, marks)``: run one point whose lanes ``driver`` moves, its stages appended to
``marks``; a point per stage."""


async def search_in_one_run(
    opts: CapacityOptions, staged: StagedRun, points: list[Point], rule: SteadyRule, cap_s: float
) -> Capacity:
    """Run the search as one run's stages (``capacity_stages``; a point each, appended to
    ``points``); the capacity object. Ctrl-C keeps the stages decided."""
    slo, pct = dict(opts.slo or {}), opts.slo_percentile
    search = _search(opts, ramp=True)
    began = time.monotonic()
    marks: list[StageMark] = []

    def told(mark: StageMark, checks: list[Check]) -> str:
        n = len(marks)
        word = "pass" if mark.met else "fail"
        line = _stage_line(n, mark, word, checks)
        left = _left(search, marks)
        print(f"agentload: {line}{left}", file=sys.stderr, flush=True)
        return left

    async def driver(runner: StagedPoint) -> None:
        await run_stages(runner, search, slo, pct, rule, cap_s, marks, told)

    first = len(points)
    runs = await staged(driver, marks)
    points += runs
    probes = []
    for i, (mark, run) in enumerate(zip(marks, runs, strict=True)):
        pr = judge_probe(mark.level, [run], [mark.stop], first + i, slo, pct)
        probes.append(pr.model_copy(update={"ramp": not mark.full, "met": bool(mark.met)}))
    return _capacity(opts, search, probes, points, "ramp", time.monotonic() - began)


def _search(opts: CapacityOptions, ramp: bool = False) -> CapacitySearch:
    sessions, share = parse_resolution(opts.capacity_resolution)
    return CapacitySearch(top=opts.capacity_max, sessions=sessions, share=share, ramp=ramp)


def _stage_line(n: int, mark: StageMark, word: str, checks: list[Check]) -> str:
    """``capacity probe 5 (ramp): 32 sessions: pass (…) in a 6.1s window (enough)``."""
    s = "s" if mark.level != 1 else ""
    window = ((mark.end_ns or 0) - (mark.start_ns or 0)) / 1e9
    return (
        f"capacity probe {n}{' (ramp)' if not mark.full else ''}: {mark.level} session{s}: "
        f"{word} ({'; '.join(check_text(c) for c in checks)}) in a {window:.1f}s window "
        f"({mark.stop.value})"
    )


def _left(search: CapacitySearch, marks: list[StageMark]) -> str:
    """``; bracket [32, 64]: ~3 probes left, ~1.2 min`` (nothing while the ramp climbs): the
    time a probe took so far, on average (the full ones, once there are)."""
    left = search.left()
    if left is None:
        return ""
    full = [m for m in marks if m.full] or marks
    per = sum(_took(m) for m in full) / len(full)
    eta = f", ~{left * per / 60:.1f} min" if left else ""
    return f"; bracket [{search.met}, {search.missed}]: ~{left} probe{'s' if left != 1 else ''} left{eta}"


def _took(m: StageMark) -> float:
    return ((m.end_ns or m.begin_ns) - m.begin_ns) / 1e9


def judge_probe(
    level: int,
    runs: Sequence[Point],
    stops: list[Stop],
    first: int,
    slo: dict[str, float | None],
    pct: float,
) -> Probe:
    """A probe's verdict over the measured requests of all its points (at ``first`` on)."""
    measured = [r for p in runs for r in p.requests if r.phase == Phase.MEASURED]
    jobs = [ms for p in runs for ms in session_latencies(p.sessions, p.window.start_ns)]
    checks = check_objectives(measured, slo, pct, jobs)
    verdict = point_verdict(checks)
    met = verdict is Verdict.PASS or (verdict is Verdict.UNCERTAIN and all(c.met for c in checks))
    return Probe(
        concurrency=level,
        points=list(range(first, first + len(runs))),
        verdict=verdict,
        met=met,
        stops=stops,
        window_s=sum(p.window.seconds for p in runs),
        checks=checks,
    )


def _probe_line(n: int, p: Probe) -> str:
    """``capacity probe 3: 8 sessions: pass (…) in a 12.3s window (decided)``."""
    word = (
        p.verdict.value
        if p.verdict is not Verdict.UNCERTAIN
        else (f"uncertain, taken as {'pass' if p.met else 'fail'}")
    )
    checks = "; ".join(check_text(c) for c in p.checks)
    return (
        f"agentload: capacity probe {n}: {p.concurrency} session{'s' if p.concurrency != 1 else ''}: "
        f"{word} ({checks}) in a "
        f"{p.window_s:.1f}s window ({', '.join(s.value for s in p.stops)})"
    )


def _slo_text(cfg: CapacityOptions) -> str:
    """``p90 TTFT ≤ 2 s, ≥ 160 tok/s/user``."""
    parts = []
    for obj in Objective:
        t = obj.threshold(dict(cfg.slo or {}))
        if t is None:
            continue
        if obj.higher_is_better:
            parts.append(f"≥ {t:g} tok/s/user")
        else:
            shown = f"{t / 1000:g} s" if t >= 1000 else f"{t:g} ms"
            name = "session latency" if obj is Objective.SESSION else obj.value.upper()
            parts.append(f"{name} ≤ {shown}")
    return f"p{cfg.slo_percentile:g} " + ", ".join(parts)


def _capacity(
    cfg: CapacityOptions,
    search: CapacitySearch,
    probes: list[Probe],
    points: list[Point],
    method: SearchMethod,
    elapsed_s: float,
) -> Capacity:
    answer = search.answer
    at = None
    if answer is not None:
        best = max((p for p in probes if p.concurrency == answer), key=lambda p: p.points[0])
        at = _at_capacity(answer, [points[i] for i in best.points], cfg.gpus)
    return Capacity(
        max_concurrency=answer,
        slo=dict(cfg.slo or {}),
        percentile=cfg.slo_percentile,
        resolution=search.resolution(),
        bracket=(search.met, search.missed),
        probes=probes,
        at_capacity=at,
        answer=_answer(cfg, search, probes, at),
        search=method,
        elapsed_s=elapsed_s,
    )


def _mean(values: Sequence[float | None]) -> float | None:
    """The mean of the values there are (None: none)."""
    have = [v for v in values if v is not None]
    return sum(have) / len(have) if have else None


def _at_capacity(agents: int, runs: Sequence[Point], gpus: int | None) -> AtCapacity:
    """The capacity point's figures: each the mean over its ``--repeat`` runs."""
    aggs = [p.aggregates for p in runs]
    watts = _mean([p.power_watts for p in runs])
    jobs = _mean([a.jobs_per_hour for a in aggs])
    measured = [r for p in runs for r in p.requests if r.phase == Phase.MEASURED]
    decode = [v for v in samples(measured, Objective.TPS_USER) if 0 < v < float("inf")]
    return AtCapacity(
        agents=agents,
        agents_per_gpu=agents / gpus if gpus else None,
        agents_per_mw=agents / (watts / 1e6) if watts else None,
        output_tps=_mean([a.output_tps for a in aggs]),
        output_tps_per_gpu=_mean([a.output_tps_per_gpu for a in aggs]),
        output_tps_per_mw=_mean([a.output_tps_per_mw for a in aggs]),
        jobs_per_hour=jobs,
        jobs_per_hour_per_gpu=jobs / gpus if jobs is not None and gpus else None,
        tps_user_p50=_mean([a.tps_user.p50 if a.tps_user else None for a in aggs]),
        decode_tps_user_p50=percentile(decode, 50, presorted=True) if decode else None,
    )


def _answer(
    cfg: CapacityOptions, search: CapacitySearch, probes: list[Probe], at: AtCapacity | None
) -> str:
    slo = _slo_text(cfg)
    if at is None:
        first = probes[0] if probes else None
        if first is None:
            return f"No level was probed ({slo})."
        worst = "; ".join(check_text(c) for c in first.checks if not c.met)
        return (
            f"No level met the SLO ({slo}): at {first.concurrency} "
            f"session{'s' if first.concurrency != 1 else ''}, {worst}."
        )
    most = "at least " if search.missed is None else ""
    text = f"Serves {most}{at.agents:,} agents at {slo}"
    per = [
        f"{v:,.1f} agents/{unit}"
        for v, unit in ((at.agents_per_gpu, "GPU"), (at.agents_per_mw, "MW"))
        if v is not None
    ]
    text += (": " + ", ".join(per)) if per else ""
    if search.missed is None:
        text += f" (--capacity-max {cfg.capacity_max} reached)"
    else:
        text += f" ({search.missed:,} missed it)"
    if not search.met_full:
        text += f"; {at.agents:,} is a ramp step's estimate, not yet confirmed by a full probe"
    # a full probe's (a ramp step's quick look is uncertain by design: full probes confirm it)
    shaky = sorted({p.concurrency for p in probes if p.verdict is Verdict.UNCERTAIN and not p.ramp})
    if shaky and (at.agents in shaky or search.missed in shaky):
        text += (
            "; uncertain: the 95% bounds straddle a threshold at "
            + ", ".join(str(s) for s in shaky)
            + " (the estimate decided; more measured time narrows it)"
        )
    return text + "."
