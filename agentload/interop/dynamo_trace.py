"""Import: NVIDIA Dynamo's request trace (``dynamo.request.trace.v1``: agent tracing).

A Dynamo frontend started with ``DYN_REQUEST_TRACE=1`` writes one JSONL line per record, each
wrapped as ``{"timestamp": ms since the sink started, "event": RECORD}`` (the ``jsonl`` sink at
the literal ``DYN_REQUEST_TRACE_OUTPUT_PATH``; the default ``jsonl_gz`` sink as rotating
``PREFIX.NNNNNN.jsonl.gz`` segments). A ``request_end`` record is one LLM request, written when
its stream ends: ``agent_context`` (``session_id``, ``parent_session_id`` from the
``X-Dynamo-Session-ID`` / ``X-Dynamo-Parent-Session-ID`` headers, ``input_trigger``) and
``request`` (token counts, ``request_received_ms``, ``ttft_ms``, ``total_time_ms``,
``finish_reason_metadata``, and ``replay``: ``trace_block_size``, ``input_length``,
``input_sequence_hashes``, Dynamo's rolling block hashes). ``tool_start`` / ``tool_end`` /
``tool_error`` records are the harness's tool events relayed from Dynamo's ZMQ tool-event
ingress (``tool``: ``tool_call_id``, ``tool_class``, start and end times, status).

This module reads the records into small tuples (a session's rows may be anywhere in the files:
a request is written when it ends); ``dynamo_tree`` builds the sessions, agents, calls and tool
calls from them, and ``dynamo_import`` writes them as a trace. The mapping is in docs/trace-formats.md ("Import: Dynamo request traces").

The schema is what the Dynamo 1.6.1 frontend writes (its Rust types: every field but
``schema``, ``event_type``, ``event_time_unix_ms``, ``request.request_id`` and a tool's
``tool_call_id`` / ``tool_class`` is optional and absent when not observed). What departs from
it without losing meaning (a key it does not write, a null, a number as a string, a record
kind it does not write, a line that is not a record) is accepted and counted
(``content_free.Deviations``), one warning line at the end.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentload.interop.content_free import (
    At,
    Deviations,
    Progress,
    extra_keys,
    need_ids,
    need_int,
    need_str,
    need_tokens,
    opt_num,
    opt_str,
    show,
    time_s,
)
from agentload.interop.import_io import json_lines

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "SCHEMA",
    "Context",
    "Request",
    "Rows",
    "ToolEvent",
    "block_size_of",
    "looks_like_dynamo",
    "read_rows",
]

SCHEMA = "dynamo.request.trace.v1"
DEFAULT_BLOCK_SIZE = 64
"""The header's block size when no record carries ``replay`` (Dynamo's default KV block)."""

# This format's own deviations: an ``event_type`` Dynamo 1.6.1 does not write, a line with
# neither a wrapped nor a bare record (an uploader's marker), a ``schema`` other than v1.
UNKNOWN_KIND = "unknown record kind, skipped"
NOT_A_RECORD = "no record in the line, skipped"
OTHER_SCHEMA = "another schema, read as v1"

_ENVELOPE_KEYS = frozenset(("timestamp", "event"))
_RECORD_KEYS = frozenset(
    (
        "schema",
        "event_type",
        "event_time_unix_ms",
        "event_source",
        "agent_context",
        "request",
        "tool",
        "payload",
    )
)
_CONTEXT_KEYS = frozenset(
    (
        "session_id",
        "parent_session_id",
        "session_final",
        "agent_headers",
        "input_trigger",
        "trajectory_id",
        "parent_trajectory_id",
        "session_type_id",
    )
)
_REQUEST_KEYS = frozenset(
    (
        "request_id",
        "x_request_id",
        "model",
        "input_tokens",
        "output_tokens",
        "cached_tokens",
        "request_received_ms",
        "prefill_wait_time_ms",
        "prefill_time_ms",
        "ttft_ms",
        "total_time_ms",
        "avg_itl_ms",
        "kv_hit_rate",
        "kv_transfer_estimated_latency_ms",
        "queue_depth",
        "worker",
        "replay",
        "finish_reason_metadata",
    )
)
_REPLAY_KEYS = frozenset(("trace_block_size", "input_length", "input_sequence_hashes"))
_FINISH_KEYS = frozenset(
    ("finish_reason", "backend_finish_reason", "stop_reason", "tool_calls", "choices")
)
_CALLED_KEYS = frozenset(("choice_index", "tool_call_index", "id", "name"))
_TOOL_KEYS = frozenset(
    (
        "tool_call_id",
        "tool_class",
        "started_at_unix_ms",
        "ended_at_unix_ms",
        "status",
        "duration_ms",
        "output_tokens",
        "output_bytes",
        "tool_name_hash",
        "error_type",
    )
)
TOOL_EVENTS = frozenset(("tool_start", "tool_end", "tool_error"))
_NOT_READ = frozenset(("request_payload",))  # documented; payloads are not content-free


@dataclass(frozen=True, slots=True)
class Context:
    """A record's ``agent_context``: its Dynamo session, that session's parent, and what
    triggered the request (``user_message``, ``tool_result``, ``other``)."""

    sid: str | None
    parent: str | None
    trigger: str | None = None


@dataclass(frozen=True, slots=True)
class Request:
    """One ``request_end`` record (times in ms since 1970, as Dynamo writes them)."""

    at: At
    ctx: Context
    received_ms: float
    ttft_ms: float | None  # (offsets from received_ms, kept apart: a float of ms since
    total_ms: float  # 1970 holds whole ms exactly, not their sum with a fraction)
    n_in: int
    n_out: int
    cached: int | None
    model: str | None
    block_size: int | None
    hashes: tuple[int, ...]
    finish: str | None
    called: tuple[tuple[str, str], ...]  # (tool call id, name) the model called
    request_id: str | None

    @property
    def end_ms(self) -> float:
        return self.received_ms + self.total_ms


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """One ``tool_start`` / ``tool_end`` / ``tool_error`` record (times in ms since 1970)."""

    at: At
    ctx: Context
    kind: str
    time_ms: float
    call_id: str
    name: str
    start_ms: float | None
    end_ms: float | None
    duration_ms: float | None
    failed: str | None  # the error (error_type, else the status) of a failed tool
    output_bytes: int | None
    output_tokens: int | None


@dataclass
class Rows:
    """What the files hold: the requests and tool events, and what was left out (a count per
    reason, for the summary line)."""

    requests: list[Request] = field(default_factory=list)
    tools: list[ToolEvent] = field(default_factory=list)
    left_out: Counter[str] = field(default_factory=Counter)
    lines: int = 0


def looks_like_dynamo(first: dict[str, Any]) -> bool:
    """Whether a JSONL file's first object is a Dynamo request-trace record (wrapped or bare)."""
    event = first.get("event")
    rec = event if isinstance(event, dict) and "schema" not in first else first
    schema = rec.get("schema")
    return isinstance(schema, str) and schema.startswith("dynamo.request.trace")


