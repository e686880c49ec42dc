"""What a run measures beyond its requests: the GPUs and power behind the endpoint, the
service-level objectives and the headline targets. Shared by ``replay``, ``generate`` and
``eval`` (their live benchmark), so each option is the same everywhere."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentload.options.flags import Flag
from agentload.options.values import MAX_GPUS, SLO_KEYS, bad_value, parse_slo, slo_key

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
            "e.g. ttft=2s,tpot=50ms,e2e=60s,tps_user=160 (per request), session=20m (per "
            "session: --capacity).",
            reads=str | None,
        ),
    ] = Field(
        default=None,
        description="SLO thresholds: ttft_ns, tpot_ns, e2e_ns in ns, tps_user in tokens/s per "
        "user, 1 s / TPOT (--slo ttft=2s,tpot=50ms,tps_user=160); session_ns, the latency of a "
        "whole session, judged per session by --capacity",
    )
    gpus: Annotated[int | None, Flag("GPUs behind the endpoint (per-GPU figures).")] = Field(
        default=None, ge=1, le=MAX_GPUS, description="GPUs behind the endpoint (--gpus)"
    )
    power_watts: Annotated[
        float | None, Flag("Power draw of the target in W (per-MW figures).", metavar="W")
    ] = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="constant power draw in W (--power-watts)",
    )
    power: Annotated[
        Literal["nvml"] | None, Flag("'nvml': measure the GPUs' energy.", metavar="nvml")
    ] = Field(default=None, description="'nvml' to measure energy (--power)")
    target_tps_user: Annotated[
        list[Annotated[float, Field(gt=0, allow_inf_nan=False)]],
        Flag("Headline target tokens/s per user (repeatable; default 160).", reads=list[float]),
    ] = Field(
        default=[160.0],
        min_length=1,
        description="headline targets, tokens/s per user (--target-tps-user)",
    )

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
            unknown = sorted(set(v) - {slo_key(k) for k in SLO_KEYS})
            if unknown:
                raise bad_value(
                    f"unknown objective(s) {', '.join(unknown)}; use ttft_ns, tpot_ns, e2e_ns, "
                    "tps_user, session_ns"
                )
        return v

    @model_validator(mode="after")
    def _one_power(self) -> MeasureOptions:
        if self.power is not None and self.power_watts is not None:
            raise bad_value("give --power-watts or --power nvml, not both")
        return self
