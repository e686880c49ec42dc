"""Distributions fitted to real sessions: modeled waits, and the simulated model's pacing.

**Modeled waits** are the time a real agent's loop waits between calls that a generated session
does not spend (a person at a permission prompt or reading an answer, the product's own work).

A real gap before an agent's next call is the tool's run time plus that wait. Our tools on a
small repository take ~0.1 s; in real Claude Code sessions the gap before a call that follows
tool results is ~9 s at the median, and a person takes minutes before the next user turn. So a
generated trace carries both: the measured timeline, and per call a modeled wait
(``llm_call.wait_ns``) drawn from a distribution fitted to a corpus of real sessions, which the
header names with its parameters and source (``header.waits``). ``generate`` does not sleep
through it unless asked (``--pace real``); replay honours measured + modeled gaps by default.

**The model** (``GapModel``): a gap is log-normal with a session effect, the random-effects
model of a per-session spread::

    log gap = mu + tau * z_session + sigma * z_call        z ~ N(0, 1)

``median_s = exp(mu)`` is the median session's median gap, ``session_sigma = tau`` how much
sessions differ (their median gaps' log spread), ``call_sigma = sigma`` how much the gaps of one
session spread around its own median. A draw is clipped to ``[min_s, max_s]``. The modeled wait
before a call is the drawn gap less what was measured since the agent's previous call (the
tool's real run time), never below 0: the gap the trace describes is ``max(drawn, measured)``.

**The fit** (``fit_gap``): the sources' gaps per session (whole seconds in the Weka format, so a
gap is floored at ``FLOOR_S`` before its log is taken); sessions with at least two gaps. Real
gaps have a long tail (a person away for an hour), so the centre is fitted robustly and the
spread is not: ``mu`` is the median of the sessions' median log gaps, ``tau`` their
interquartile range over 1.349 (a normal's), and ``sigma`` the root mean square of the log gaps'
distances from their session's median, which the tail enlarges. So the model reproduces the
centre and spread of the sessions' medians (the band ``agentload realism`` judges) and keeps
enough of the tail that a session's total time (its sum of gaps) is near the real ones. ``agentload realism
--against CORPUS --fit`` prints a scenario's ``waits:`` block fitted this way.

``WaitKind`` names the three gaps: after tool results (every agent's, as the realism statistic
pools them), after tool results in a sub-agent (optional: an automatic loop, shorter), before a
user turn.

**Pacing** (``Pacing``): how many calls the built-in simulator's model makes in one user turn
before it answers, how many a sub-agent makes before it summarises, how long an answer is, each
a ``CountModel`` (log-normal by its median and p90: ``fit_count`` takes them from the pooled
counts of a corpus); and how often the harness breaks the prompt's prefix (a refreshed system
message, as a real agent's changes when its tools, memory or context are rewritten).
A scenario carries both blocks, each naming its source; ``agentload realism --fit`` prints them.
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from agentload.quantiles import percentile

__all__ = [
    "FLOOR_S",
    "CountModel",
    "GapModel",
    "Pacing",
    "SessionWaits",
    "WaitKind",
    "WaitModel",
    "fit_count",
    "fit_gap",
    "session_quantile",
]

FLOOR_S = 0.5
"""Gaps below this count as this in a fit (the Weka format's times are whole seconds, so a 0
is "under a second"), which keeps the log finite."""


class WaitKind(StrEnum):
    """Which gap a modeled wait stands in for."""

    TOOL = "after_tool"
    """Before a call that follows tool results (a root agent's; a sub-agent's too when
    ``WaitModel.after_tool_subagent`` is not given)."""
    SUBAGENT_TOOL = "after_tool_subagent"
    """Before a sub-agent's call that follows tool results."""
    USER = "before_user"
    """Before a user turn (a person's next message in the session)."""


class GapModel(BaseModel):
    """A log-normal gap with a per-session effect (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    median_s: float = Field(gt=0, description="exp(mu): the median session's median gap, s")
    session_sigma: float = Field(
        ge=0, description="tau: standard deviation of the sessions' median log gaps"
    )
    call_sigma: float = Field(
        ge=0, description="sigma: standard deviation of a session's log gaps around its median"
    )
    min_s: float = Field(default=0.0, ge=0, description="a draw is at least this, s")
    max_s: float = Field(default=3600.0, gt=0, description="a draw is at most this, s")
    sessions: int | None = Field(default=None, ge=0, description="sessions the fit used")
    gaps: int | None = Field(default=None, ge=0, description="gaps the fit used")

    def at(self, z_session: float, z_call: float) -> float:
        """The gap (s) at the session's and the call's standard normal quantiles, clipped."""
        x = self.median_s * math.exp(self.session_sigma * z_session + self.call_sigma * z_call)
        return min(self.max_s, max(self.min_s, x))


class WaitModel(BaseModel):
    """The modeled waits of a scenario: one ``GapModel`` per ``WaitKind`` (a kind left out
    gets no modeled wait), and the corpus they were fitted to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="the corpus the parameters were fitted to, and how")
    after_tool: GapModel | None = Field(
        default=None,
        description="gap before a call that follows tool results (every agent's, unless "
        "after_tool_subagent is given)",
    )
    after_tool_subagent: GapModel | None = Field(
        default=None,
        description="gap before a sub-agent's call that follows tool results (null: after_tool)",
    )
    before_user: GapModel | None = Field(
        default=None, description="gap before a user turn (a person's next message)"
    )

    def gap(self, kind: WaitKind) -> GapModel | None:
        """The model of ``kind``; a sub-agent's gap falls back to ``after_tool``."""
        if kind is WaitKind.SUBAGENT_TOOL:
            return self.after_tool_subagent or self.after_tool
        return self.after_tool if kind is WaitKind.TOOL else self.before_user


