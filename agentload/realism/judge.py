"""Ours beside the corpus, statistic by statistic: the band, the verdict, the distance.

For each statistic (``statistics``): our units' p10 / p50 / p90 and the corpus's p10 / p25 /
p50 / p75 / p90 (units: per-session medians for a call statistic, else agents or sessions).
**In band** when our p50 lies within the corpus's p25–p75; where the corpus has fewer than
``MIN_QUARTILE_UNITS`` units of a statistic (the training corpus has 3 sessions that delegate,
8 sub-agents) the quartiles of a handful of values say little, and the band is its p10–p90
(``Row.band`` says which). The **distance** is the two-sample
Kolmogorov-Smirnov statistic D (the largest gap between the two empirical CDFs, with its
p-value) over the pooled unit values (every call of a call statistic), when both sides have at
least two. A statistic out of band that our traces' scenario declares a departure by design
(``Scenario.by_design``: the key and why) is ``by_design``, not ``out``; one a side has no
value of is ``no_data``.

The result is a typed document (``RealismDocument``, ``agentload.realism/1``): what
``--json`` prints and what docs/realism.md is written from.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from pydantic import BaseModel, Field

from agentload.quantiles import percentile
from agentload.realism.statistics import STATISTICS, Observations, statistic
from agentload.trace.comparison import ks

__all__ = ["SCHEMA", "RealismDocument", "Row", "Side", "Spread", "Verdict", "judge", "row_keys"]

SCHEMA = "agentload.realism/1"
MIN_QUARTILE_UNITS = 10
"""Below this many corpus units, a statistic's band is the corpus's p10-p90."""


class Verdict(StrEnum):
    """How our median sits against the corpus's band."""

    IN = "in"
    OUT = "out"
    BY_DESIGN = "by_design"
    NO_DATA = "no_data"


class Spread(BaseModel):
    """A side's units of one statistic: how many, and their percentiles (None: none)."""

    n: int = Field(description="units (per-session medians, agents or sessions)")
    calls: int | None = Field(default=None, description="pooled calls, for a call statistic")
    p10: float | None = None
    p25: float | None = None
    p50: float | None = None
    p75: float | None = None
    p90: float | None = None


class Row(BaseModel):
    """One statistic's comparison."""

    key: str = Field(description="the statistic (docs/realism.md)")
    title: str
    unit: str = Field(description="call, agent or session")
    kind: str = Field(description="tokens, s, count or share")
    timed: bool = Field(
        description="read on the timeline: includes modeled waits where the traces have them"
    )
    ours: Spread
    corpus: Spread
    verdict: Verdict
    band: str = Field(
        default="p25-p75",
        description="the corpus's band the verdict used: p25-p75, or p10-p90 where the corpus "
        f"has fewer than {MIN_QUARTILE_UNITS} units",
    )
    why: str | None = Field(default=None, description="a by-design departure's reason")
    ks_d: float | None = Field(default=None, description="Kolmogorov-Smirnov D, pooled values")
    ks_p: float | None = Field(default=None, description="its p-value")


class Side(BaseModel):
    """What one side is: its files, sessions and label."""

    label: str
    files: list[str]
    sessions: int
    source: str | None = Field(default=None, description="the corpus's origin, when it says")
    modeled_waits: str | None = Field(
        default=None,
        description="the model its modeled waits were drawn from (the timed rows include them)",
    )


class RealismDocument(BaseModel):
    """``agentload realism``'s result."""

    schema_: str = Field(default=SCHEMA, alias="schema")
    gaps: str = Field(description="the timeline: modeled (measured + modeled waits) or measured")
    ours: Side
    corpus: Side
    rows: list[Row]
    in_band: int = Field(description="rows in band")
    judged: int = Field(description="rows with data on both sides")

    model_config = {"populate_by_name": True}


def _spread(units: Sequence[float], calls: int | None, full: bool) -> Spread:
    if not units:
        return Spread(n=0, calls=calls)
    q = (10, 25, 50, 75, 90) if full else (10, 50, 90)
    values = {f"p{p}": percentile(units, p) for p in q}
    return Spread(n=len(units), calls=calls, **values)


def row_keys(ours: Observations, corpus: Observations) -> list[str]:
    """The statistics in table order, the per-tool-kind gaps after the gap they refine."""
    out: list[str] = []
    for s in STATISTICS:
        out.append(s.key)
        if s.key == "gap_after_tool_s":
            kinds = sorted(ours.tool_kinds | corpus.tool_kinds)
            out.extend(f"gap_after_tool_s.{k}" for k in kinds)
    return out


def judge(
    ours: Observations,
    corpus: Observations,
    *,
    by_design: dict[str, str] | None = None,
) -> list[Row]:
    """One ``Row`` per statistic (module docstring)."""
    rows: list[Row] = []
    for key in row_keys(ours, corpus):
        st = statistic(key)
        a, b = ours.units(key), corpus.units(key)
        pa, pb = ours.pooled(key), corpus.pooled(key)
        calls = st.unit == "call"
        mine = _spread(a, len(pa) if calls else None, full=False)
        theirs = _spread(b, len(pb) if calls else None, full=True)
        why = (by_design or {}).get(key)
        wide = theirs.n < MIN_QUARTILE_UNITS
        lo, hi = (theirs.p10, theirs.p90) if wide else (theirs.p25, theirs.p75)
        if mine.p50 is None or lo is None or hi is None:
            verdict = Verdict.NO_DATA
        elif lo <= mine.p50 <= hi:
            verdict = Verdict.IN
        else:
            verdict = Verdict.BY_DESIGN if why else Verdict.OUT
        distance = ks(pa, pb)
        rows.append(
            Row(
                key=key,
                title=st.title,
                unit=st.unit.value,
                kind=st.kind.value,
                timed=st.timed,
                ours=mine,
                corpus=theirs,
                verdict=verdict,
                band="p10-p90" if wide else "p25-p75",
                why=why if verdict is Verdict.BY_DESIGN else None,
                ks_d=distance["d"] if distance else None,
                ks_p=distance["p"] if distance else None,
            )
        )
    return rows
