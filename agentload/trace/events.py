"""The kinds of ``event`` records and the typed payload of each.

An ``event`` record (``schema.EventRecord``) is something that happened besides calls and
tools: a retry, an error, a follow-up, the success check, the writer's end of file, a request
the recording proxy could not turn into a call. Each kind agentload writes is an ``EventKind``
and has one payload class here (a frozen dataclass, ``EventPayload``): its fields are the
record's ``details``, in the order declared, so a producer writes

    await recorder.event(Retry(call_id=cid, attempt=2, error=why), agent_id=aid)

and ``EventRecord.of(payload, ns)`` is the record. A field made with ``absent()`` is left out
of ``details`` when it is None (a key some producers of the kind write and others do not); any
other field is always there, None included. On disk ``kind`` stays a string: a file may hold a
kind not listed here (an older or another tool's trace), and it reads as it is.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar

__all__ = [
    "NOT_RECORDED",
    "PAYLOADS",
    "ContextRefresh",
    "Continue",
    "Embedding",
    "Error",
    "Eval",
    "EventKind",
    "EventPayload",
    "FollowUp",
    "RecordError",
    "Retry",
    "TraceEnd",
    "UnknownPreviousResponse",
    "UnreadRequest",
    "WebSocket",
    "absent",
]


class EventKind(StrEnum):
    """``event.kind`` of each event agentload writes (the string on disk is the value)."""

    RETRY = "retry"
    ERROR = "error"
    CONTINUE = "continue"
    FOLLOW_UP = "follow_up"
    CONTEXT_REFRESH = "context_refresh"
    EVAL = "eval"
    TRACE_END = "trace_end"
    UNREAD_REQUEST = "unread_request"
    UNKNOWN_PREVIOUS_RESPONSE = "unknown_previous_response"
    RECORD_ERROR = "record_error"
    WEBSOCKET = "websocket"
    EMBEDDING = "embedding"


NOT_RECORDED = frozenset({EventKind.UNREAD_REQUEST, EventKind.RECORD_ERROR})
"""``event`` kinds that stand for a request the trace holds no call of: a body the recorder
could not read (or a WebSocket message, relayed unread), a failure inside the recorder. The
recording proxy's stop line and ``trace validate`` count them."""

_ABSENT = "absent_when_none"


def absent() -> Any:
    """A field that defaults to None and is left out of ``details`` when None."""
    return field(default=None, metadata={_ABSENT: True})


@dataclass(frozen=True, kw_only=True)
class EventPayload:
    """The facts of one event (a subclass per kind); ``details`` is what the record holds."""

    kind: ClassVar[EventKind]

    def details(self) -> dict[str, Any]:
        """The fields as the record's ``details``: in declared order, ``absent()`` ones only
        when set."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None or not f.metadata.get(_ABSENT):
                out[f.name] = value
        return out


@dataclass(frozen=True, kw_only=True)
class Retry(EventPayload):
    """A model call's attempt failed and is tried again (``agents.steps``)."""

    kind: ClassVar[EventKind] = EventKind.RETRY
    call_id: str
    attempt: int
    error: str


@dataclass(frozen=True, kw_only=True)
class Error(EventPayload):
    """A failure: a model call's last attempt (its call, attempt, reason, time since it was
    sent, and the cause when one is known), or a session's error (``error`` alone)."""

    kind: ClassVar[EventKind] = EventKind.ERROR
    call_id: str | None = absent()
    attempt: int | None = absent()
    reason: str | None = absent()
    error: str
    elapsed_s: float | None = absent()
    cause: str | None = absent()


@dataclass(frozen=True, kw_only=True)
class Continue(EventPayload):
    """An agent's reply was cut at the length limit and it is asked to go on; ``after``: the
    id of the call whose reply was cut, if known."""

    kind: ClassVar[EventKind] = EventKind.CONTINUE
    after: str | None


@dataclass(frozen=True, kw_only=True)
class FollowUp(EventPayload):
    """The scenario's follow-up number ``index`` was sent to the orchestrator."""

    kind: ClassVar[EventKind] = EventKind.FOLLOW_UP
    index: int


