"""``Outcome``: what happened to one request, as the client saw it (times, usage, failure).

The scheduler turns each into a request record (``agentload.measure.records``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Outcome"]


@dataclass(slots=True)
class Outcome:
    """What happened to one request (all times are clock readings in ns)."""

    send_ns: int
    end_ns: int = 0
    first_ns: int | None = None
    chunk_ns: list[int] = field(default_factory=list)
    """Arrival time of every content event (the first is ``first_ns``)."""
    status: int | None = None
    error_kind: str | None = None
    """None on success; an ``ErrorKind`` or ``http_<status>`` (``errorkinds``)."""
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None
