"""The capacity search over concurrency (``replay --capacity``).

Bracket by doubling: probe 1, 2, 4, … (from ``start``) until a level misses the SLO or ``top``
is reached; then bisect between the largest level that met it and the smallest that missed it
until they are at most the resolution apart. The answer is the largest level that met the SLO
(None when the first level missed it already). The resolution is a number of sessions, or a
share of the lower end (``5%``: at most 5% of it, at least 1).

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

    def next_level(self) -> int | None:
        """The next level to probe; None when the search is over."""
        if self.missed is None:
            nxt = self.start if not self.probes else self.met * 2
            if self.met >= self.top:
                return None
            return min(nxt, self.top)
        if self.met == 0 or self.missed - self.met <= self.resolution():
            return None
        return (self.met + self.missed) // 2

    def record(self, level: int, met: bool) -> None:
        """What the probe at ``level`` gave."""
        self.probes.append((level, met))
        if met:
            self.met = max(self.met, level)
        else:
            self.missed = level if self.missed is None else min(self.missed, level)

    @property
    def answer(self) -> int | None:
        """The largest level that met the SLO (None: none did)."""
        return self.met or None
