"""``agentload trace import otel``: OpenTelemetry GenAI spans (OTLP/JSON) → a full-content trace.

The input is OTLP/JSON: ``ExportTraceServiceRequest`` objects, one a file or one a line
(``otlp_json`` reads them). An LLM call span (``gen_ai.operation.name`` ``chat`` / ``text_completion`` /
``generate_content``; OpenInference ``openinference.span.kind`` ``LLM``; OpenLLMetry's older
``llm.request.type`` ``chat`` / ``completion``) becomes one ``exchanges.Exchange`` in Chat
Completions (``chat_exchange``): its request messages, tools, model and parameters, its answer
and its usage from the span's attributes (``genai_attrs``); its times from the span's start
(submit) and end (the answer's end), a first token only where
``gen_ai.response.time_to_first_chunk`` (s), Langfuse's
``langfuse.observation.completion_start_time`` or a span event whose name says ``first_token`` /
``first_chunk`` gives it.

Sessions: one per ``gen_ai.conversation.id`` (or ``session.id``) of the span or its nearest
ancestor, else one per OTel trace; agentload's own spans (scope ``agentload``) are one session
per OTel trace, as its exporter writes them (a session id repeats across recordings, the trace
id does not). Each exchange carries ``x-agentload-session``, and, under an ``invoke_agent``
span (OpenInference ``AGENT``), ``x-agentload-agent``: that span's id (not in a session over
several OTel traces, where an agent span is one turn: there the rules thread the agents). So ``record``'s
recorder (``exchanges.write_sessions``) makes the agents exact and links a sub-agent to the
call that delegated to it by its rules (task text, ids); where the agent span hangs under an
``execute_tool`` span with ``gen_ai.tool.call.id``, its first call is played after the answer
that emitted that call. Tool spans are not calls: ``tool_call`` records come, as in ``record``,
from the results the next request carries. Every other span is skipped.

Memory: what every span's place in the tree takes, and the largest session's spans (a session
is read again from the records that hold it).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentload.errors import ConfigError, TraceFormatError, WireError
from agentload.infile import why_unreadable
from agentload.interop.content_free import At
from agentload.interop.exchanges import (
    Exchange,
    Tally,
    chat_exchange,
    import_sessions,
    iso_ns,
)
from agentload.interop.genai_attrs import (
    request_body,
    request_messages,
    span_answer,
    span_kind,
    span_usage,
    str_attr,
)
from agentload.interop.otlp_json import (
    STATUS_ERROR,
    Record,
    attributes,
    check_span_keys,
    inside,
    int64,
    looks_like_otel,
    member,
    nanos,
    otlp_id,
    read_records,
    reload,
    request_spans,
    span_at,
)
from agentload.outfile import check_output
from agentload.record.native import AGENT_HEADER, SESSION_HEADER

__all__ = ["import_otel", "looks_like_otel"]

FORMAT = "otel"
SESSION_ATTRIBUTES = ("gen_ai.conversation.id", "session.id")
OWN_SCOPE = "agentload"
"""The instrumentation scope of ``agentload trace export otel``: one OTel trace per session."""
MAX_HEADER = 64
"""The recorder keeps this much of a session header: a longer key is shortened with a hash."""


# -- the span tree -------------------------------------------------------------------------------


@dataclass
class _Span:
    """What pass 1 keeps of a span: its place in the tree and, for a call, where it is."""

    kind: str  # "llm", "agent", "tool" or ""
    parent: str | None
    start: int
    conv: str | None
    tool_call: str | None
    own: bool
    rec: int = -1
    pos: tuple[int, int, int] = (0, 0, 0)


@dataclass
class _Scan:
    """Pass 1: every span's place, the records that hold calls, the files read."""

    tally: Tally
    files: list[Path] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    spans: dict[tuple[str, str], _Span] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    n_spans: int = 0

    def file(self, path: Path, named: bool) -> None:
        """Read one file's spans; a file found in a directory that is not OTLP/JSON is
        skipped (counted), a file named is an error."""
        records = read_records(path, self.tally)
        try:
            first = next(records, None)
        except TraceFormatError:
            if named:
                raise
            self.tally.note("file", "not JSON, skipped")
            return
        if first is None:
            if named:
                raise TraceFormatError(f"{path}: no JSON object: not OTLP/JSON")
            self.tally.note("file", "empty, skipped")
            return
        if not named and not (isinstance(first[1], dict) and looks_like_otel(first[1])):
            self.tally.note("file", "not OTLP/JSON, skipped")
            return
        self.files.append(path)
        for rec, obj in itertools.chain([first], records):
            self.records.append(rec)
            for pos, sp, scope, sat in request_spans(obj, rec.at(self.tally.dev)):
                self.span(pos, sp, scope, sat)

    def span(self, pos: tuple[int, int, int], sp: dict[str, Any], scope: str, at: At) -> None:
        self.n_spans += 1
        check_span_keys(sp, at)
        attrs = attributes(member(sp, "attributes", at), at)
        kind = span_kind(attrs)
        trace = otlp_id(member(sp, "traceId", at), 16, at, "traceId")
        sid = otlp_id(member(sp, "spanId", at), 8, at, "spanId")
        if trace is None or sid is None:
            if kind != "llm":
                at.deviate("spanId" if trace else "traceId", "missing, span skipped")
                return
            at.fail("spanId" if trace else "traceId", "missing")
        key = (trace, sid)
        if key in self.spans:
            at.deviate("spanId", "a span already read, skipped")
            return
        start = nanos(member(sp, "startTimeUnixNano", at), at, "startTimeUnixNano")
        info = _Span(
            kind=kind,
            parent=otlp_id(member(sp, "parentSpanId", at), 8, at, "parentSpanId"),
            start=start,
            conv=str_attr(attrs, *SESSION_ATTRIBUTES),
            tool_call=str_attr(attrs, "gen_ai.tool.call.id") if kind == "tool" else None,
            own=scope == OWN_SCOPE,
        )
        if kind == "llm":
            info.rec, info.pos = len(self.records) - 1, pos
            self.calls.append(key)
        self.spans[key] = info

    def ancestors(self, key: tuple[str, str]) -> Iterator[tuple[str, _Span]]:
        """The span's ancestors, nearest first (a parent not read ends the chain)."""
        seen = {key[1]}
        parent = self.spans[key].parent
        while parent is not None and parent not in seen:
            seen.add(parent)
            up = self.spans.get((key[0], parent))
            if up is None:
                return
            yield parent, up
            parent = up.parent