def block_size_of(requests: list[Request], default: int) -> int:
    """The one ``replay.trace_block_size`` of the import (``default`` when no request carries
    one); two sizes are an error."""
    size: int | None = None
    for r in requests:
        if r.block_size is None or r.block_size == size:
            continue
        if size is not None:
            r.at.sub("request.replay").fail(
                "trace_block_size",
                f"{r.block_size} differs from {size} of an earlier record (one block size an "
                "import)",
            )
        size = r.block_size
    return size or default


def read_rows(paths: list[Path], dev: Deviations) -> Rows:
    """Every record of ``paths`` read (one line at a time), as requests and tool events."""
    rows = Rows()
    progress = Progress("reading dynamo")
    for path in paths:
        for lineno, obj in json_lines(path):
            rows.lines += 1
            progress.done = rows.lines
            progress.show()
            at = At(str(path), f"line {lineno}", dev)
            rec = _unwrap(obj, at)
            if rec is not None:
                _record(rec, at, rows)
    return rows


def _unwrap(obj: dict[str, Any], at: At) -> dict[str, Any] | None:
    """The record of one line: its ``event`` (the file sinks' wrapping), or the line itself
    when it is a bare record (the stderr sink's, or ``jq .event``'s); else None, counted."""
    event = obj.get("event")
    if "schema" not in obj and isinstance(event, dict):
        extra_keys(obj, _ENVELOPE_KEYS, at)
        return event
    if "schema" in obj:
        return obj
    at.deviate("event", NOT_A_RECORD)
    return None