@dataclass(frozen=True, kw_only=True)
class ContextRefresh(EventPayload):
    """The harness refreshed the orchestrator's system message before call ``call_id`` (its
    ``count``-th time): every later call's prompt differs from that point on, as a real agent's
    does when its system prompt, tools or memory change mid-session (a modeled prefix break:
    ``Scenario.pacing.context_refresh_per_call``)."""

    kind: ClassVar[EventKind] = EventKind.CONTEXT_REFRESH
    call_id: str
    count: int


@dataclass(frozen=True, kw_only=True)
class Eval(EventPayload):
    """The session's success check: its verdict, exit, time and output's tail; for an eval
    task, its suite's result (None when unreadable) and the task's name."""

    kind: ClassVar[EventKind] = EventKind.EVAL
    passed: bool
    exit_code: int | None
    timed_out: bool
    duration_s: float
    output_tail: str
    suite: dict[str, Any] | None = None
    task: str | None = None

    def details(self) -> dict[str, Any]:
        """As ``EventPayload.details``; ``suite`` and ``task`` only for an eval task."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.task is None:
            del out["suite"], out["task"]
        return out


@dataclass(frozen=True, kw_only=True)
class TraceEnd(EventPayload):
    """The writer closed the file, having written ``records`` records (this one included)."""

    kind: ClassVar[EventKind] = EventKind.TRACE_END
    records: int


@dataclass(frozen=True, kw_only=True)
class UnreadRequest(EventPayload):
    """A request the recording proxy relayed but could not read (its API, the error); a
    WebSocket message also names its path and transport; a request to a path that is no API
    the proxy reads, its method, path (without the query), the answer's status and the bytes
    each way; a request of a known API that is recorded as no call (legacy Completions, Ollama's
    native API) names it in ``request_kind`` (since 1.3)."""

    kind: ClassVar[EventKind] = EventKind.UNREAD_REQUEST
    api: str | None
    request_kind: str | None = absent()
    path: str | None = absent()
    transport: str | None = absent()
    method: str | None = absent()
    status: int | None = absent()
    request_bytes: int | None = absent()
    answer_bytes: int | None = absent()
    error: str


@dataclass(frozen=True, kw_only=True)
class UnknownPreviousResponse(EventPayload):
    """A Responses request continues a response the proxy does not hold (its id, clipped)."""

    kind: ClassVar[EventKind] = EventKind.UNKNOWN_PREVIOUS_RESPONSE
    previous_response_id: str


@dataclass(frozen=True, kw_only=True)
class RecordError(EventPayload):
    """The recorder failed on a request (``where``: ``begin`` or ``end``); it was still
    relayed."""

    kind: ClassVar[EventKind] = EventKind.RECORD_ERROR
    where: str
    error: str


@dataclass(frozen=True, kw_only=True)
class WebSocket(EventPayload):
    """A WebSocket tunnel ended: its path and API, when it opened, messages and bytes each
    way, and why it ended."""

    kind: ClassVar[EventKind] = EventKind.WEBSOCKET
    path: str
    api: str | None
    open_ns: int
    agent_messages: int
    upstream_messages: int
    agent_bytes: int
    upstream_bytes: int
    end: str


@dataclass(frozen=True, kw_only=True)
class Embedding(EventPayload):
    """An embeddings request the recording proxy relayed (OpenAI's or Azure's ``embeddings``,
    Gemini's ``:embedContent``, Ollama's ``/api/embed``): no LLM call and not unread, counted
    apart (since 1.3); its method, path (without the query), the answer's status and the bytes
    each way."""

    kind: ClassVar[EventKind] = EventKind.EMBEDDING
    method: str
    path: str
    status: int | None
    request_bytes: int
    answer_bytes: int


PAYLOADS: dict[EventKind, type[EventPayload]] = {
    p.kind: p
    for p in (
        Retry,
        Error,
        Continue,
        FollowUp,
        ContextRefresh,
        Eval,
        TraceEnd,
        UnreadRequest,
        UnknownPreviousResponse,
        RecordError,
        WebSocket,
        Embedding,
    )
}
"""The payload class of each kind."""
