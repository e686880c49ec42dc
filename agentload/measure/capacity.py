"""Capacity at an SLO: the objectives, a percentile's confidence interval, a point's verdict.

An objective is a per-request figure and its threshold: TTFT, TPOT and E2E must be at most the
threshold, tokens/s per user (``tps_user``: the request's decode speed, 1 s / TPOT) at least it;
or the per-session one, session latency (``session``: end − start of a session replayed
completely from its first call, at most the threshold), judged over sessions, not requests.
A point meets the SLO at percentile ``p`` (default 90) when, for every objective, ``p``% of its
measured requests are on the good side: the ``p``-th percentile of TTFT/TPOT/E2E is at most the
threshold, the ``(100 − p)``-th percentile of tokens/s per user at least it. A failed request is
a miss of every objective (it enters each sample as the worst value); a request with fewer than
two output tokens has no TPOT and is left out of the TPOT and tokens/s samples.

**The bounds** of a percentile are distribution-free and exact (``binomial``): of ``n`` sorted
values, with ``q`` the quantile (``p/100``, or ``1 − p/100`` for tokens/s), the upper bound at
95% confidence is ``x(u)`` with ``u`` the smallest rank such that ``P(Bin(n, q) ≥ u) ≤ 0.05``,
the lower bound ``x(l)`` with ``l`` the largest such that ``P(Bin(n, q) ≤ l − 1) ≤ 0.05``; a
rank past the sample leaves that side open (None): too few requests to bound it. Each bound is
one-sided, because only one side matters to a verdict: 29 requests all under a p90 threshold
already bound the p90 under it (0.9^29 < 0.05). Together they are a 90% interval.

**The verdict** of an objective: ``pass`` when the bound on the bad side is on the good side of
the threshold (TTFT: the upper bound at most it; tokens/s: the lower bound at least it),
``fail`` when the bound on the good side is on the bad side, else ``uncertain`` (the estimate
is then what the search goes by, and the results say so). A point passes when every objective
passes, fails when any fails, else is uncertain. While a probe runs (``steady``), requests and
sessions still in flight count as misses for a pass, so none that completes later can overturn
it; a fail is judged on what completed (those in flight are the slower ones: if anything more
misses).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pydantic import Field

from agentload.measure.aggregates import ResultsModel
from agentload.measure.binomial import lower_rank, upper_rank
from agentload.measure.records import RequestRecord, SessionResult
from agentload.options.capacity import SearchMethod
from agentload.options.slo import Objective
from agentload.quantiles import percentile

__all__ = [
    "AtCapacity",
    "Capacity",
    "Check",
    "Probe",
    "Sample",
    "Stop",
    "Verdict",
    "check_objectives",
    "check_text",
    "interval",
    "judge",
    "margin",
    "objective_samples",
    "point_verdict",
    "samples",
    "session_latencies",
]

ALPHA = 0.05
"""Each bound's error: 95% one-sided confidence."""


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNCERTAIN = "uncertain"


class Stop(StrEnum):
    """Why a capacity probe's window ended (``steady``)."""

    DECIDED = "decided"
    """Every objective's interval lies on one side of its threshold."""
    PRECISE = "precise"
    """Every objective is decided or its interval is within the tolerance."""
    CAP = "cap"
    """The cap (--duration; a ramp step's: ``ramp_s``) was reached first."""
    ENOUGH = "enough"
    """A ramp step had its ``min_n`` requests: its estimates decide (``capacity_stages``)."""
    ENDED = "ended"
    """The point ended by itself (interrupted, or no session left)."""


class Check(ResultsModel):
    """One objective at one point: its percentile, interval and verdict."""

    objective: Objective = Field(description="ttft, tpot, e2e or tps_user")
    threshold: float = Field(description="the objective's threshold (unit)")
    unit: str = Field(description="ms, or tok/s for tps_user")
    quantile: float = Field(description="the quantile judged (0.9; 0.1 for tps_user at p90)")
    n: int = Field(description="requests in the sample")
    estimate: float | None = Field(description="the quantile of the sample (None: empty)")
    low: float | None = Field(description="95% one-sided lower bound (None: unbounded)")
    high: float | None = Field(description="95% one-sided upper bound (None: unbounded)")
    verdict: Verdict = Field(description="pass, fail or uncertain (see measure.capacity)")

    @property
    def met(self) -> bool:
        """What the search goes by: the verdict, or the estimate when uncertain."""
        if self.verdict is not Verdict.UNCERTAIN:
            return self.verdict is Verdict.PASS
        if self.estimate is None:
            return False
        if self.objective.higher_is_better:
            return self.estimate >= self.threshold
        return self.estimate <= self.threshold

    def rel_halfwidth(self) -> float | None:
        """Half the interval's width over the estimate (None: an open side or no estimate)."""
        if self.low is None or self.high is None or not self.estimate:
            return None
        return (self.high - self.low) / 2 / abs(self.estimate)


