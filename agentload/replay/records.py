"""Per-request and per-session records of a replay point (times in ns from the point start)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = ["RequestRecord", "SessionResult", "Window", "from_dict"]


@dataclass(slots=True)
class RequestRecord:
    """One request as sent and answered. Times are ns since the point's start."""

    session: int
    """Session instance number within the point."""
    source: str
    """Key of the recorded session it replays."""
    agent: str
    call: str
    """Key of the recorded call (unique across the given traces)."""
    seq: int
    turn_depth: int
    """The call's index within its agent (0 = the agent's first call)."""
    phase: str
    """warmup (unmeasured warm-up call), ramp (sent before the measured window),
    measured, or drain (sent after the steady-state window ended)."""
    digest: str
    scheduled_ns: int
    send_ns: int
    end_ns: int
    first_ns: int | None = None
    status: int | None = None
    error_kind: str | None = None
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    expected_tokens: int = 0
    recorded_prompt_tokens: int = 0
    mismatch: bool = False
    """Server-reported completion tokens differ from the expected (pinned) length."""
    ceiling_tokens: int = 0
    gap_ns: int | None = None
    """Actual idle time since the previous call of the same agent completed."""
    recorded_gap_ns: int | None = None
    finish_reason: str | None = None
    itl_ns: list[int] = field(default_factory=list)
    """Inter-chunk latencies: differences between consecutive content-event arrivals."""

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @property
    def lag_ns(self) -> int:
        """Client lag: actual send minus scheduled send."""
        return self.send_ns - self.scheduled_ns

    @property
    def e2e_ns(self) -> int:
        return self.end_ns - self.send_ns

    @property
    def ttft_ns(self) -> int | None:
        return None if self.first_ns is None else self.first_ns - self.send_ns

    @property
    def output_tokens(self) -> int:
        """Server-reported completion tokens, else the expected (pinned) count."""
        return (
            self.completion_tokens if self.completion_tokens is not None else self.expected_tokens
        )

    @property
    def input_tokens(self) -> int:
        return self.prompt_tokens if self.prompt_tokens is not None else self.recorded_prompt_tokens

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["lag_ns"] = self.lag_ns
        d["ttft_ns"] = self.ttft_ns
        d["e2e_ns"] = self.e2e_ns
        out = self.output_tokens
        ttft = self.ttft_ns
        d["tpot_ns"] = (self.e2e_ns - ttft) / (out - 1) if ttft is not None and out > 1 else None
        return d


@dataclass(slots=True)
class SessionResult:
    """One replayed session instance."""

    session: int
    source: str
    lane: int
    start_ns: int
    end_ns: int
    joined_at_ns: int | None
    """Recorded time (from the session start) where the session joined; None = from zero."""
    complete: bool
    """Every planned call was sent (False when the run stopped first)."""
    requests: int
    warmup_requests: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Window:
    """The steady-state window of a point, ns since its start."""

    start_ns: int
    end_ns: int
    rule: str
    """How the window was chosen, in words."""

    @property
    def seconds(self) -> float:
        return max(0, self.end_ns - self.start_ns) / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {"start_ns": self.start_ns, "end_ns": self.end_ns, "rule": self.rule}


def from_dict(cls: type[Any], data: dict[str, Any]) -> Any:
    """Rebuild a record dataclass from its ``to_dict`` form (extra keys ignored)."""
    names = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in data.items() if k in names})
