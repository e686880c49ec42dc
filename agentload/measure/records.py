"""Per-request and per-session records of a replay point (times in ns from the point start).

They are pydantic dataclasses: the scheduler builds them while a point runs, and the same
classes are the ``requests``, ``sessions`` and ``window`` of a point in results.json (see
``results``), so a record is written and read back by one definition. A running replay builds
its records with ``unchecked(RequestRecord)(...)``: the same typed keywords, not validated
again (validating 31 fields and a list of inter-chunk times cost more than the rest of a
request's bookkeeping); a record read from a file is always validated. The derived values
(``lag_ns``, ``ttft_ns``, ``e2e_ns``, ``tpot_ns``) are computed fields: written to
results.json for readers, recomputed (never trusted) when a file is read. A request's
``phase`` is a ``Phase`` (a ``StrEnum``: written as its plain string value).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, ParamSpec, TypeVar

from pydantic import Field, computed_field
from pydantic.dataclasses import dataclass

__all__ = [
    "Phase",
    "Pool",
    "RequestRecord",
    "SessionResult",
    "Window",
    "label_phases",
    "steady_window",
    "unchecked",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")


def unchecked(cls: Callable[_P, _R]) -> Callable[_P, _R]:
    """``cls``'s constructor (a pydantic dataclass of this module) without validation: for
    records a running point builds from values its own typed code computed (see the module
    docstring). Keywords only; a field not given takes its default. It is compiled once per
    class, as ``dataclasses`` compiles an ``__init__``: one plain assignment a field."""
    fields: dict[str, Any] = getattr(cls, "__pydantic_fields__")  # noqa: B009
    if getattr(cls, "__setattr__", None) is not object.__setattr__:
        raise TypeError(f"{getattr(cls, '__name__', cls)}: a class with its own __setattr__")
    scope: dict[str, Any] = {"_cls": cls, "_new": object.__new__, "_MISSING": _MISSING}
    params, lines = [], []
    for name, info in fields.items():
        if info.is_required():
            params.append(name)
        else:
            scope[f"_d_{name}"] = info
            params.append(f"{name}=_MISSING")
            lines.append(
                f"    if {name} is _MISSING: {name} = _d_{name}.get_default(call_default_factory=True)"
            )
        lines.append(f"    rec.{name} = {name}")
    source = "\n".join(
        [f"def build(*, {', '.join(params)}):", "    rec = _new(_cls)", *lines, "    return rec"]
    )
    exec(source, scope)  # the field names of this module's own classes, nothing read
    return scope["build"]  # type: ignore[no-any-return]


_MISSING: Any = object()
"""An ``unchecked`` builder's default: the field was not given."""


class Phase(StrEnum):
    """Where a request fell in its point: its value is what results.json holds."""

    WARMUP = "warmup"
    """An unmeasured warm-up call."""
    RAMP = "ramp"
    """Sent before the measured window."""
    MEASURED = "measured"
    """Sent inside the measured window."""
    DRAIN = "drain"
    """Sent after the steady-state window ended."""


class Pool(StrEnum):
    """Where a worker sits, told by the requests it served."""

    AGGREGATED = "aggregated"
    """It computed prompts and generated their outputs."""
    PREFILL = "prefill"
    """It computed prompts whose outputs another worker generated."""
    DECODE = "decode"
    """It generated outputs of prompts another worker computed."""


