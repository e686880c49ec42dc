"""The capacity search's options (``replay --capacity``, ``generate --capacity``): on top of
the measurement options, the percentile each SLO objective is judged at and how the search
runs. Shared, so each option is the same everywhere."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from agentload.options.flags import Flag
from agentload.options.measure import MeasureOptions
from agentload.options.values import MAX_LEVEL, bad_value, parse_resolution

__all__ = ["CapacityOptions", "SearchMethod"]

SearchMethod = Literal["ramp", "probes"]
"""How replay's capacity search runs its probes: ``ramp``, one run whose lanes the search moves
(``measure.capacity_stages``); ``probes``, each probe its own point."""


class CapacityOptions(MeasureOptions):
    """The measurement options and the capacity search's."""

    capacity: Annotated[
        bool,
        Flag(
            "Search the most concurrent sessions whose steady state meets --slo at "
            "--slo-percentile (docs/replay.md)."
        ),
    ] = False
    slo_percentile: Annotated[
        float, Flag("Percentile of requests that must meet each objective (--capacity).")
    ] = Field(default=90.0, gt=0, lt=100, allow_inf_nan=False)
    capacity_resolution: Annotated[
        str, Flag("How close the search brackets the answer: sessions (4) or a share (5%).")
    ] = "5%"
    capacity_max: Annotated[int, Flag("The highest concurrency the capacity search probes.")] = (
        Field(default=4096, ge=1, le=MAX_LEVEL)
    )

    @field_validator("capacity_resolution")
    @classmethod
    def _resolution(cls, v: str) -> str:
        parse_resolution(v)
        return v

    @model_validator(mode="after")
    def _capacity_slo(self) -> CapacityOptions:
        if self.capacity and not self.slo:
            raise bad_value(
                "--capacity searches for the load that meets an SLO: give --slo, "
                "e.g. --slo tps_user=160,ttft=2s"
            )
        return self
