"""The load a replay offers: how many sessions in flight (lanes, a sweep of them, or Poisson
arrivals), for how long, how recorded waits are played, where each session instance's salt
goes, where sessions join their traces, the schedule (closed loop or the recorded times) and
the seed."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agentload.options.flags import Flag, Switch
from agentload.options.modes import SALT_MODES, SaltAt
from agentload.options.values import (
    MAX_LEVEL,
    MAX_SEED,
    MAX_SESSIONS,
    bad_value,
    one_of,
    parse_levels,
)

__all__ = ["Levels", "LoadOptions"]


def _levels_text(v: Any) -> Any:
    return parse_levels(v) if isinstance(v, str) else v


Levels = Annotated[
    list[Annotated[int, Field(ge=1, le=MAX_LEVEL)]],
    BeforeValidator(_levels_text),
    Field(min_length=1),
    Flag(
        "Sessions in flight at once; several, comma-separated, run one point each (a sweep: "
        "1,2,4,8).",
        name="--concurrency",
        aliases=("--sweep", "--parallel"),
        short="-p",
        metavar="N[,N...]",
        reads=str | None,
    ),
]
"""The concurrency levels, one option with three names, the same field in every command that
offers load (``replay``'s lanes, ``generate``'s sessions at once)."""

_CHOICES: dict[str, tuple[str, ...]] = {
    "start_at": ("random", "zero"),
    "schedule": ("closed", "recorded"),
    "gaps": ("modeled", "measured"),
    "salt_at": SALT_MODES,
}
"""The options that take one of a few words, and the words (the message names them in order)."""


class LoadOptions(BaseModel):
    """The load of a replay run."""

    model_config = ConfigDict(extra="forbid")

    levels: Levels = Field(default=[1])
    arrival_rate: Annotated[
        float | None, Flag("Start sessions as a Poisson process (sessions/s).")
    ] = Field(default=None, gt=0, allow_inf_nan=False)
    duration_s: Annotated[
        float | None, Flag("Seconds of measured load per point.", name="--duration")
    ] = Field(default=None, gt=0, allow_inf_nan=False)
    sessions: Annotated[
        int | None, Flag("Session instances per point (default: max(trace sessions, N)).")
    ] = Field(default=None, ge=1, le=MAX_SESSIONS)
    gap_scale: Annotated[float, Flag("Scale recorded waits (0 = none).")] = Field(
        default=1.0, ge=0, allow_inf_nan=False
    )
    gaps: Annotated[
        Literal["modeled", "measured"],
        Flag(
            "modeled: the recorded gaps plus the trace's modeled waits (a person, a permission "
            "prompt: see docs/realism.md), as a real session waits; measured: what the "
            "generating run measured, the modeled waits left out."
        ),
    ] = "modeled"
    salt_at: Annotated[
        SaltAt,
        Flag(
            "Where each session instance's salt line goes: start (before everything but "
            "the tools), after-system (after the tools and system prompt: shared across "
            "sessions, as in production; the default), off (no salt).",
            show_default=False,
            switch=Switch("--no-salt", "off", "The same as --salt-at off."),
        ),
    ] = "after-system"
    """A config written before ``salt_at`` has ``salt``: true reads as ``start``, false as
    ``off`` (``_salt_flag``)."""
    start_at: Annotated[
        Literal["random", "zero"],
        Flag(
            "random (the default): join mid-flight after a warm-up; zero: from the start.",
            show_default=False,
        ),
    ] = "random"
    seed: Annotated[int, Flag("Seed of join points, arrivals and synthesized prompts.")] = Field(
        default=0, ge=-MAX_SEED, le=MAX_SEED
    )
    schedule: Annotated[
        Literal["closed", "recorded"],
        Flag(
            "closed: a call waits for its predecessors (--concurrency, --arrival-rate); "
            "recorded: open loop, each call at its recorded time offset (x --time-scale)."
        ),
    ] = "closed"
    time_scale: Annotated[
        float, Flag("--schedule recorded: multiply the recorded offsets (0.5 = twice as fast).")
    ] = Field(default=1.0, gt=0, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _salt_flag(cls, data: Any) -> Any:
        """``salt`` (``--no-salt``, or a config written before ``salt_at``): false is
        ``off``; true, alone, is ``start`` (what it meant then); with ``salt_at`` it must
        agree."""
        if not isinstance(data, dict) or "salt" not in data:
            return data
        data = dict(data)
        salt = data.pop("salt")
        at = data.get("salt_at")
        if not isinstance(salt, bool):
            return {**data, "salt": salt}  # refused as an unknown field
        if at is None:
            data["salt_at"] = "start" if salt else "off"
        elif (at == "off") == salt:
            raise bad_value(
                f"--no-salt is --salt-at off; it contradicts --salt-at {at}"
                if not salt
                else f"salt: true contradicts salt_at: {at}"
            )
        return data

    @property
    def salt(self) -> bool:
        """Whether session instances are salted (``salt_at`` is not ``off``)."""
        return self.salt_at != "off"

    @field_validator("start_at", "schedule", "salt_at", mode="before")
    @classmethod
    def _one_of(cls, v: Any, info: ValidationInfo) -> Any:
        return one_of(v, _CHOICES[info.field_name or ""])

    @model_validator(mode="after")
    def _load_exclusive(self) -> LoadOptions:
        if self.arrival_rate is not None and len(self.levels) > 1:
            raise bad_value(
                "--sweep varies --concurrency; it cannot be combined with --arrival-rate"
            )
        if self.schedule == "recorded":
            clash = [
                opt
                for opt, on in (
                    ("--concurrency/--sweep", self.levels != [1]),
                    ("--arrival-rate", self.arrival_rate is not None),
                    ("--sessions", self.sessions is not None),
                    ("--gap-scale", self.gap_scale != 1.0),
                )
                if on
            ]
            if clash:
                raise bad_value(
                    f"--schedule recorded sends every recorded call once at its recorded time; "
                    f"it cannot be combined with {', '.join(clash)} (use --time-scale)"
                )
        elif self.time_scale != 1.0:
            raise bad_value(
                "--time-scale scales --schedule recorded; the closed loop has --gap-scale"
            )
        return self
