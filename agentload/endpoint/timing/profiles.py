"""Hardware profiles of the simulator: timing and KV-cache capacity, from shipped YAML or a file.

A profile names its prefill rate, its decode rate and how that rate degrades with the number of
running sequences, the batch limit, the KV capacity, the block size and the context limit.
``instant`` sleeps never (for load-testing clients and for fast tests); the other shipped
profiles are illustrative numbers, explained in their YAML, not measurements.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agentload.endpoint.policy.types import PolicyConfig
from agentload.errors import ConfigError
from agentload.infile import read_bytes, safe_load

__all__ = ["Profile", "list_profiles", "load_profile"]


class Profile(BaseModel):
    """Timing and KV-cache model of one simulated inference server."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Profile name shown in the banner and /health.")
    description: str = Field(default="", description="One line saying what the numbers represent.")
    instant: bool = Field(
        default=False,
        description="No sleeps at all: every response is produced as fast as possible.",
    )
    prefill_tokens_per_s: float = Field(
        default=20_000.0,
        gt=0,
        description="Prefill throughput for uncached prompt tokens (tokens/s).",
    )
    decode_tokens_per_s: float = Field(
        default=60.0, gt=0, description="Decode rate of one sequence running alone (tokens/s)."
    )
    decode_degradation: float = Field(
        default=0.01,
        ge=0,
        description="Per-sequence decode rate = decode_tokens_per_s / (1 + d * (running - 1)).",
    )
    overhead_ms: float = Field(
        default=5.0, ge=0, description="Fixed scheduling/network overhead added to every TTFT (ms)."
    )
    max_batch: int = Field(
        default=256, ge=1, le=1 << 20, description="Most sequences running at once."
    )
    kv_capacity_tokens: int = Field(
        default=1_048_576,
        ge=16,
        le=1 << 40,
        description="KV cache capacity in tokens (blocks × block_size).",
    )
    block_size: int = Field(
        default=16, ge=1, le=1 << 16, description="KV block size in tokens (prefix-cache unit)."
    )
    max_context: int = Field(
        default=1_048_576,
        ge=16,
        le=1 << 40,
        description="Longest prompt + completion accepted (tokens).",
    )
    policy: PolicyConfig | None = Field(
        default=None,
        description="Overrides of the simulated agent behaviour (PolicyConfig knobs), if any.",
    )
    scheduling: Literal["fcfs"] = Field(
        default="fcfs", description="Queue discipline: first come first served."
    )

    @model_validator(mode="after")
    def _fits(self) -> Profile:
        if self.max_context > self.kv_capacity_tokens:
            raise ValueError(
                f"max_context {self.max_context} exceeds kv_capacity_tokens "
                f"{self.kv_capacity_tokens}: a request of full length could never run"
            )
        return self

    @property
    def kv_blocks(self) -> int:
        """KV capacity in blocks."""
        return self.kv_capacity_tokens // self.block_size


def _shipped() -> dict[str, Path]:
    root = resources.files("agentload.endpoint.timing") / "profiles"
    out = {}
    for entry in root.iterdir():
        if entry.name.endswith(".yaml"):
            out[entry.name[:-5]] = Path(str(entry))
    return out


def list_profiles() -> list[str]:
    """Names of the shipped profiles."""
    return sorted(_shipped())


def load_profile(name_or_path: str | Path | Profile) -> Profile:
    """A shipped profile by name, or a YAML file; raises ``ConfigError`` naming the field."""
    if isinstance(name_or_path, Profile):
        return name_or_path
    shipped = _shipped()
    key = str(name_or_path)
    if key in shipped:
        path = shipped[key]
    else:
        path = Path(key)
        if not path.is_file():
            raise ConfigError(
                f"unknown simulator profile {key!r}: not a file and not one of "
                f"{', '.join(sorted(shipped))}"
            )
    try:
        text = read_bytes(path, label=f"{path}: profile").decode("utf-8")
        data = safe_load(text, str(path))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not a YAML text file (byte {exc.start} is not UTF-8)") from None
    except RecursionError:
        raise ConfigError(f"{path}: invalid YAML: nested too deeply") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a profile is a YAML mapping")
    data.setdefault("name", path.stem)
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "profile"
        raise ConfigError(f"{path}: {loc}: {err['msg']}") from None
