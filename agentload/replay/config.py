"""The configuration of one replay run (stored in results.json as ``config``), and every check
of its values.

``ReplayConfig`` is what the ``agentload replay`` options become; each field names its option.
Its validators are the one place an option value is checked: ranges, choices, text forms
(``--sweep 1,2,4``, ``--slo ttft=2s,tpot=50ms``) and the options that exclude each other. A bad
value raises pydantic's ``ValidationError`` with the field as its location; the CLI turns that
into one line naming the option.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import httpx
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from agentload.replay.engines import ENGINES
from agentload.replay.fit import FIT_MODES, FitMode
from agentload.replay.metrics.base import SLO
from agentload.replay.salt import SALT_MODES, SaltAt
from agentload.tokenizer import is_tokenizer_name

__all__ = [
    "MAX_CONTEXT",
    "MAX_GPUS",
    "MAX_LEVEL",
    "MAX_SEED",
    "MAX_SESSIONS",
    "MAX_WORKERS",
    "RESERVED_BODY_FIELDS",
    "RESERVED_HEADERS",
    "ReplayConfig",
    "endpoint_problem",
    "header_name_problem",
    "parse_duration_ns",
    "parse_levels",
    "parse_slo",
]

# The largest value each count option takes (replay's, and generate's, which are checked here
# too): far above any real run, small enough that nothing sized by them overflows or exhausts
# memory before the run starts, and a seed every JSON reader holds exactly.
MAX_LEVEL = 100_000
"""Sessions in flight at once (--concurrency, --sweep; generate --parallel)."""
MAX_SESSIONS = 1_000_000
"""Session instances per point (--sessions; generate -n)."""
MAX_GPUS = 1_000_000
"""GPUs behind the endpoint (--gpus)."""
MAX_CONTEXT = 100_000_000
"""Tokens per call (--max-context)."""
MAX_WORKERS = 1024
"""Ray workers (--workers)."""
MAX_SEED = 2**53
"""The largest seed, either sign (--seed): results.json stores it as a JSON number."""

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s|m)?\s*$")
_SLO_KEYS = ("ttft", "tpot", "e2e")


def _bad(message: str) -> PydanticCustomError:
    """A validation error whose message is ``message`` as written (no "Value error," prefix)."""
    return PydanticCustomError("replay_option", message)


def parse_duration_ns(text: str, default_unit: str = "s") -> int:
    """``2s``, ``50ms``, ``1.5`` (default unit) → ns."""
    m = _DUR.match(text)
    if not m:
        raise _bad(f"bad duration {text!r}; write e.g. 2s, 50ms, 1500us")
    ns = int(float(m.group(1)) * _UNITS[m.group(2) or default_unit])
    if ns <= 0:
        raise _bad(f"duration {text!r} must be more than 0")
    return ns


def parse_slo(text: str) -> dict[str, int | None] | None:
    """``ttft=2s,tpot=50ms,e2e=60s`` (any subset) → ``{"ttft_ns": …, "tpot_ns": …, "e2e_ns": …}``
    (None when empty)."""
    vals: dict[str, int] = {}
    for part in text.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in _SLO_KEYS:
            raise _bad(
                f"unknown objective {part.strip()!r}; write ttft=2s,tpot=50ms,e2e=60s (any subset)"
            )
        vals[f"{key}_ns"] = parse_duration_ns(value)
    return SLO(**vals).to_dict() if vals else None


def parse_levels(text: str) -> list[int]:
    """``1,2,4,8`` → [1, 2, 4, 8] (kept in the given order; positivity is the field's check).
    An empty list or an empty item (``1,,2``) is refused."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise _bad(
            "write the concurrency levels as integers separated by commas, e.g. 1,2,4,8"
        ) from None


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An RFC 9110 token: what a header name is."""
RESERVED_HEADERS = frozenset(
    {"accept", "anthropic-version", "authorization", "connection", "content-length"}
    | {"content-type", "host", "transfer-encoding", "x-api-key"}
)
"""Headers replay (or HTTP itself) sets on every request: --session-header may not be one."""
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
RESERVED_BODY_FIELDS = frozenset(
    {"messages", "model", "stream", "stream_options", "max_tokens", "max_completion_tokens"}
    | {"tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "top_k", "n"}
    | {"stop", "stop_sequences", "seed", "response_format", "logprobs", "top_logprobs"}
    | {"presence_penalty", "frequency_penalty", "logit_bias", "reasoning_effort", "reasoning"}
    | {"ignore_eos", "min_tokens", "input", "instructions", "max_output_tokens", "text"}
    | {"previous_response_id", "store", "truncation", "include", "system", "thinking"}
    | {"metadata", "modalities", "audio", "prediction", "service_tier", "background"}
)
"""Body fields of a request replay sends (Chat Completions, Responses, Messages), and the
extras it adds: --session-field may not overwrite one (``user``, an end-user id meant for
routing, is allowed)."""


def endpoint_problem(url: str) -> str | None:
    """Why the HTTP client cannot send to ``url`` (None when it can): a host that is no valid
    internationalized name (a bidi control, a disallowed character ...)."""
    try:
        httpx.URL(url)
    except httpx.InvalidURL as exc:
        return f"not a usable URL ({exc})"
    return None


def header_name_problem(name: str, reserved: frozenset[str] = RESERVED_HEADERS) -> str | None:
    """Why ``name`` cannot be a session header (None when it can): not an RFC 9110 token (a
    space, a colon, CR/LF ...), or one of the ``reserved`` headers."""
    if _TOKEN.fullmatch(name) is None:
        return "not an HTTP header name (RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"
    if name.lower() in reserved:
        return "a header every request sets already; name another"
    return None


_CHOICES: dict[str, tuple[str, ...]] = {
    "start_at": ("random", "zero"),
    "fit": FIT_MODES,
    "schedule": ("closed", "recorded"),
    "api": ("auto", "chat"),
    "salt_at": SALT_MODES,
}
"""The options that take one of a few words, and the words (the message names them in order)."""


class ReplayConfig(BaseModel):
    """Everything that decides what a replay sends and measures (never the API key)."""

    model_config = ConfigDict(extra="forbid")

    traces: list[str] = Field(description="trace files replayed, in the order given (arguments)")
    endpoint: str = Field(
        description="OpenAI-compatible base URL (…/v1), credentials stripped (--endpoint)"
    )
    model: str = Field(description="model name sent to the target (--model)")
    engine: str = Field(
        default="vllm",
        description=f"engine preset: {'|'.join(ENGINES)} (--engine)",
    )
    extras: bool = Field(
        default=True, description="send the preset's ignore_eos/min_tokens (--no-extras: off)"
    )
    levels: list[Annotated[int, Field(ge=1, le=MAX_LEVEL)]] = Field(
        default=[1],
        min_length=1,
        description="concurrency per point, the sweep levels (--sweep 1,2,4 or --concurrency N)",
    )
    arrival_rate: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="Poisson sessions/s instead of lanes (--arrival-rate)",
    )
    duration_s: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="measured seconds per point (--duration)",
    )
    sessions: int | None = Field(
        default=None, ge=1, le=MAX_SESSIONS, description="session instances per point (--sessions)"
    )
    gap_scale: float = Field(
        default=1.0,
        ge=0,
        allow_inf_nan=False,
        description="multiplier of recorded waits (--gap-scale)",
    )
    salt_at: SaltAt = Field(
        default="after-system",
        description="where each session instance's unique salt line goes: start (in front of "
        "everything but the tool schemas), after-system (after the tools and the leading "
        "system/developer messages, so those are shared across sessions), off (no salt) "
        "(--salt-at; --no-salt = off; an older file's salt: true/false = start/off)",
    )
    start_at: Literal["random", "zero"] = Field(
        default="random", description="random (mid-flight join) or zero (--start-at)"
    )
    slo: dict[str, Annotated[int, Field(gt=0)] | None] | None = Field(
        default=None,
        description="SLO thresholds in ns: ttft_ns, tpot_ns, e2e_ns (--slo ttft=2s,tpot=50ms)",
    )
    gpus: int | None = Field(
        default=None, ge=1, le=MAX_GPUS, description="GPUs behind the endpoint (--gpus)"
    )
    power_watts: float | None = Field(
        default=None,
        gt=0,
        allow_inf_nan=False,
        description="constant power draw in W (--power-watts)",
    )
    power: Literal["nvml"] | None = Field(
        default=None, description="'nvml' to measure energy (--power)"
    )
    scrape_metrics: str | None = Field(
        default=None, description="Prometheus URL scraped at 1 Hz (--scrape-metrics)"
    )
    target_tps_user: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        default=[160.0],
        min_length=1,
        description="headline targets, tokens/s per user (--target-tps-user)",
    )
    timeout_s: float = Field(
        default=600.0,
        gt=0,
        allow_inf_nan=False,
        description="per-request timeout, s: each request as a whole, and at most "
        "PROBE_TIMEOUT_S for the /models probe and warm-up (--timeout)",
    )
    max_error_rate: float = Field(
        default=0.5,
        ge=0,
        le=1,
        allow_inf_nan=False,
        description="failed share of all requests above which the run exits 3 (--max-error-rate)",
    )
    seed: int = Field(
        default=0,
        ge=-MAX_SEED,
        le=MAX_SEED,
        description="seed of join points, arrivals and synthesized prompts (--seed)",
    )
    schedule: Literal["closed", "recorded"] = Field(
        default="closed",
        description="closed: each call waits for its predecessors (lanes or arrivals); "
        "recorded: open loop, every call sent at its recorded offset from the trace's first "
        "submit, times --time-scale (--schedule)",
    )
    api: Literal["auto", "chat"] = Field(
        default="auto",
        description="auto: a call recorded in OpenAI Responses or Anthropic Messages is sent in "
        "that API when the target answers it (one probe per API), else as its Chat Completions "
        "translation; chat: every call as Chat Completions (--api)",
    )
    time_scale: float = Field(
        default=1.0,
        gt=0,
        allow_inf_nan=False,
        description="multiplier of the recorded offsets with --schedule recorded (0.5: twice "
        "as fast) (--time-scale)",
    )
    tokenizer: str | None = Field(
        default=None,
        description="tokenizer of synthesized prompts (content-free traces): o200k_base (the "
        "default when None), cl100k_base or hf:PATH/tokenizer.json (--tokenizer)",
    )
    session_header: str | None = Field(
        default=None, description="header carrying the session id (--session-header)"
    )
    session_field: str | None = Field(
        default=None, description="body field carrying the session id (--session-field)"
    )
    max_context: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONTEXT,
        description="fit the traces to this many tokens per call, prompt + output (--max-context)",
    )
    fit: FitMode = Field(
        default="cut-session",
        description="how --max-context fits a session with a call above it: cut-session "
        "(keep it up to that call) or drop-session (leave it out) (--fit)",
    )

    ray: str | None = Field(
        default=None,
        description="run on a Ray cluster (--ray [ADDRESS]): local (a Ray instance on this "
        "machine), auto, or HOST:PORT; None: one process",
    )
    workers: int | None = Field(
        default=None,
        ge=1,
        le=MAX_WORKERS,
        description="replay workers on the cluster (--workers; default: one per cluster CPU, "
        "at most the lanes)",
    )

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v not in ENGINES:
            raise _bad(f"unknown engine; choose one of: {', '.join(ENGINES)}")
        return v

    @field_validator("levels", mode="before")
    @classmethod
    def _levels_text(cls, v: Any) -> Any:
        return parse_levels(v) if isinstance(v, str) else v

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
            raise _bad(
                f"--no-salt is --salt-at off; it contradicts --salt-at {at}"
                if not salt
                else f"salt: true contradicts salt_at: {at}"
            )
        return data

    @property
    def salt(self) -> bool:
        """Whether session instances are salted (``salt_at`` is not ``off``)."""
        return self.salt_at != "off"

    @field_validator("start_at", "fit", "schedule", "api", "salt_at", mode="before")
    @classmethod
    def _one_of(cls, v: Any, info: ValidationInfo) -> Any:
        choices = _CHOICES[info.field_name or ""]
        if v not in choices:
            raise _bad(f"choose {' or '.join(choices)}")
        return v

    @field_validator("endpoint")
    @classmethod
    def _usable_endpoint(cls, v: str) -> str:
        problem = endpoint_problem(v)
        if problem is not None:
            raise _bad(problem)
        return v

    @field_validator("session_header")
    @classmethod
    def _header_name(cls, v: str | None) -> str | None:
        problem = None if v is None else header_name_problem(v)
        if problem is not None:
            raise _bad(problem)
        return v

    @field_validator("session_field")
    @classmethod
    def _body_field(cls, v: str | None) -> str | None:
        if v is not None and _FIELD.fullmatch(v) is None:
            raise _bad("a body field name: a letter or _, then letters, digits, _ . - (at most 64)")
        if v is not None and v in RESERVED_BODY_FIELDS:
            raise _bad("a field every request body may use already; name another (e.g. session_id)")
        return v

    @field_validator("tokenizer")
    @classmethod
    def _tokenizer_name(cls, v: str | None) -> str | None:
        if v is not None and not is_tokenizer_name(v):
            raise _bad("choose o200k_base, cl100k_base or hf:PATH/tokenizer.json")
        return v

    @field_validator("power", mode="before")
    @classmethod
    def _power_choice(cls, v: Any) -> Any:
        if v is not None and v != "nvml":
            raise _bad("only 'nvml' is supported (or give --power-watts)")
        return v

    @field_validator("slo", mode="before")
    @classmethod
    def _slo_text(cls, v: Any) -> Any:
        if isinstance(v, str):
            return parse_slo(v)
        if isinstance(v, dict):
            unknown = sorted(set(v) - {f"{k}_ns" for k in _SLO_KEYS})
            if unknown:
                raise _bad(
                    f"unknown objective(s) {', '.join(unknown)}; use ttft_ns, tpot_ns, e2e_ns"
                )
        return v

    @model_validator(mode="after")
    def _exclusive(self) -> ReplayConfig:
        if self.arrival_rate is not None and len(self.levels) > 1:
            raise _bad("--sweep varies --concurrency; it cannot be combined with --arrival-rate")
        if self.power is not None and self.power_watts is not None:
            raise _bad("give --power-watts or --power nvml, not both")
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
                raise _bad(
                    f"--schedule recorded sends every recorded call once at its recorded time; "
                    f"it cannot be combined with {', '.join(clash)} (use --time-scale)"
                )
        elif self.time_scale != 1.0:
            raise _bad("--time-scale scales --schedule recorded; the closed loop has --gap-scale")
        if self.workers is not None and self.ray is None:
            raise _bad("--workers counts Ray workers: give --ray [ADDRESS] too")
        if self.ray is not None and self.power is not None:
            raise _bad("--power nvml measures this machine's GPUs; with --ray give --power-watts")
        return self
