"""``Outcome``: what happened to one request, as the client saw it (times, usage, failure).

Replay's scheduler turns each into a request record (``agentload.measure.records``); an agent's
call (``agents.llm``) asks for the answer too (``reply``, ``event_ns``) and reads an error
answer's body and ``Retry-After``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agentload.wire import WireReply

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
    body: bytes | None = None
    """An error answer's body (not HTTP 200), as far as it was read; a non-streamed
    answer's whole body (``StreamClient.post``)."""
    retry_after: str | None = None
    """An error answer's ``Retry-After`` header."""
    reply: WireReply | None = None
    """The answer in the chat shape, when it was asked for (``StreamClient.chat(reply=...)``)."""
    event_ns: list[int] | None = None
    """With ``reply``: the arrival time of every event, content or not."""
    prefill_worker: str | None = None
    """The worker that computed its prompt, as the server named it (Dynamo's ``nvext.worker_id``;
    a u64 kept as its decimal string); the same as ``decode_worker`` on an aggregated worker."""
    decode_worker: str | None = None
    """The worker that generated its output, as the server named it."""
    server_timing: dict[str, float] | None = None
    """The server's own timing of it (Dynamo's ``nvext.timing``: ``ttft_ms``, ``kv_hit_rate``,
    ``prefill_wait_time_ms``, ...), its numeric fields."""

    @property
    def ok(self) -> bool:
        return self.error_kind is None
