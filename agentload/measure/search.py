"""The capacity search over concurrency (``replay --capacity``).

Bracket by doubling: probe 1, 2, 4, … (from ``start``) until a level misses the SLO or ``top``
is reached; then bisect between the largest level that met it and the smallest that missed it
until they are at most the resolution apart. The answer is the largest level that met the SLO
(None when the first level missed it already). The resolution is a number of sessions, or a
share of the lower end (``5%``: at most 5% of it, at least 1).

While it climbs, the step after two levels whose margins shrink towards zero goes to 1.25
times where their line crosses zero (at most twice the last level, at least one resolution
above it), so the first miss lands near the answer.

Inside the bracket, a probe goes where the line through the margins of its ends (how far their
estimates were from the thresholds) crosses zero, rather than to the middle, when both ends
are full probes and the last two probes did not move the same end: on a smooth curve the answer is then
bracketed in two or three probes instead of ``log2`` of the bracket over the resolution.

With ``ramp``, the doubling is a ramp: its steps are quick looks (judged by their estimates
over a few requests, ``full`` False), so what they say of a level is tentative; bisection's
probes are full ones, and before the search ends both ends of the bracket are confirmed by
full probes: a full miss at a level the ramp took as met moves the lower end down to the
largest level below that met, a full pass at a level the ramp took as missed moves the upper
end up (the ramp goes on from there).

A doubling sweep to the bracket takes ``⌈log2 C⌉ + 1`` probes for a capacity ``C``; bisecting
the bracket ``[C/2, C]`` to a resolution ``r`` takes ``⌈log2(C / 2r)⌉`` more, where a linear
scan of it would take ``C / 2r``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["CapacitySearch"]


@dataclass
class CapacitySearch:
    """The search's state: the levels it probed and what they gave."""

    top: int
    """The highest level it may probe."""
    sessions: int | None = None
    share: float | None = 0.05
    start: int = 1
    met: int = 0
    """The largest level that met the SLO (0: none yet)."""
    missed: int | None = None
    """The smallest level that missed it (None: none yet)."""
    probes: list[tuple[int, bool]] = field(default_factory=list)

    def resolution(self) -> int:
        """How far apart the bracket's ends may be when it stops."""
        if self.sessions is not None:
            return self.sessions
        return max(1, math.floor((self.share or 0) * self.met))

    ramp: bool = False
    """The doubling steps are a ramp's quick looks (module docstring)."""
    met_full: bool = True
    """``met`` was a full probe's pass (or is 0)."""
    missed_full: bool = True
    """``missed`` was a full probe's miss (or is None)."""
    full: bool = True
    """Whether the level ``next_level`` gave is to be a full probe."""
    full_passes: set[int] = field(default_factory=set)
    margins: dict[int, float] = field(default_factory=dict)
    """Each level's margin (``record``), which places the probes inside the bracket."""

    def next_level(self) -> int | None:
        """The next level to probe (``full`` says how); None when the search is over."""
        self.full = True
        if self.missed is None:
            if self.met >= self.top:
                return self.met if not self.met_full else None
            self.full = not self.ramp
            if not self.probes:
                return min(self.start, self.top)
            return min(self._climb(), self.top)
        if self.met and self.missed - self.met > self.resolution():
            return self._between()
        if self.met and not self.met_full:
            return self.met
        return self.missed if not self.missed_full else None

    def _climb(self) -> int:
        """The next level up: twice the last that met, or less when the margins of the last
        two met levels shrink towards zero: 1.25 times where their line crosses it (at least
        one resolution up), so the first miss is not far past the answer."""
        nxt = self.met * 2
        met = sorted(lv for lv, ok in self.probes if ok and lv in self.margins)[-2:]
        if len(met) < 2:
            return nxt
        (x0, x1), (a, b) = met, (self.margins[met[0]], self.margins[met[1]])
        if not a > b >= 0:
            return nxt
        cross = x1 + (x1 - x0) * b / (a - b)
        return max(self.met + self.resolution(), min(nxt, math.ceil(1.25 * cross)))

    def _between(self) -> int:
        """The next level inside the bracket: where the line through its ends' margins
        crosses zero (both ends full probes), or the middle when their margins are not known,
        an end is a ramp step's, or the last two probes moved the same end (so a bent curve
        does not make it creep)."""
        lo, hi = self.met, self.missed
        assert hi is not None
        a, b = self.margins.get(lo), self.margins.get(hi)
        if not (self.met_full and self.missed_full):
            a = None  # a ramp step's margin is a quick look's: it places the climb, not these
        moved = [ok for _, ok in self.probes[-2:]]
        if a is None or b is None or a < 0 or b >= 0 or (len(moved) == 2 and moved[0] == moved[1]):
            return (lo + hi) // 2
        return min(max(round(lo + (hi - lo) * a / (a - b)), lo + 1), hi - 1)

    def record(self, level: int, met: bool, full: bool = True, margin: float | None = None) -> None:
        """What the probe at ``level`` gave (``full``: a full probe, else a ramp step;
        ``margin``: how far its estimates were from the thresholds, ``capacity.margin``)."""
        self.probes.append((level, met))
        if margin is not None:
            self.margins[level] = margin
        if met and full:
            self.full_passes.add(level)
        if met:
            if level >= self.met:
                self.met, self.met_full = level, full
            if self.missed is not None and level >= self.missed:
                self.missed, self.missed_full = None, True  # the ramp's miss did not hold
            return
        if self.missed is None or level <= self.missed:
            self.missed, self.missed_full = level, full
        if level <= self.met:  # the ramp's pass did not hold: the largest level below that met
            below = [lv for lv, ok in self.probes if ok and lv < level]
            self.met = max(below, default=0)
            self.met_full = self.met == 0 or self.met in self.full_passes

    def left(self) -> int | None:
        """About how many probes are left (None: still climbing, no miss yet)."""
        if self.missed is None:
            return None if self.met < self.top else int(not self.met_full)
        width, n = self.missed - self.met, 0
        while self.met and width > self.resolution():
            width, n = (width + 1) // 2, n + 1
        return n + int(bool(self.met) and not self.met_full) + int(not self.missed_full)

    @property
    def answer(self) -> int | None:
        """The largest level that met the SLO (None: none did)."""
        return self.met or None
