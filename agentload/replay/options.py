"""Parsing of replay options given as text: SLOs, durations, sweep levels."""

from __future__ import annotations

import re

from agentload.errors import ConfigError
from agentload.replay.metrics.base import SLO

__all__ = ["parse_duration_ns", "parse_levels", "parse_slo"]

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s|m)?\s*$")


def parse_duration_ns(text: str, default_unit: str = "s") -> int:
    """``2s``, ``50ms``, ``1.5`` (default unit) → ns; a bad value raises ``ConfigError``."""
    m = _DUR.match(text)
    if not m:
        raise ConfigError(f"bad duration {text!r}; write e.g. 2s, 50ms, 1500us")
    return int(float(m.group(1)) * _UNITS[m.group(2) or default_unit])


def parse_slo(text: str | None) -> SLO | None:
    """``ttft=2s,tpot=50ms,e2e=60s`` (any subset) → ``SLO``."""
    if not text:
        return None
    vals: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in ("ttft", "tpot", "e2e"):
            raise ConfigError(
                f"bad --slo item {part.strip()!r}; write ttft=2s,tpot=50ms,e2e=60s (any subset)"
            )
        vals[f"{key}_ns"] = parse_duration_ns(value)
    return SLO(**vals)


def parse_levels(text: str) -> list[int]:
    """``1,2,4,8`` → [1, 2, 4, 8] (positive integers, kept in the given order)."""
    try:
        levels = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"bad --sweep {text!r}; write e.g. 1,2,4,8") from None
    if not levels or any(n < 1 for n in levels):
        raise ConfigError(f"bad --sweep {text!r}; levels must be positive integers")
    return levels