def _header_value(key: str) -> str:
    if len(key) <= MAX_HEADER:
        return key
    digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
    return f"{key[: MAX_HEADER - 17]}-{digest}"


@dataclass
class _Call:
    """A call's place: its span, its session's header, its agent span (if any)."""

    key: tuple[str, str]
    session: str
    agent: str | None
    after: str | None


def _sessions(scan: _Scan) -> dict[str, list[_Call]]:
    """The calls of each session, sessions by their first call's start (see the docstring)."""
    groups: dict[str, list[_Call]] = {}
    wrappers = {
        (k[0], sid) for k in scan.calls for sid, up in scan.ancestors(k) if up.kind == "llm"
    }
    if wrappers:
        scan.tally.derived["nested"] = (
            "an LLM span around another (a framework's around its client's): the inner one"
        )
    for key in sorted(scan.calls, key=lambda k: scan.spans[k].start):
        if key in wrappers:
            continue
        span = scan.spans[key]
        conv, agent, after = span.conv, None, None
        for sid, up in scan.ancestors(key):
            if conv is None:
                conv = up.conv
            if agent is None and up.kind == "agent":
                agent = sid
                parent = scan.spans.get((key[0], up.parent)) if up.parent else None
                if parent is not None and parent.kind == "tool":
                    after = parent.tool_call
        if conv is None:
            session = key[0]
        elif span.own:
            session = f"{conv}@{key[0][:16]}"
        else:
            session = conv
        session = _header_value(session)
        groups.setdefault(session, []).append(_Call(key, session, agent, after))
    for calls in groups.values():  # an agent span is one turn of a conversation over traces:
        if len({c.key[0] for c in calls}) > 1:  # the recorder's rules thread its agents
            for c in calls:
                c.agent = None
    return groups


# -- one span → one exchange ---------------------------------------------------------------------


def _first_token(
    sp: dict[str, Any], attrs: dict[str, Any], start: int, end: int, at: At
) -> int | None:
    t: int | None = None
    ttfc = attrs.get("gen_ai.response.time_to_first_chunk")
    if isinstance(ttfc, (int, float)) and not isinstance(ttfc, bool):
        t = start + round(ttfc * 1e9)
    stamp = attrs.get("langfuse.observation.completion_start_time")
    if t is None and isinstance(stamp, str):
        try:
            t = iso_ns(stamp.strip('"'), at, "langfuse.observation.completion_start_time")
        except TraceFormatError:
            at.deviate("langfuse.observation.completion_start_time", "not an ISO time, ignored")
    events = member(sp, "events", at)
    for ev in events if t is None and isinstance(events, list) else ():
        name = ev.get("name") if isinstance(ev, dict) else None
        if isinstance(name, str) and ("first_token" in name or "first_chunk" in name):
            when = int64(member(ev, "timeUnixNano", at))
            if when is not None:
                t = when
                break
    if t is None or not start <= t <= end:
        return None
    return t


