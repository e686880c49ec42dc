"""Typed event payloads: each kind's details on disk, and kinds this version does not know."""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import pytest

from agentload.agents.tracing import SessionStats, SessionStatus
from agentload.trace import EventRecord, TraceWriter, read_trace
from agentload.trace.events import (
    PAYLOADS,
    ContextRefresh,
    Continue,
    Embedding,
    Error,
    Eval,
    EventKind,
    EventPayload,
    FollowUp,
    RecordError,
    Retry,
    TraceEnd,
    UnknownPreviousResponse,
    UnreadRequest,
    WebSocket,
)
from agentload.trace.schema import record_adapter
from agentload.trace.writer import encode_record

from .conftest import header

WS = WebSocket(
    path="/v1/responses",
    api="responses",
    open_ns=5,
    agent_messages=2,
    upstream_messages=9,
    agent_bytes=300,
    upstream_bytes=4000,
    end="closed",
)
SUITE = {"passed": 3, "failed": 0}

# Each payload and the details its producer wrote before payloads were typed (keys in order).
CASES: list[tuple[EventPayload, dict[str, Any]]] = [
    (
        Retry(call_id="c1", attempt=1, error="HTTP 503"),
        {"call_id": "c1", "attempt": 1, "error": "HTTP 503"},
    ),
    (
        Error(call_id="c1", attempt=3, reason="endpoint_error", error="HTTP 503", elapsed_s=1.5),
        {
            "call_id": "c1",
            "attempt": 3,
            "reason": "endpoint_error",
            "error": "HTTP 503",
            "elapsed_s": 1.5,
        },
    ),
    (
        Error(call_id="c1", attempt=1, reason="context_limit", error="e", elapsed_s=0.1, cause="c"),
        {
            "call_id": "c1",
            "attempt": 1,
            "reason": "context_limit",
            "error": "e",
            "elapsed_s": 0.1,
            "cause": "c",
        },
    ),
    (Error(error="RuntimeError: boom"), {"error": "RuntimeError: boom"}),
    (Continue(after="c7"), {"after": "c7"}),
    (Continue(after=None), {"after": None}),
    (FollowUp(index=2), {"index": 2}),
    (ContextRefresh(call_id="s0.orch.7", count=1), {"call_id": "s0.orch.7", "count": 1}),
    (
        Eval(passed=True, exit_code=0, timed_out=False, duration_s=2.5, output_tail="ok"),
        {
            "passed": True,
            "exit_code": 0,
            "timed_out": False,
            "duration_s": 2.5,
            "output_tail": "ok",
        },
    ),
    (
        Eval(
            passed=False,
            exit_code=None,
            timed_out=True,
            duration_s=60.0,
            output_tail="",
            suite=None,
            task="t1",
        ),
        {
            "passed": False,
            "exit_code": None,
            "timed_out": True,
            "duration_s": 60.0,
            "output_tail": "",
            "suite": None,
            "task": "t1",
        },
    ),
    (
        Eval(
            passed=True,
            exit_code=0,
            timed_out=False,
            duration_s=1.0,
            output_tail="x",
            suite=SUITE,
            task="t2",
        ),
        {
            "passed": True,
            "exit_code": 0,
            "timed_out": False,
            "duration_s": 1.0,
            "output_tail": "x",
            "suite": SUITE,
            "task": "t2",
        },
    ),
    (TraceEnd(records=12), {"records": 12}),
    (
        UnreadRequest(api="chat", error="body: not JSON"),
        {"api": "chat", "error": "body: not JSON"},
    ),
    (
        UnreadRequest(api=None, path="/ws", transport="websocket", error="relayed"),
        {"api": None, "path": "/ws", "transport": "websocket", "error": "relayed"},
    ),
    (
        UnknownPreviousResponse(previous_response_id="resp_1"),
        {"previous_response_id": "resp_1"},
    ),
    (RecordError(where="begin", error="KeyError: x"), {"where": "begin", "error": "KeyError: x"}),
    (
        UnreadRequest(api=None, request_kind="ollama", path="/api/chat", error="not recorded"),
        {"api": None, "request_kind": "ollama", "path": "/api/chat", "error": "not recorded"},
    ),
    (
        Embedding(
            method="POST", path="/v1/embeddings", status=200, request_bytes=9, answer_bytes=40
        ),
        {
            "method": "POST",
            "path": "/v1/embeddings",
            "status": 200,
            "request_bytes": 9,
            "answer_bytes": 40,
        },
    ),
    (
        WS,
        {
            "path": "/v1/responses",
            "api": "responses",
            "open_ns": 5,
            "agent_messages": 2,
            "upstream_messages": 9,
            "agent_bytes": 300,
            "upstream_bytes": 4000,
            "end": "closed",
        },
    ),
]


def test_every_kind_has_one_payload_and_a_case() -> None:
    assert set(PAYLOADS) == set(EventKind)
    assert all(cls.kind is kind for kind, cls in PAYLOADS.items())
    assert {type(p).kind for p, _ in CASES} == set(EventKind)


@pytest.mark.parametrize(("payload", "details"), CASES)
def test_payload_round_trips_through_the_record(
    payload: EventPayload, details: dict[str, Any]
) -> None:
    rec = EventRecord.of(payload, 42, session_id="s1", agent_id="a1")
    back = record_adapter.validate_json(encode_record(rec))
    assert isinstance(back, EventRecord)
    assert back.kind == payload.kind and type(back.kind) is str
    assert back.details == details and list(back.details) == list(details)
    assert (back.ns, back.session_id, back.agent_id) == (42, "s1", "a1")
    assert type(payload)(**back.details) == payload
    assert pickle.loads(pickle.dumps(payload)) == payload  # the relay's pipe to the recorder


async def test_a_kind_this_version_does_not_know_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "t.agentload.jsonl.zst"
    async with TraceWriter(path, header()) as w:
        await w.write({"type": "event", "kind": "compaction", "ns": 1, "details": {"n": 3}})
        await w.write(EventRecord(kind="note", ns=2))
        await w.write(EventRecord.of(FollowUp(index=0), 3, session_id="s1"))
    events = [r for r in read_trace(path) if isinstance(r, EventRecord)]
    assert [(e.kind, e.details) for e in events[:3]] == [
        ("compaction", {"n": 3}),
        ("note", {}),
        ("follow_up", {"index": 0}),
    ]
    assert events[-1].kind == EventKind.TRACE_END and events[-1].details == {"records": 5}
    assert "compaction" not in set(EventKind)


def test_session_status_is_the_string_shown() -> None:
    stats = SessionStats(session_id="s1", start_ns=0)
    assert stats.status is SessionStatus.STARTING
    assert [str(s) for s in SessionStatus] == [
        "starting",
        "workspace",
        "sandbox",
        "context",
        "running",
        "eval",
        "closing",
        "ended",
    ]
    assert f"{SessionStatus.RUNNING}" == "running" == SessionStatus.RUNNING
