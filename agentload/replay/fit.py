"""Fitting traces to a server's context: ``--max-context N`` with ``--fit``.

A call is *above N* when its recorded prompt + pinned output exceeds N tokens (the trace's
prompt tokens: the recording server's count when it reported one, else agentload's).

* ``cut-session`` (the default): each session is kept up to its first call above N. Every call
  above N goes, and with it every call that depends on one (its agent's later calls, the parent
  call that reads a cut child's result, and so on down the call graph), so every kept call
  still has all its predecessors and the prefixes it shares with them; calls that do not
  depend on a cut one (a sibling sub-agent that stayed small) are kept. A session whose first
  call is above N has nothing left and is left out.
* ``drop-session``: a session with any call above N is left out whole (sessions replayed
  are then complete jobs, at the price of losing every session that grows past N).

``Fitter`` is the ``select`` of ``plan.build_plans`` and keeps the account of what it cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentload.options.modes import FIT_MODES, FitMode
from agentload.replay.plan import SessionPlan

__all__ = ["FIT_MODES", "CutSession", "FitMode", "Fitter"]


@dataclass(frozen=True)
class CutSession:
    """One session that ``cut-session`` shortened."""

    session: str
    kept_calls: int
    dropped_calls: int


@dataclass
class Fitter:
    """Keeps, of each session, the calls that fit ``max_context`` (see the module docstring)."""

    max_context: int
    mode: FitMode = "cut-session"
    excluded: list[str] = field(default_factory=list)
    """Sessions left out whole."""
    cut: list[CutSession] = field(default_factory=list)
    """Sessions kept in part."""

    def above(self, plan: SessionPlan) -> set[str]:
        """The calls of ``plan`` whose prompt + output exceeds ``max_context``."""
        return {
            c.id
            for c in plan.calls.values()
            if c.prompt_tokens + c.expected_tokens > self.max_context
        }

    def __call__(self, plan: SessionPlan) -> set[str] | None:
        over = self.above(plan)
        if not over:
            return None
        if self.mode == "drop-session":
            self.excluded.append(plan.key)
            return set()
        gone = _with_dependents(plan, over)
        keep = set(plan.calls) - gone
        if keep:
            self.cut.append(CutSession(plan.key, len(keep), len(gone)))
        else:
            self.excluded.append(plan.key)
        return keep

    @property
    def dropped_calls(self) -> int:
        """Calls the cuts removed (not counting sessions left out whole)."""
        return sum(c.dropped_calls for c in self.cut)


def _with_dependents(plan: SessionPlan, roots: set[str]) -> set[str]:
    """``roots`` and every call reachable from them along the call graph's edges."""
    seen = set(roots)
    stack = list(roots)
    while stack:
        for succ in plan.calls[stack.pop()].succs:
            if succ not in seen:
                seen.add(succ)
                stack.append(succ)
    return seen
