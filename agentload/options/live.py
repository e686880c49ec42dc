"""The configuration of one live benchmark run (``generate``/``eval`` against a target), as
results.json stores it in ``config`` with ``source: live``.

A live run's requests are its agents' own: nothing is salted, pinned or replayed from a
recorded point, so the replay options have no value here and are not invented. It holds the
groups the two commands share (the measurement and capacity options, the cluster) and what the
live run was given: its traces, target, levels, sessions per point, seed, gaps and timeout.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from agentload.options.capacity import CapacityOptions
from agentload.options.cluster import ClusterOptions
from agentload.options.load import Levels
from agentload.options.values import MAX_SEED, MAX_SESSIONS

__all__ = ["LiveConfig"]


class LiveConfig(ClusterOptions, CapacityOptions):
    """What a live benchmark run was asked to do (never the API key)."""

    model_config = ConfigDict(extra="forbid")

    source: Literal["live"] = Field(
        default="live", description="live: agents driven by the target's own outputs"
    )
    traces: list[str] = Field(description="the trace each point recorded, in order")
    endpoint: str = Field(description="the target's base URL (the built-in simulator's)")
    model: str = Field(description="the model the agents called")
    engine: str | None = Field(
        default=None,
        description="the engine preset given (--engine: its session headers), None: none",
    )
    levels: Levels = Field(default=[1])
    sessions: int = Field(
        default=1, ge=1, le=MAX_SESSIONS, description="sessions per point (--sessions)"
    )
    seed: int = Field(
        default=0,
        ge=-MAX_SEED,
        le=MAX_SEED,
        description="the run's seed (--seed, else the scenario's)",
    )
    gaps: Literal["modeled", "measured"] = Field(
        default="measured",
        description="the waits the run's timeline holds: measured (the tools' own), or "
        "modeled (--pace real: the agents slept through the scenario's modeled waits too)",
    )
    call_timeout_s: float = Field(
        gt=0,
        allow_inf_nan=False,
        description="the most one call attempt could take (--call-timeout)",
    )