def session_quantile(index: int) -> float:
    """Where session ``index`` of a run sits among sessions (0 < q < 1): the van der Corput
    sequence in base 2 from its second term (0.5, 0.25, 0.75, 0.125, 0.625 ...), so session 0 is
    the median session and any first few sessions spread over the distribution evenly."""
    q, denom, n = 0.0, 1.0, index + 1
    while n:
        denom *= 2
        n, bit = divmod(n, 2)
        q += bit / denom
    return q


class SessionWaits:
    """The modeled waits of one session, drawn by stratified sampling so that a few sessions,
    and a few gaps of one session, spread like the corpus's instead of by chance:

    * the session's effect ``z_session`` is the normal quantile ``session_quantile(index)``
      (session 0 of a run is the median session), the same for every kind of gap (a slow
      person is slow at every prompt);
    * an agent's ``k``-th gap of a kind takes the quantile ``1 - session_quantile(k)`` (0.5,
      0.75, 0.25, 0.875, 0.375 ...: a low-discrepancy sequence, so any first few gaps cover the
      distribution evenly and their median stays within its 0.5-0.625 quantiles, where random
      draws of a few gaps would put a session's median anywhere).

    An agent's calls are sequential, so its ``k`` does not depend on how concurrent agents
    interleave: session ``index`` of a run gets the same waits whatever the seed or the order."""

    def __init__(self, model: WaitModel, index: int = 0) -> None:
        self.model = model
        self.z = _NORMAL.inv_cdf(session_quantile(index))
        self.counts: dict[tuple[str, WaitKind], int] = {}

    def wait_ns(self, kind: WaitKind, agent_id: str, measured_ns: int) -> int:
        """The modeled wait (ns) before ``agent_id``'s next call: a gap drawn for ``kind``
        less the ``measured_ns`` the agent already spent since its previous call, at least 0."""
        g = self.model.gap(kind)
        if g is None:
            return 0
        k = self.counts.get((agent_id, kind), 0)
        self.counts[(agent_id, kind)] = k + 1
        z_call = _NORMAL.inv_cdf(1.0 - session_quantile(k))
        drawn = g.at(self.z, z_call)
        return max(0, round(drawn * 1e9) - max(0, measured_ns))


_NORMAL = statistics.NormalDist()


def _iqr_sigma(xs: Sequence[float]) -> float:
    """A robust standard deviation: the interquartile range over 1.349 (a normal's)."""
    if len(xs) < 2:
        return 0.0
    return (percentile(xs, 75) - percentile(xs, 25)) / 1.349


def fit_gap(per_session: Sequence[Sequence[float]], *, max_s: float = 3600.0) -> GapModel | None:
    """The ``GapModel`` of gaps (s) grouped by session (module docstring); None when fewer than
    two sessions have two gaps or more."""
    logs = [[math.log(max(FLOOR_S, x)) for x in s] for s in per_session if len(s) >= 2]
    if len(logs) < 2:
        return None
    medians = [percentile(s, 50) for s in logs]
    within = [x - m for s, m in zip(logs, medians, strict=True) for x in s]
    return GapModel(
        median_s=round(math.exp(percentile(medians, 50)), 3),
        session_sigma=round(_iqr_sigma(medians), 3),
        call_sigma=round(math.sqrt(sum(d * d for d in within) / len(within)), 3),
        max_s=max_s,
        sessions=len(logs),
        gaps=sum(len(s) for s in logs),
    )


class CountModel(BaseModel):
    """A log-normal count given by its median and 90th percentile, clipped to ``[min, max]``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    median: float = Field(gt=0, description="median count")
    p90: float = Field(gt=0, description="90th percentile (>= median)")
    min: int = Field(default=1, ge=1, description="a draw is at least this")
    max: int = Field(default=100_000, ge=1, description="a draw is at most this")
    n: int | None = Field(default=None, ge=0, description="counts the fit used")

    def sample(self, rng: random.Random) -> int:
        """One count drawn from ``rng``."""
        sigma = math.log(max(self.p90, self.median) / self.median) / 1.2816
        x = rng.lognormvariate(math.log(self.median), sigma) if sigma > 0 else self.median
        return int(min(self.max, max(self.min, round(x))))


class Pacing(BaseModel):
    """The built-in simulator's pacing of a scenario, fitted to a corpus (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="the corpus the counts were fitted to, and how")
    turn_calls: CountModel | None = Field(
        default=None,
        description="calls the orchestrator makes in one user turn before it answers "
        "(null: it works on until the context target)",
    )
    subagent_calls: CountModel | None = Field(
        default=None, description="calls a sub-agent makes before it summarises"
    )
    answer_tokens: CountModel | None = Field(
        default=None,
        description="output tokens of a root agent's answer (a call that ends a user turn)",
    )
    context_refresh_per_call: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="odds that the harness refreshes the orchestrator's system message before a "
        "call (its prompt differs from there on: a prefix break, as a real agent's system "
        "prompt, tools or memory change mid-session)",
    )


def fit_count(values: Sequence[float], *, max_count: int = 100_000) -> CountModel | None:
    """The ``CountModel`` of pooled counts (their median and p90, clipped at the largest seen);
    None for fewer than 2."""
    xs = [x for x in values if x >= 1]
    if len(xs) < 2:
        return None
    median, p90 = percentile(xs, 50), percentile(xs, 90)
    return CountModel(
        median=round(median, 2),
        p90=round(max(p90, median), 2),
        max=min(max_count, math.ceil(max(xs))),
        n=len(xs),
    )
