"""Where a replay sends and how: the target's URL and model, the engine preset and its extras,
the API, the per-request timeout, and where a session id goes for KV-aware routing."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentload.options.engines import ENGINES
from agentload.options.flags import Flag
from agentload.options.values import (
    BODY_FIELD,
    RESERVED_BODY_FIELDS,
    bad_value,
    endpoint_problem,
    header_name_problem,
    one_of,
)

__all__ = ["EndpointOptions"]


class EndpointOptions(BaseModel):
    """The target of a replay (never the API key: it comes from the environment)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: Annotated[str, Flag("OpenAI-compatible base URL (…/v1); kept without credentials.")]
    model: Annotated[str, Flag("Model name the target serves.")]
    engine: Annotated[str, Flag(f"{'|'.join(ENGINES)} (docs/engines.md).")] = "vllm"
    extras: Annotated[
        bool,
        Flag(
            "Send the engine preset's ignore_eos/min_tokens (--no-extras: do not).",
            name="--no-extras",
            invert=True,
        ),
    ] = True
    session_header: Annotated[
        str | None, Flag("Header carrying a session id (KV-aware routing).")
    ] = None
    session_field: Annotated[str | None, Flag("Body field carrying a session id.")] = None
    modeled_server: Annotated[
        str | None,
        Flag(
            "The target's timings are a model, not hardware (e.g. Dynamo's mocker workers): "
            "say which; the summary and report label them so."
        ),
    ] = Field(default=None, max_length=200)
    timeout_s: Annotated[
        float, Flag("Per-request timeout in seconds (the probe: at most 10).", name="--timeout")
    ] = Field(default=600.0, gt=0, allow_inf_nan=False)
    api: Annotated[
        Literal["auto", "chat"],
        Flag(
            "auto: calls recorded in Responses, Messages or Gemini (agentload record) go in "
            "that API when the target answers it, else as Chat Completions; chat: all as chat."
        ),
    ] = "auto"

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, v: str) -> str:
        if v not in ENGINES:
            raise bad_value(f"unknown engine; choose one of: {', '.join(ENGINES)}")
        return v

    @field_validator("api", mode="before")
    @classmethod
    def _api_word(cls, v: Any) -> Any:
        return one_of(v, ("auto", "chat"))

    @field_validator("endpoint")
    @classmethod
    def _usable_endpoint(cls, v: str) -> str:
        problem = endpoint_problem(v)
        if problem is not None:
            raise bad_value(problem)
        return v

    @field_validator("session_header")
    @classmethod
    def _header_name(cls, v: str | None) -> str | None:
        problem = None if v is None else header_name_problem(v)
        if problem is not None:
            raise bad_value(problem)
        return v

    @field_validator("session_field")
    @classmethod
    def _body_field(cls, v: str | None) -> str | None:
        if v is not None and BODY_FIELD.fullmatch(v) is None:
            raise bad_value(
                "a body field name: a letter or _, then letters, digits, _ . - (at most 64)"
            )
        if v is not None and v in RESERVED_BODY_FIELDS:
            raise bad_value(
                "a field every request body may use already; name another (e.g. session_id)"
            )
        return v
