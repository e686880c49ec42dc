"""Service-level objectives: what ``--slo`` can bound (``Objective``) and its text form.

``--slo ttft=2s,tpot=50ms,e2e=60s,tps_user=160,session=20m`` (any subset) is kept as a dict by
each objective's ``key`` (``ttft_ns``, ``tpot_ns``, ``e2e_ns``, ``session_ns`` in ns;
``tps_user`` in tokens/s per user, 1 s / TPOT). The metrics (``measure.metrics.SLO``), the
capacity search (``measure.capacity``) and the option's checks (``options.measure``) all name
the objectives through ``Objective``.
"""

from __future__ import annotations

import math
from enum import StrEnum

from agentload.options.values import bad_value, parse_duration_ns

__all__ = ["Objective", "parse_slo"]


class Objective(StrEnum):
    """What an SLO bounds: per request, or (``SESSION``) per session."""

    TTFT = "ttft"
    TPOT = "tpot"
    E2E = "e2e"
    TPS_USER = "tps_user"
    SESSION = "session"
    """Session latency, per session (not per request)."""

    @property
    def higher_is_better(self) -> bool:
        return self is Objective.TPS_USER

    @property
    def unit(self) -> str:
        """The unit of its values and threshold as results.json holds them."""
        return "tok/s" if self is Objective.TPS_USER else "ms"

    @property
    def key(self) -> str:
        """Its key in ``--slo`` values and in ``config.slo`` (``ttft_ns``, ``tps_user``)."""
        return self.value if self is Objective.TPS_USER else f"{self.value}_ns"

    def threshold(self, slo: dict[str, float | None]) -> float | None:
        """Its threshold in ``unit`` from a ``config.slo`` dict (ns → ms), None when unset."""
        v = slo.get(self.key)
        if v is None:
            return None
        return float(v) if self is Objective.TPS_USER else v / 1e6


def _rate(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not math.isfinite(v) or v <= 0:
        raise bad_value(f"tps_user={text!r}: expected tokens/s per user, a number above 0")
    return v


def parse_slo(text: str) -> dict[str, int | float | None] | None:
    """``ttft=2s,tpot=50ms,e2e=60s,tps_user=160`` (any subset) → ``{"ttft_ns": …, "tpot_ns":
    …, "e2e_ns": …, "tps_user": …, "session_ns": …}`` (None when empty): durations in ns,
    tokens/s as given."""
    vals: dict[str, int | float] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        word, sep, value = part.partition("=")
        try:
            obj = Objective(word.strip().lower())
        except ValueError:
            obj = None
        if not sep or obj is None:
            raise bad_value(
                f"unknown objective {part.strip()!r}; write ttft=2s,tpot=50ms,e2e=60s,"
                "tps_user=160,session=20m (any subset)"
            )
        vals[obj.key] = _rate(value) if obj is Objective.TPS_USER else parse_duration_ns(value)
    return {o.key: vals.get(o.key) for o in Objective} if vals else None