def samples(requests: Sequence[RequestRecord], objective: Objective) -> list[float]:
    """The objective's values of ``requests`` (the measured ones), in its unit, sorted; a
    failed request is the worst value (inf ms, 0 tok/s)."""
    out: list[float] = []
    worst = 0.0 if objective.higher_is_better else math.inf
    for r in requests:
        if not r.ok:
            out.append(worst)
            continue
        if objective is Objective.TTFT:
            if r.ttft_ns is not None:
                out.append(r.ttft_ns / 1e6)
        elif objective is Objective.E2E:
            out.append(r.e2e_ns / 1e6)
        else:
            tpot = r.tpot_ns
            if tpot is None:
                continue
            if objective is Objective.TPOT:
                out.append(tpot / 1e6)
            else:
                out.append(1e9 / tpot if tpot > 0 else math.inf)
    out.sort()
    return out


def interval(
    values: Sequence[float], q: float, alpha: float = ALPHA, below: int = 0, above: int = 0
) -> tuple[float | None, float | None, float | None]:
    """(estimate, low, high) of quantile ``q`` (0..1) of the sorted ``values`` (module
    docstring), each bound at ``1 − alpha``; None for what the sample cannot give. ``below``
    and ``above``: values not known yet, counted as lower (higher) than every value: a bound
    that falls on one of them is None."""
    n = len(values)
    if n == 0:
        return None, None, None
    est = percentile(values, q * 100, presorted=True)
    total = n + below + above
    lo = lower_rank(total, q, alpha) - below
    hi = upper_rank(total, q, alpha) - below
    low = values[lo - 1] if 1 <= lo <= n else None
    high = values[hi - 1] if 1 <= hi <= n else None
    return est, low, high


def judge(
    values: Sequence[float],
    q: float,
    threshold: float,
    higher_is_better: bool,
    alpha: float = ALPHA,
    pending: int = 0,
) -> Verdict:
    """The verdict of one objective's sorted ``values`` against ``threshold`` at ``1 − alpha``,
    with ``pending`` values still to come (requests in flight) counted as misses for a pass.
    They are the slower requests (a late first token, a slow decode, a long session), so they
    could overturn a pass but hardly a fail: a fail is judged on what completed."""
    hib = higher_is_better
    # the bound on the bad side (tokens/s: the lower one), with the pending as misses
    good = interval(values, q, alpha, below=pending if hib else 0, above=0 if hib else pending)
    bad = interval(values, q, alpha)[2 if hib else 1]  # the bound on the good side
    side = good[1 if hib else 2]
    if side is not None and (side >= threshold if hib else side <= threshold):
        return Verdict.PASS
    if bad is not None and (bad < threshold if hib else bad > threshold):
        return Verdict.FAIL
    return Verdict.UNCERTAIN


def _finite(v: float | None) -> float | None:
    return v if v is not None and math.isfinite(v) else None


def session_latencies(sessions: Sequence[SessionResult], since_ns: int) -> list[float]:
    """The latencies (ms) of the sessions replayed completely from their first call that
    started at ``since_ns`` or later (a point's measured window): the session objective's
    sample."""
    return [
        (s.end_ns - s.start_ns) / 1e6
        for s in sessions
        if s.complete and s.joined_at_ns is None and s.start_ns >= since_ns
    ]


@dataclass(frozen=True)
class Sample:
    """One objective's sorted values at a point, with its threshold and quantile."""

    objective: Objective
    threshold: float
    quantile: float
    values: list[float]

    def check(self) -> Check:
        """Its estimate, bounds and verdict (``judge``)."""
        obj, q, vals = self.objective, self.quantile, self.values
        est, low, high = interval(vals, q)
        return Check(
            objective=obj,
            threshold=self.threshold,
            unit=obj.unit,
            quantile=q,
            n=len(vals),
            estimate=_finite(est),
            low=_finite(low),
            high=_finite(high),
            verdict=judge(vals, q, self.threshold, obj.higher_is_better),
        )


def objective_samples(
    requests: Sequence[RequestRecord],
    slo: dict[str, float | None],
    pct: float,
    sessions: Sequence[float] = (),
) -> list[Sample]:
    """The sample of every objective ``slo`` sets, judged at percentile ``pct`` (0..100): of
    the measured ``requests``, or of the latencies (ms) of complete ``sessions`` for the
    session one."""
    out = []
    for obj in Objective:
        t = obj.threshold(slo)
        if t is None:
            continue
        q = 1 - pct / 100 if obj.higher_is_better else pct / 100
        vals = sorted(sessions) if obj is Objective.SESSION else samples(requests, obj)
        out.append(Sample(obj, t, q, vals))
    return out


