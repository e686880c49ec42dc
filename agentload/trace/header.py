"""Trace format v1: the header, the first record of every trace (``schema``: the records).

The header names the schema version, the tool that wrote the file, the clock anchor of its
monotonic times, the tokenizer of our token counts, the endpoint, the scenario and seed, the host,
and for an imported trace its source; a generated trace also its token calibration and its
modeled waits' model (``WaitsInfo``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentload.fitted import WaitModel

__all__ = [
    "MAX_CALL_TOKENS",
    "SCHEMA",
    "SCHEMA_MAJOR",
    "SCHEMA_MINOR",
    "ClockAnchor",
    "Header",
    "HostFacts",
    "RecordModel",
    "SourceInfo",
    "TokenCalibration",
    "WaitsInfo",
]

SCHEMA_MAJOR = 1
SCHEMA_MINOR = 3
SCHEMA = f"agentload.trace/{SCHEMA_MAJOR}.{SCHEMA_MINOR}"
"""The schema id new traces carry. 1.1 added ``llm_call.turn``, ``llm_call.wait_ns`` and
``header.waits`` (all optional); 1.2 added ``gemini`` to ``llm_call.request.api`` (Google's
Gemini API, which a 1.1 reader refuses); a 1.x reader reads any 1.y file, a field it does not
know included (records allow extra keys), and a file of 1 (``agentload.trace/1``) is 1.0."""

MAX_CALL_TOKENS = 1 << 24
"""The largest token count one call may hold (16,777,216: above every model's context today);
a larger one is a named error when a trace is read, so nothing is sized by it (replay
synthesizes a content-free prompt of that many tokens)."""


class RecordModel(BaseModel):
    """The base of every record model: extra keys allowed (a newer writer's fields read)."""

    model_config = ConfigDict(extra="allow", frozen=False)


class ClockAnchor(RecordModel):
    """One instant read on both clocks, to turn monotonic ns into wall-clock time."""

    unix_ns: int = Field(description="time.time_ns() at the anchor instant")
    mono_ns: int = Field(description="time.perf_counter_ns() at the same instant")


class HostFacts(RecordModel):
    """The machine that recorded the trace."""

    python: str = Field(description="Python version")
    os: str = Field(description="platform string")
    cpu_count: int = Field(description="logical CPUs")
    hostname: str | None = Field(default=None, description="host name, when not redacted")


class TokenCalibration(RecordModel):
    """How many server tokens one token of ours is, measured once before the sessions."""

    server_per_ours: float = Field(
        gt=0, description="server tokens per token of ours (1.0 when not measured)"
    )
    sample_tokens_ours: int | None = Field(
        default=None, ge=0, description="our count of the calibration sample"
    )
    sample_tokens_server: int | None = Field(
        default=None, ge=0, description="the server's usage.prompt_tokens for it"
    )
    error: str | None = Field(
        default=None, description="why the ratio was not measured (1.0 is used), if so"
    )


class SourceInfo(RecordModel):
    """Where an imported trace came from (``agentload trace import``)."""

    format: str = Field(
        description="source format: weka, tracelab, mooncake, dynamo (content-free); claude-code, "
        "codex (full content)"
    )
    files: list[str] = Field(
        description="the source files' names, in the order read (the first 1,000; "
        "files_total counts them all)"
    )
    files_total: int | None = Field(
        default=None, ge=0, description="source files read, when more than ``files`` names"
    )
    block_size: int | None = Field(
        default=None,
        ge=1,
        description="tokens per block of the source's hash ids (content-free imports only)",
    )
    hash_id_scope: str | None = Field(
        default=None,
        description="content-free imports: 'local': a hash id means one block within one source "
        "conversation (ids are prefixed per conversation in llm_call.prefix); 'global': across "
        "the whole source",
    )
    records: int = Field(default=0, ge=0, description="source records read (lines, requests)")
    derived: dict[str, str] = Field(
        default_factory=dict,
        description="what replay needs that the source does not hold, and how the import "
        "derived it (field -> how), e.g. 'tools': 'the names the model called, empty schemas'",
    )
    deviations: dict[str, int] = Field(
        default_factory=dict,
        description="departures from the source's schema that lose no meaning, accepted and "
        "counted (kind -> count), e.g. 'subagent_type: null'",
    )


class WaitsInfo(RecordModel):
    """The modeled waits of a generated trace (``agentload.fitted``): the fitted model each
    ``llm_call.wait_ns`` was drawn from, and whether the recorded times include them."""

    model: WaitModel = Field(description="the distributions, their parameters and source")
    seed: int = Field(
        description="the run's seed (the draws themselves follow each session's index in the "
        "run and each agent's count of gaps: agentload.fitted.SessionWaits)"
    )
    slept: bool = Field(
        default=False,
        description="the agents slept through the waits (generate --pace real), so the "
        "recorded times include them; false: the recorded times are the measured ones and "
        "each wait is added on top (agentload.trace.timeline)",
    )


class Header(RecordModel):
    """First record of every trace."""

    type: Literal["header"] = "header"
    schema_: str = Field(default=SCHEMA, alias="schema", description="'agentload.trace/MAJOR'")
    tool_version: str = Field(description="agentload version that wrote the file")
    created_at: str = Field(description="UTC ISO-8601 creation time")
    clock: ClockAnchor = Field(description="wall-clock anchor of the monotonic ns timestamps")
    tokenizer: str = Field(description="tokenizer of our own token counts, e.g. o200k_base")
    block_size: int = Field(
        default=16, ge=1, description="tokens per prefix block in llm_call.prefix"
    )
    endpoint: str | None = Field(
        default=None, description="endpoint base URL, credentials stripped"
    )
    model: str | None = Field(default=None, description="model name sent to the endpoint")
    scenario: str | None = Field(default=None, description="scenario name")
    scenario_hash: str | None = Field(
        default=None, description="content hash of the full scenario config"
    )
    scenario_config: dict[str, Any] | None = Field(
        default=None, description="the resolved scenario"
    )
    seed: int | None = Field(default=None, description="seed of the generating run")
    host: HostFacts | None = Field(default=None, description="host facts")
    redacted: bool = Field(
        default=False,
        description="no message text in this trace (imported or redacted): replay synthesizes "
        "each prompt from its block ids",
    )
    source: SourceInfo | None = Field(
        default=None, description="the source format and files of an imported trace"
    )
    token_calibration: TokenCalibration | None = Field(
        default=None,
        description="generate's server/ours token ratio (absent in traces before it existed)",
    )
    waits: WaitsInfo | None = Field(
        default=None,
        description="the modeled waits of the trace's calls (llm_call.wait_ns): the model they "
        "were drawn from; absent: no modeled waits",
    )

    model_config = ConfigDict(extra="allow", populate_by_name=True)