@dataclass(slots=True)
class RequestRecord:
    """One request as sent and answered. Times are ns since the point's start."""

    session: int = Field(description="session instance number within the point")
    source: str = Field(description="key of the recorded session it replays")
    agent: str = Field(description="the recorded agent that made the call")
    call: str = Field(description="key of the recorded call (unique across the given traces)")
    seq: int = Field(description="the call's sequence number within its agent")
    turn_depth: int = Field(description="the call's index within its agent (0 = its first)")
    phase: Phase = Field(
        description="warmup (unmeasured warm-up call), ramp (sent before the measured "
        "window), measured, or drain (sent after the steady-state window ended)"
    )
    digest: str = Field(description="sha256 of the canonical unsalted traffic body")
    scheduled_ns: int = Field(description="when the schedule wanted it sent")
    send_ns: int = Field(description="when its first bytes went to the socket")
    end_ns: int = Field(description="when its stream ended (or it failed)")
    first_ns: int | None = Field(
        default=None, description="arrival of the first content or tool-call chunk"
    )
    status: int | None = Field(default=None, description="HTTP status, when one came back")
    error_kind: str | None = Field(
        default=None,
        description="None on success; http_<status>, timeout, connect, reset, truncated, "
        "stream_error, context_overflow, invalid_usage (a usage report that is not token "
        "counts) or client_error",
    )
    error: str | None = Field(default=None, description="what went wrong, in words")
    prompt_tokens: int | None = Field(default=None, description="server-reported prompt tokens")
    completion_tokens: int | None = Field(
        default=None, description="server-reported completion tokens"
    )
    cached_tokens: int | None = Field(
        default=None, description="server-reported cached prompt tokens"
    )
    expected_tokens: int = Field(default=0, description="the pinned output length")
    recorded_prompt_tokens: int = Field(default=0, description="prompt tokens of the recording")
    prompt_tokens_ours: int = Field(
        default=0,
        description="prompt tokens of the request as sent (salt included), in agentload's "
        "count (the trace's tokenizer); 0 when unknown",
    )
    mismatch: bool = Field(
        default=False,
        description="server-reported completion tokens differ from the expected (pinned) length",
    )
    ceiling_tokens: int = Field(
        default=0,
        description="prompt tokens the target can have cached for this request, the KV "
        "survival ceiling (see metrics.quality.KVSurvival)",
    )
    within_ceiling_tokens: int | None = Field(
        default=None,
        description="of ceiling_tokens, the prompt tokens reusable from the request's own "
        "session instance (the rest of the ceiling only another instance can have put in the "
        "cache); None in files written before it",
    )
    gap_ns: int | None = Field(
        default=None,
        description="actual idle time since the previous call of the same agent completed",
    )
    recorded_gap_ns: int | None = Field(
        default=None, description="recorded wait after the agent's previous call"
    )
    finish_reason: str | None = Field(default=None, description="the server's finish reason")
    prefill_worker: str | None = Field(
        default=None,
        description="the worker that computed its prompt, as the server named it (Dynamo's "
        "nvext.worker_id, asked for by --engine dynamo; a u64 as a decimal string); None when "
        "the server names none",
    )
    decode_worker: str | None = Field(
        default=None,
        description="the worker that generated its output (the same as prefill_worker on an "
        "aggregated worker; another one when prefill and decode are disaggregated)",
    )
    server_timing: dict[str, float] | None = Field(
        default=None,
        description="the server's own timing of it, its numeric fields as sent (Dynamo's "
        "nvext.timing: ttft_ms, prefill_wait_time_ms, prefill_time_ms, total_time_ms, "
        "kv_hit_rate: the router's predicted hit rate, router_queue_depth); None when absent",
    )
    itl_ns: tuple[int, ...] = Field(
        default_factory=tuple,
        description="inter-chunk latencies: differences between consecutive content-event arrivals",
    )

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @computed_field(  # type: ignore[prop-decorator]
        description="client lag: actual send minus scheduled send"
    )
    @property
    def lag_ns(self) -> int:
        return self.send_ns - self.scheduled_ns

    @computed_field(  # type: ignore[prop-decorator]
        description="time to first token: first chunk minus send"
    )
    @property
    def ttft_ns(self) -> int | None:
        return None if self.first_ns is None else self.first_ns - self.send_ns

    @computed_field(  # type: ignore[prop-decorator]
        description="end-to-end latency: stream end minus send"
    )
    @property
    def e2e_ns(self) -> int:
        return self.end_ns - self.send_ns

    @computed_field(  # type: ignore[prop-decorator]
        description="time per output token: (E2E - TTFT) / (output tokens - 1); None below 2"
    )
    @property
    def tpot_ns(self) -> float | None:
        ttft, out = self.ttft_ns, self.output_tokens
        return (self.e2e_ns - ttft) / (out - 1) if ttft is not None and out > 1 else None

    @property
    def output_tokens(self) -> int:
        """Server-reported completion tokens, else the expected (pinned) count."""
        return (
            self.completion_tokens if self.completion_tokens is not None else self.expected_tokens
        )

    @property
    def input_tokens(self) -> int:
        return self.prompt_tokens if self.prompt_tokens is not None else self.recorded_prompt_tokens

    @property
    def server_per_ours(self) -> float | None:
        """Server prompt tokens per agentload prompt token of this request (None unless both
        are known): what turns a count in agentload's tokens into the server's."""
        if self.prompt_tokens is None or self.prompt_tokens_ours <= 0:
            return None
        return self.prompt_tokens / self.prompt_tokens_ours


@dataclass(slots=True)
class SessionResult:
    """One replayed session instance."""

    session: int = Field(description="session instance number within the point")
    source: str = Field(description="key of the recorded session it replays")
    lane: int = Field(description="the lane that ran it (-1 for Poisson arrivals)")
    start_ns: int = Field(description="when it started")
    end_ns: int = Field(description="when its last request ended")
    joined_at_ns: int | None = Field(
        description="recorded time (from the session start) where it joined; None = from zero"
    )
    complete: bool = Field(description="every planned call was sent (False: the run stopped)")
    requests: int = Field(description="requests sent, warm-up included")
    warmup_requests: int = Field(description="warm-up requests sent")
    eval_passed: bool | None = Field(
        default=None,
        description="the session's success check passed (a live ``eval`` run); None: not checked",
    )


@dataclass(slots=True)
class Window:
    """The steady-state window of a point, ns since its start."""

    start_ns: int = Field(description="start of the measured window (end of warm-up)")
    end_ns: int = Field(description="end of the measured window")
    rule: str = Field(description="how the window was chosen, in words")

    @property
    def seconds(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9


def steady_window(start_ns: int, drain_ns: int, requests: list[RequestRecord], rule: str) -> Window:
    """The measured window ``[start, drain]`` (``rule`` says how they were chosen); when the
    load ended before ``start`` (no steady state), the whole run after ``start``."""
    if drain_ns > start_ns:
        return Window(start_ns, drain_ns, rule)
    ends = [r.end_ns for r in requests if r.phase != Phase.WARMUP]
    last = max(ends) if ends else start_ns
    return Window(
        start_ns,
        max(last, start_ns),
        "no steady state reached (load ended before warm-up did): the whole post-warm-up run",
    )


def label_phases(requests: list[RequestRecord], window: Window) -> None:
    """Label every request but warm-up by its send time: ``ramp`` before the window,
    ``measured`` inside it, ``drain`` after it."""
    for r in requests:
        if r.phase != Phase.WARMUP:
            t = r.send_ns
            r.phase = (
                Phase.RAMP
                if t < window.start_ns
                else Phase.DRAIN
                if t > window.end_ns
                else Phase.MEASURED
            )
