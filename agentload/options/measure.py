"""What a run measures beyond its requests: the GPUs and power behind the endpoint, the
service-level objectives and the headline targets. Shared by ``replay``, ``generate`` and
``eval`` (their live benchmark), so each option is the same everywhere."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentload.options.flags import Flag
from agentload.options.slo import Objective, parse_slo
from agentload.options.values import MAX_GPUS, bad_value

__all__ = ["MeasureOptions"]


class MeasureOptions(BaseModel):
    """The measurement options of a run (stored in results.json with the rest of ``config``)."""

    model_config = ConfigDict(extra="forbid")

    slo: Annotated[
        dict[
            str,
            Annotated[int, Field(gt=0)] | Annotated[float, Field(gt=0, allow_inf_nan=False)] | None,
        ]
        | None,
        Flag(
            "Objectives, e.g. ttft=2s,tpot=50ms,e2e=60s,tps_user=160 (per request), "
            "session=20m (per session: --capacity); kept as ttft_ns, tpot_ns, e2e_ns, "
            "session_ns (ns) and tps_user (tokens/s per user, 1 s / TPOT).",
            reads=str | None,
        ),
    ] = None
    gpus: Annotated[int | None, Flag("GPUs behind the endpoint (per-GPU figures).")] = Field(
        default=None, ge=1, le=MAX_GPUS
    )
    power_watts: Annotated[
        float | None, Flag("Power draw of the target in W (per-MW figures).", metavar="W")
    ] = Field(default=None, gt=0, allow_inf_nan=False)
    power: Annotated[
        Literal["nvml"] | None, Flag("'nvml': measure the GPUs' energy.", metavar="nvml")
    ] = None
    target_tps_user: Annotated[
        list[Annotated[float, Field(gt=0, allow_inf_nan=False)]],
        Flag("Headline target tokens/s per user (repeatable; default 160).", reads=list[float]),
    ] = Field(default=[160.0], min_length=1)

    @field_validator("power", mode="before")
    @classmethod
    def _power_choice(cls, v: Any) -> Any:
        if v is not None and v != "nvml":
            raise bad_value("only 'nvml' is supported (or give --power-watts)")
        return v

    @field_validator("slo", mode="before")
    @classmethod
    def _slo_text(cls, v: Any) -> Any:
        if isinstance(v, str):
            return parse_slo(v)
        if isinstance(v, dict):
            unknown = sorted(set(v) - {o.key for o in Objective})
            if unknown:
                keys = ", ".join(o.key for o in Objective)
                raise bad_value(f"unknown objective(s) {', '.join(unknown)}; use {keys}")
        return v

    @model_validator(mode="after")
    def _one_power(self) -> MeasureOptions:
        if self.power is not None and self.power_watts is not None:
            raise bad_value("give --power-watts or --power nvml, not both")
        return self