def _exchange(
    sp: dict[str, Any], quiet: At, at: At, tally: Tally, headers: dict[str, str]
) -> Exchange:
    """The call one LLM span records (see the module docstring)."""
    attrs = attributes(member(sp, "attributes", quiet), quiet)
    start = nanos(member(sp, "startTimeUnixNano", quiet), quiet, "startTimeUnixNano")
    end = nanos(member(sp, "endTimeUnixNano", quiet), quiet, "endTimeUnixNano")
    if end < start:
        at.deviate("endTimeUnixNano", "before the start, taken as the start")
        end = start
    body = request_body(attrs, request_messages(attrs, at), at, tally)
    answer, finish = span_answer(attrs, at)
    status = member(sp, "status", quiet)
    error: str | None = None
    if isinstance(status, dict) and member(status, "code", quiet) in STATUS_ERROR:
        message = status.get("message")
        error = str(message) if message else str(attrs.get("error.type") or "error")
    if answer is None:
        answer = {"role": "assistant", "content": ""}
        if error is None:
            tally.derived["answer"] = "not in a span (gen_ai.output.messages ...): an empty answer"
    try:
        x = chat_exchange(
            body,
            answer,
            (start, end),
            finish_reason=finish,
            usage=span_usage(attrs),
            headers=headers,
        )
    except WireError as exc:
        at.fail("gen_ai.output.messages", f"not an answer: {exc}")
    x.first_token_ns = _first_token(sp, attrs, start, end, quiet)
    x.error = error
    return x


def _session(scan: _Scan, calls: list[_Call], tally: Tally, last: dict[int, Any]) -> list[Exchange]:
    """The exchanges of one session, each record that holds its calls read once (``last``: the
    record read last, kept for the next session, which a single document holds too)."""
    by_rec: dict[int, list[_Call]] = {}
    for c in calls:
        by_rec.setdefault(scan.spans[c.key].rec, []).append(c)
    out: list[tuple[_Call, Exchange]] = []
    for r in sorted(by_rec):
        rec = scan.records[r]
        if r not in last:
            last.clear()
            last[r] = reload(rec)
        obj = last[r]
        for c in by_rec[r]:
            pos = scan.spans[c.key].pos
            at = inside(
                rec.at(tally.dev), f"resourceSpans[{pos[0]}].scopeSpans[{pos[1]}].spans[{pos[2]}]"
            )
            quiet = At(at.file, at.record)
            headers = {SESSION_HEADER: c.session}
            if c.agent is not None:
                headers[AGENT_HEADER] = c.agent
            out.append((c, _exchange(span_at(obj, pos), quiet, at, tally, headers)))
    out.sort(key=lambda cx: cx[1].submit_ns)
    emitted = {cid for _, x in out for cid in x.emits}
    first: set[str] = set()
    for c, x in out:
        if c.agent is not None and c.agent not in first:
            first.add(c.agent)
            if c.after in emitted:
                x.after = c.after
    return [x for _, x in out]


def _files(paths: list[Path]) -> Iterator[tuple[Path, bool]]:
    """Each file named, and the ``*.json`` / ``*.jsonl`` files under each directory named
    (sorted); a path that is neither is a one-line error."""
    for p in paths:
        if p.is_dir():
            found = {q for pattern in ("*.json", "*.jsonl") for q in p.rglob(pattern)}
            yield from ((q, False) for q in sorted(found) if q.is_file())
        elif p.is_file():
            yield p, True
        else:
            raise ConfigError(f"{p}: {why_unreadable(p)}")


def import_otel(paths: list[Path], out: Path, *, force: bool = False) -> str:
    """Import OTLP/JSON files (or directories of them) into the trace ``out``."""
    tally = Tally(FORMAT)
    files = list(_files(paths))
    check_output(out, [f for f, _ in files], force=force)
    scan = _Scan(tally)
    for path, named in files:
        scan.file(path, named)
    if not scan.calls:
        where = ", ".join(map(str, paths))
        raise TraceFormatError(
            f"{where}: no LLM call spans (gen_ai.operation.name chat / text_completion / "
            f"generate_content, openinference.span.kind LLM) among {scan.n_spans:,} spans"
        )
    groups = _sessions(scan)
    tally.derived["times"] = (
        "each call from its span's start to its end; a first token only where "
        "gen_ai.response.time_to_first_chunk (or a first-token event) gives it"
    )

    def sessions() -> Iterator[list[Exchange]]:
        last: dict[int, Any] = {}
        for calls in groups.values():
            yield _session(scan, calls, tally, last)

    done = import_sessions(
        out,
        tally,
        sessions(),
        lambda: (scan.files, len(scan.records)),
        "otel sessions",
        len(groups),
    )
    n_llm = sum(len(calls) for calls in groups.values())
    return (
        f"{done} from {n_llm:,} LLM spans in {len(scan.files):,} OTLP/JSON files "
        f"({scan.n_spans - n_llm:,} other spans skipped)"
    )