def check_objectives(
    requests: Sequence[RequestRecord],
    slo: dict[str, float | None],
    pct: float,
    sessions: Sequence[float] = (),
) -> list[Check]:
    """Every objective ``slo`` sets, judged (``objective_samples``, ``Sample.check``)."""
    return [s.check() for s in objective_samples(requests, slo, pct, sessions)]


def _num(v: float | None) -> str:
    return "open" if v is None else f"{v:,.1f}"


def check_text(c: Check) -> str:
    """``tps_user p10 170.2 [165.0, 175.3] ≥ 160 tok/s``."""
    q = round(c.quantile * 100)
    rel = "≥" if c.objective.higher_is_better else "≤"
    return (
        f"{c.objective.value} p{q} {_num(c.estimate)} [{_num(c.low)}, {_num(c.high)}] {rel} "
        f"{c.threshold:g} {c.unit}"
    )


def margin(checks: Sequence[Check]) -> float | None:
    """The smallest relative distance of an estimate from its threshold, positive on the good
    side (``(T − est) / T``; tokens/s: ``(est − T) / T``); None when an estimate is missing."""
    out: float | None = None
    for c in checks:
        if c.estimate is None or not c.threshold:
            return None
        m = (c.threshold - c.estimate) / c.threshold
        m = -m if c.objective.higher_is_better else m
        out = m if out is None else min(out, m)
    return out


def point_verdict(checks: Sequence[Check]) -> Verdict:
    """Fail when an objective fails, pass when every one passes, else uncertain."""
    if any(c.verdict is Verdict.FAIL for c in checks):
        return Verdict.FAIL
    if all(c.verdict is Verdict.PASS for c in checks):
        return Verdict.PASS
    return Verdict.UNCERTAIN


class Probe(ResultsModel):
    """One probe of the search: a point of the run."""

    concurrency: int = Field(description="sessions in flight")
    points: list[int] = Field(description="its points' indexes in points (one per --repeat)")
    verdict: Verdict = Field(description="pass, fail or uncertain")
    met: bool = Field(description="what the search took it as (the estimate when uncertain)")
    stops: list[Stop] = Field(
        description="why each point's window ended: decided, precise, enough, cap or ended"
    )
    ramp: bool = Field(
        default=False,
        description="a ramp step: a quick look the search took by its estimates (1.4)",
    )
    window_s: float = Field(description="measured seconds, all its points together")
    checks: list[Check] = Field(
        description="each objective's percentile, interval, verdict over its points' requests"
    )


class AtCapacity(ResultsModel):
    """The figures of the capacity point (per GPU with --gpus, per MW with power)."""

    agents: int = Field(description="concurrent agent sessions served")
    agents_per_gpu: float | None = None
    agents_per_mw: float | None = None
    output_tps: float | None = Field(default=None, description="output tokens/s")
    output_tps_per_gpu: float | None = None
    output_tps_per_mw: float | None = None
    jobs_per_hour: float | None = Field(default=None, description="sessions completed per hour")
    jobs_per_hour_per_gpu: float | None = None
    tps_user_p50: float | None = Field(
        default=None, description="median over sessions of output tokens/s per user"
    )
    decode_tps_user_p50: float | None = Field(
        default=None, description="median over requests of 1 s / TPOT"
    )


class Capacity(ResultsModel):
    """``replay --capacity``: the most concurrent sessions whose steady state met the SLO."""

    max_concurrency: int | None = Field(description="the answer (None: no level met the SLO)")
    slo: dict[str, float | None] = Field(description="the objectives (config.slo's keys)")
    percentile: float = Field(description="the percentile every objective is judged at")
    resolution: int = Field(description="how far apart the bracket's ends were allowed to be")
    bracket: tuple[int, int | None] = Field(
        description="the largest level that met the SLO and the smallest that missed it"
    )
    probes: list[Probe] = Field(description="every probe, in the order run")
    at_capacity: AtCapacity | None = Field(description="the capacity point's figures")
    answer: str = Field(description="the one-line answer")
    search: SearchMethod = Field(
        default="probes",
        description="ramp: one run whose lanes the search moved; probes: a point per probe (1.4)",
    )
    elapsed_s: float | None = Field(
        default=None, description="the search's wall-clock seconds, from its first probe (1.4)"
    )