def _record(rec: dict[str, Any], at: At, rows: Rows) -> None:
    """Read one record into ``rows``."""
    extra_keys(rec, _RECORD_KEYS, at)
    schema = need_str(rec, "schema", at)
    if schema != SCHEMA:
        at.deviate("schema", OTHER_SCHEMA)
    kind = need_str(rec, "event_type", at)
    if kind in _NOT_READ:
        rows.left_out[f"{kind} records not read (content-free import)"] += 1
        return
    if kind != "request_end" and kind not in TOOL_EVENTS:
        at.deviate("event_type", UNKNOWN_KIND)
        return
    time_ms = _ms(rec, "event_time_unix_ms", at)
    if time_ms is None:
        at.fail("event_time_unix_ms", "missing (a number)")
    ctx = _context(rec, at)
    if kind == "request_end":
        rows.requests.append(_request(rec, at, ctx, time_ms))
        return
    if ctx.sid is None:
        rows.left_out["tool events without a session_id left out"] += 1
        return
    rows.tools.append(_tool(rec, at, ctx, kind, time_ms))


def _context(rec: dict[str, Any], at: At) -> Context:
    """The record's ``agent_context`` (none: a request without session identity)."""
    v = rec.get("agent_context")
    if v is None:
        return Context(None, None)
    if not isinstance(v, dict):
        at.fail("agent_context", f"expected an object, got {show(v)}")
    cat = at.sub("agent_context")
    extra_keys(v, _CONTEXT_KEYS, cat)
    sid = opt_str(v, "session_id", cat) or opt_str(v, "trajectory_id", cat)
    parent = opt_str(v, "parent_session_id", cat) or opt_str(v, "parent_trajectory_id", cat)
    trigger = opt_str(v, "input_trigger", cat)
    sid = sid.strip() if sid else None
    parent = parent.strip() if parent else None
    return Context(sid or None, parent or None, trigger)


def _obj(d: dict[str, Any], key: str, at: At) -> dict[str, Any] | None:
    """``d[key]``: an object, or None when absent or null."""
    v = d.get(key)
    if v is not None and not isinstance(v, dict):
        at.fail(key, f"expected an object, got {show(v)}")
    return v


def _ms(d: dict[str, Any], key: str, at: At) -> float | None:
    """``d[key]``: a time or a duration in ms (kept in ms: Dynamo's times are whole ms since
    1970, which a float holds exactly), or None when absent or null; out of range (``time_s``)
    is an error."""
    v = opt_num(d, key, at)
    if v is not None:
        time_s(v, key, at, unit_s=1e-3)
    return v


def _opt_tokens(d: dict[str, Any], key: str, at: At) -> int | None:
    return None if d.get(key) is None else need_tokens(d, key, at)


def _request(rec: dict[str, Any], at: At, ctx: Context, end_ms: float) -> Request:
    """One ``request_end`` record (ended at ``end_ms``)."""
    req = _obj(rec, "request", at)
    if req is None:
        at.fail("request", "missing (a request_end record's metrics)")
    rat = at.sub("request")
    extra_keys(req, _REQUEST_KEYS, rat)
    request_id = need_str(req, "request_id", rat, default="", nullable=False, required=True)
    block, length, hashes = _replay(req, at)
    if length is None:
        n_in = need_tokens(req, "input_tokens", rat)
    else:  # the replay block's length stands in
        n_in = need_tokens(req, "input_tokens", rat, default=length)
    total = _ms(req, "total_time_ms", rat)
    ttft = _ms(req, "ttft_ms", rat)
    received = _ms(req, "request_received_ms", rat)
    if received is None:  # (optional in the schema): its end less its duration
        received = end_ms - max(0.0, total or 0.0)
    total = max(0.0, total if total is not None else end_ms - received)
    finish, called = _finish(req, at)
    return Request(
        at=at,
        ctx=ctx,
        received_ms=received,
        ttft_ms=None if ttft is None else min(max(0.0, ttft), total),
        total_ms=total,
        n_in=n_in,
        n_out=need_tokens(req, "output_tokens", rat, default=0),
        cached=_opt_tokens(req, "cached_tokens", rat),
        model=opt_str(req, "model", rat),
        block_size=block,
        hashes=tuple(hashes),
        finish=finish,
        called=called,
        request_id=request_id or None,
    )


def _replay(req: dict[str, Any], at: At) -> tuple[int | None, int | None, list[int]]:
    """``request.replay`` (of the record at ``at``): its block size, input length and block
    hashes (none: no replay)."""
    rp = _obj(req, "replay", at.sub("request"))
    if rp is None:
        return None, None, []
    pat = at.sub("request.replay")
    extra_keys(rp, _REPLAY_KEYS, pat)
    block = need_tokens(rp, "trace_block_size", pat, lo=1)
    length = need_tokens(rp, "input_length", pat)
    hashes = need_ids(rp, "input_sequence_hashes", pat, length, block, nullable=False)
    return block, length, hashes


def _finish(req: dict[str, Any], at: At) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """``request.finish_reason_metadata`` (of the record at ``at``): the finish reason and the
    tool calls the model made (ids and names: Dynamo keeps no arguments)."""
    fm = _obj(req, "finish_reason_metadata", at.sub("request"))
    if fm is None:
        return None, ()
    fat = at.sub("request.finish_reason_metadata")
    extra_keys(fm, _FINISH_KEYS, fat)
    called: list[tuple[str, str]] = []
    calls = fm.get("tool_calls")
    if calls is not None and not isinstance(calls, list):
        fat.fail("tool_calls", f"expected a list, got {show(calls)}")
    for i, c in enumerate(calls or []):
        cat = fat.sub(f"tool_calls[{i}]")
        if not isinstance(c, dict):
            fat.fail(f"tool_calls[{i}]", f"expected an object, got {show(c)}")
        extra_keys(c, _CALLED_KEYS, cat)
        cid = opt_str(c, "id", cat)
        if cid:
            called.append((cid, opt_str(c, "name", cat) or "tool"))
    return opt_str(fm, "finish_reason", fat), tuple(called)


def _tool(rec: dict[str, Any], at: At, ctx: Context, kind: str, time_ms: float) -> ToolEvent:
    """One tool event (at ``time_ms``)."""
    tool = _obj(rec, "tool", at)
    if tool is None:
        at.fail("tool", f"missing (a {kind} record's tool)")
    tat = at.sub("tool")
    extra_keys(tool, _TOOL_KEYS, tat)
    status = opt_str(tool, "status", tat)
    error = opt_str(tool, "error_type", tat)
    failed = kind == "tool_error" or status in (
        "error",
        "failed",
        "timeout",
        "cancelled",
        "canceled",
    )
    duration = _ms(tool, "duration_ms", tat)
    return ToolEvent(
        at=at,
        ctx=ctx,
        kind=kind,
        time_ms=time_ms,
        call_id=need_str(tool, "tool_call_id", tat),
        name=need_str(tool, "tool_class", tat, default="tool", nullable=False, required=True),
        start_ms=_ms(tool, "started_at_unix_ms", tat),
        end_ms=_ms(tool, "ended_at_unix_ms", tat),
        duration_ms=None if duration is None else max(0.0, duration),
        failed=(error or status or "error") if failed else None,
        output_bytes=None
        if tool.get("output_bytes") is None
        else need_int(tool, "output_bytes", tat),
        output_tokens=_opt_tokens(tool, "output_tokens", tat),
    )
