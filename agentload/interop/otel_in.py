"""``agentload trace import otel``: OpenTelemetry GenAI spans (OTLP/JSON) → a full-content trace.

The input is OTLP/JSON: a file holding one ``ExportTraceServiceRequest`` object, or JSON Lines of
them (what ``agentload trace export otel -o`` and the Collector's file exporter write):
``resourceSpans[].scopeSpans[].spans[]``. Read as the protobuf JSON mapping reads it: ids hex
(OTLP) or base64 (protobuf), ``kind`` and ``status.code`` integers or enum names, 64-bit integers
(times, ``intValue``) numbers or decimal strings, attribute values ``{"stringValue" |
"intValue" | "doubleValue" | "boolValue" | "arrayValue" | "kvlistValue" | "bytesValue"}``.
What departs from that mapping without losing meaning (snake_case keys, keys a message does not
have, a bare attribute value) is counted as a deviation; the OpenTelemetry packages are not
needed (orjson reads it).

An LLM call span (``gen_ai.operation.name`` ``chat`` / ``text_completion`` /
``generate_content``; OpenInference ``openinference.span.kind`` ``LLM``; OpenLLMetry's older
``llm.request.type`` ``chat`` / ``completion``) becomes one ``exchanges.Exchange`` in Chat
Completions (``chat_exchange``):

* request messages: ``gen_ai.input.messages`` (the semantic conventions' parts form), else the
  flattened ``gen_ai.prompt.N.*`` (OpenLLMetry before the parts form) or
  ``llm.input_messages.N.message.*`` (OpenInference), else OpenInference's raw ``input.value``;
  ``gen_ai.system_instructions`` first as a system message;
* tools: ``gen_ai.tool.definitions``, ``llm.tools.N.tool.json_schema`` or
  ``llm.request.functions.N.*``; model and parameters: ``gen_ai.request.*`` (``llm.model_name``
  and ``llm.invocation_parameters`` for OpenInference);
* the answer: ``gen_ai.output.messages`` (its first message), ``gen_ai.completion.0.*``,
  ``llm.output_messages.0.message.*`` or ``output.value``; its finish reason in chat's words;
* usage: ``gen_ai.usage.input_tokens`` / ``output_tokens`` / ``cache_read.input_tokens`` /
  ``reasoning_tokens`` (or OpenInference's ``llm.token_count.*``) in chat's keys;
* times: the span's start (submit) and end (the answer's end); a first token only where
  ``gen_ai.response.time_to_first_chunk`` (s), Langfuse's
  ``langfuse.observation.completion_start_time`` or a span event whose name says
  ``first_token`` / ``first_chunk`` gives it.

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

import base64
import binascii
import hashlib
import itertools
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from agentload.errors import ConfigError, TraceFormatError, WireError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.interop.content_free import EXTRA_KEY, INTEGRAL_FLOAT, At, Progress
from agentload.interop.exchanges import (
    Exchange,
    Tally,
    chat_exchange,
    full_header,
    iso_ns,
    write_sessions,
)
from agentload.outfile import check_output
from agentload.record.native import AGENT_HEADER, SESSION_HEADER

__all__ = ["import_otel", "looks_like_otel"]

FORMAT = "otel"
LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
"""``gen_ai.operation.name`` values of a model call."""
SESSION_ATTRIBUTES = ("gen_ai.conversation.id", "session.id")
OWN_SCOPE = "agentload"
"""The instrumentation scope of ``agentload trace export otel``: one OTel trace per session."""
MAX_HEADER = 64
"""The recorder keeps this much of a session header: a longer key is shortened with a hash."""

_SPAN_KEYS = frozenset(
    {
        "traceId",
        "spanId",
        "traceState",
        "parentSpanId",
        "flags",
        "name",
        "kind",
        "startTimeUnixNano",
        "endTimeUnixNano",
        "attributes",
        "droppedAttributesCount",
        "events",
        "droppedEventsCount",
        "links",
        "droppedLinksCount",
        "status",
    }
)
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")
_SPAN_SNAKE = frozenset(_SNAKE.sub("_", k).lower() for k in _SPAN_KEYS)
_VALUE_KEYS = (
    "stringValue",
    "intValue",
    "doubleValue",
    "boolValue",
    "arrayValue",
    "kvlistValue",
    "bytesValue",
)
_INT = re.compile(r"-?[0-9]+")
_HEX = re.compile(r"[0-9a-fA-F]+")
_STATUS_ERROR = (2, "STATUS_CODE_ERROR")
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_call": "tool_calls",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
"""Finish reasons in chat's words (the conventions say ``tool_call``, Anthropic ``tool_use``)."""
_PARAMS = (
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "stream",
)
"""Request parameters taken from OpenInference's ``llm.invocation_parameters``."""
_NO_CONTENT = (
    "no request messages (nor gen_ai.prompt.*, llm.input_messages.*, input.value): spans "
    "without content cannot be imported (agentload: export with `trace export otel --content`)"
)


def looks_like_otel(first: dict[str, Any]) -> bool:
    """Whether a file's first object is an OTLP/JSON ``ExportTraceServiceRequest``."""
    return isinstance(first.get("resourceSpans", first.get("resource_spans")), list)


# -- reading OTLP/JSON ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rec:
    """One ExportTraceServiceRequest: a line of a file (``lineno`` > 0) or the whole file."""

    path: Path
    lineno: int
    offset: int
    length: int

    def at(self, dev: Any) -> At:
        return At(str(self.path), f"line {self.lineno}" if self.lineno else "", dev)


def _in(at: At, part: str) -> At:
    """``at.sub(part)``, joined by a dot past the first part (``line 3 resourceSpans[0]`` +
    ``scopeSpans[1]``), so that a deviation's field reads ``resourceSpans[].scopeSpans[]``."""
    if not at.record or (at.record.startswith("line ") and " " not in at.record[5:]):
        return at.sub(part)
    return At(at.file, f"{at.record}.{part}", at.dev)


def _get(d: dict[str, Any], key: str, at: At) -> Any:
    """``d[key]`` (lowerCamelCase, as OTLP/JSON writes it), else its snake_case form, which the
    protobuf JSON mapping also reads (counted)."""
    if key in d:
        return d[key]
    snake = _SNAKE.sub("_", key).lower()
    if snake != key and snake in d:
        at.deviate(snake, "snake_case key (OTLP/JSON: lowerCamelCase)")
        return d[snake]
    return None


def _first_line(f: BinaryIO) -> bytes | None:
    """The first line that is not blank, at most ``MAX_DOCUMENT_BYTES``; None if none."""
    while True:
        raw = f.readline(MAX_DOCUMENT_BYTES + 1)
        if not raw:
            return None
        if raw.strip():
            return raw


def _is_object(raw: bytes | None) -> bool:
    if raw is None:
        return False
    try:
        return isinstance(orjson.loads(raw), dict)
    except orjson.JSONDecodeError:
        return False


def _records(path: Path, tally: Tally) -> Iterator[tuple[_Rec, Any]]:
    """Each JSON object of ``path``: every line of a JSON Lines file (a line that is not JSON,
    say one cut short, is counted and skipped), else the whole file as one document."""
    try:
        with open(path, "rb") as f:
            lines = _is_object(_first_line(f))
            if lines:
                f.seek(0)
                offset = 0
                for lineno, raw in enumerate(f, 1):
                    start, offset = offset, offset + len(raw)
                    if not raw.strip():
                        continue
                    if len(raw) > MAX_DOCUMENT_BYTES:
                        tally.note("line", "over 1 GiB, skipped")
                        continue
                    try:
                        obj = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        tally.note("line", "not JSON, skipped")
                        continue
                    yield _Rec(path, lineno, start, len(raw)), obj
                return
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    data = read_bytes(path, limit=MAX_DOCUMENT_BYTES, label=str(path), error=TraceFormatError)
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(
            f"{path}: not JSON ({exc}); OTLP/JSON is one ExportTraceServiceRequest object, or "
            "one per line"
        ) from None
    yield _Rec(path, 0, 0, len(data)), obj


def _load(rec: _Rec) -> Any:
    """The object ``rec`` names, read again."""
    if not rec.lineno:
        data = read_bytes(
            rec.path, limit=MAX_DOCUMENT_BYTES, label=str(rec.path), error=TraceFormatError
        )
        return orjson.loads(data)
    try:
        with open(rec.path, "rb") as f:
            f.seek(rec.offset)
            return orjson.loads(f.read(rec.length))
    except (OSError, orjson.JSONDecodeError) as exc:
        raise TraceFormatError(
            f"{rec.path}: line {rec.lineno}: changed while read: {exc}"
        ) from None


def _spans(obj: Any, at: At) -> Iterator[tuple[tuple[int, int, int], dict[str, Any], str, At]]:
    """Each span of a request: its place, the span, its scope's name, its ``At``."""
    if not isinstance(obj, dict):
        at.fail("resourceSpans", "not a JSON object: not an OTLP ExportTraceServiceRequest")
    for key in obj:
        if key not in ("resourceSpans", "resource_spans"):
            at.deviate(key, EXTRA_KEY)
    rss = _get(obj, "resourceSpans", at)
    if not isinstance(rss, list):
        at.fail("resourceSpans", "missing: not an OTLP ExportTraceServiceRequest")
    for i, rs in enumerate(rss):
        rat = _in(at, f"resourceSpans[{i}]")
        if not isinstance(rs, dict):
            at.deviate(f"resourceSpans[{i}]", "not an object, skipped")
            continue
        sss = _get(rs, "scopeSpans", rat)
        if sss is None and "instrumentationLibrarySpans" in rs:  # OTLP before 0.15
            rat.deviate("instrumentationLibrarySpans", "renamed scopeSpans in OTLP 0.15")
            sss = rs["instrumentationLibrarySpans"]
        for j, ss in enumerate(sss if isinstance(sss, list) else ()):
            sat = _in(rat, f"scopeSpans[{j}]")
            if not isinstance(ss, dict):
                rat.deviate(f"scopeSpans[{j}]", "not an object, skipped")
                continue
            scope = _get(ss, "scope", sat) or ss.get("instrumentationLibrary")
            name = scope.get("name") if isinstance(scope, dict) else None
            spans = _get(ss, "spans", sat)
            for k, sp in enumerate(spans if isinstance(spans, list) else ()):
                if not isinstance(sp, dict):
                    sat.deviate(f"spans[{k}]", "not an object, skipped")
                    continue
                yield (i, j, k), sp, name if isinstance(name, str) else "", _in(sat, f"spans[{k}]")


def _span_at(obj: Any, pos: tuple[int, int, int]) -> dict[str, Any]:
    """The span at ``pos`` of a request read again (its keys already checked once)."""
    quiet = At("", "")
    rs = _get(obj, "resourceSpans", quiet)[pos[0]]
    sss = _get(rs, "scopeSpans", quiet)
    if sss is None:
        sss = rs["instrumentationLibrarySpans"]
    span: dict[str, Any] = _get(sss[pos[1]], "spans", quiet)[pos[2]]
    return span


def _id(value: Any, size: int, at: At, fld: str) -> str | None:
    """A trace (16 bytes) or span (8 bytes) id as lower-case hex: OTLP/JSON's hex or the
    protobuf JSON mapping's base64; empty or absent: None."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if len(value) == 2 * size and _HEX.fullmatch(value):
            return value.lower()
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) == size:
            return raw.hex()
    at.fail(fld, f"expected a {size}-byte id (hex or base64), got {value!r:.60}")


def _nanos(value: Any, at: At, fld: str) -> int:
    """A time in Unix nanoseconds: a number or a decimal string."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and _INT.fullmatch(value) and int(value) > 0:
        return int(value)
    if isinstance(value, float) and value.is_integer() and value > 0:
        at.deviate(fld, INTEGRAL_FLOAT)
        return int(value)
    at.fail(fld, f"expected Unix nanoseconds (an integer > 0), got {value!r:.40}")


def _any(v: Any, at: At) -> Any:
    """An ``AnyValue`` as a Python value (None when it holds none)."""
    if not isinstance(v, dict):
        if v is not None:
            at.deviate("value", "not an AnyValue object, taken as given")
        return v
    for key in _VALUE_KEYS:
        x = _get(v, key, at)
        if x is not None or key in v:
            break
    else:
        return None
    if key == "stringValue":
        return x if isinstance(x, str) else None if x is None else str(x)
    if key == "intValue":
        if isinstance(x, int) and not isinstance(x, bool):
            return x
        if isinstance(x, str) and _INT.fullmatch(x):
            return int(x)
        if isinstance(x, float) and x.is_integer():
            at.deviate("value.intValue", INTEGRAL_FLOAT)
            return int(x)
        at.deviate("value.intValue", "not an integer, ignored")
        return None
    if key == "doubleValue":
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return float(x)
        try:  # the protobuf JSON mapping writes "NaN", "Infinity"; a number may be a string
            return float(x)
        except (TypeError, ValueError):
            at.deviate("value.doubleValue", "not a number, ignored")
            return None
    if key == "boolValue":
        if isinstance(x, bool):
            return x
        at.deviate("value.boolValue", "not true or false, ignored")
        return None
    if key in ("arrayValue", "kvlistValue"):
        values = _get(x, "values", at) if isinstance(x, dict) else None
        if not isinstance(values, list):
            return [] if key == "arrayValue" else {}
        if key == "arrayValue":
            return [_any(e, at) for e in values]
        return {
            str(kv.get("key")): _any(kv.get("value"), at) for kv in values if isinstance(kv, dict)
        }
    return x  # bytesValue: its base64 text


def _attrs(raw: Any, at: At) -> dict[str, Any]:
    """A ``KeyValue`` list as a dict (the last value of a repeated key wins)."""
    out: dict[str, Any] = {}
    if raw is None:
        return out
    if not isinstance(raw, list):
        at.deviate("attributes", "not a list, ignored")
        return out
    for kv in raw:
        if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
            at.deviate("attributes[]", "not a key and value, skipped")
            continue
        out[kv["key"]] = _any(kv.get("value"), _in(at, "attributes[]"))
    return out


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


def _kind(attrs: dict[str, Any]) -> str:
    op = attrs.get("gen_ai.operation.name")
    oi = attrs.get("openinference.span.kind")
    oi = oi.upper() if isinstance(oi, str) else None
    if op in LLM_OPERATIONS or oi == "LLM":
        return "llm"
    if op is None and oi is None and attrs.get("llm.request.type") in ("chat", "completion"):
        return "llm"
    if op == "invoke_agent" or oi == "AGENT":
        return "agent"
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    return ""


def _str_attr(attrs: dict[str, Any], *keys: str) -> str | None:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return str(v)
    return None


@dataclass
class _Scan:
    """Pass 1: every span's place, the records that hold calls, the files read."""

    tally: Tally
    files: list[Path] = field(default_factory=list)
    records: list[_Rec] = field(default_factory=list)
    spans: dict[tuple[str, str], _Span] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    n_spans: int = 0

    def file(self, path: Path, named: bool) -> None:
        """Read one file's spans; a file found in a directory that is not OTLP/JSON is
        skipped (counted), a file named is an error."""
        records = _records(path, self.tally)
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
            for pos, sp, scope, sat in _spans(obj, rec.at(self.tally.dev)):
                self.span(pos, sp, scope, sat)

    def span(self, pos: tuple[int, int, int], sp: dict[str, Any], scope: str, at: At) -> None:
        self.n_spans += 1
        for name in sp:
            if name not in _SPAN_KEYS and name not in _SPAN_SNAKE:
                at.deviate(name, EXTRA_KEY)
        attrs = _attrs(_get(sp, "attributes", at), at)
        kind = _kind(attrs)
        trace = _id(_get(sp, "traceId", at), 16, at, "traceId")
        sid = _id(_get(sp, "spanId", at), 8, at, "spanId")
        if trace is None or sid is None:
            if kind != "llm":
                at.deviate("spanId" if trace else "traceId", "missing, span skipped")
                return
            at.fail("spanId" if trace else "traceId", "missing")
        key = (trace, sid)
        if key in self.spans:
            at.deviate("spanId", "a span already read, skipped")
            return
        start = _nanos(_get(sp, "startTimeUnixNano", at), at, "startTimeUnixNano")
        info = _Span(
            kind=kind,
            parent=_id(_get(sp, "parentSpanId", at), 8, at, "parentSpanId"),
            start=start,
            conv=_str_attr(attrs, *SESSION_ATTRIBUTES),
            tool_call=_str_attr(attrs, "gen_ai.tool.call.id") if kind == "tool" else None,
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


def _json_attr(value: Any, at: At, fld: str) -> Any:
    """An attribute that holds JSON: a string (as the conventions record it), or a value an
    ``arrayValue`` / ``kvlistValue`` already holds."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        at.fail(fld, f"not JSON: {value!r:.60}")


def _args_text(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    if arguments is None:
        return "{}"
    return orjson.dumps(arguments).decode()


def _tool_call(cid: Any, name: Any, arguments: Any) -> dict[str, Any]:
    return {
        "id": "" if cid is None else str(cid),
        "type": "function",
        "function": {"name": "" if name is None else str(name), "arguments": _args_text(arguments)},
    }


def _content(items: list[dict[str, Any]], assistant_with_calls: bool) -> Any:
    """Content parts (chat's ``{"type": "text", "text"}`` and others) as chat content: one text
    a string, none ``""`` (None beside an assistant's tool calls)."""
    if not items:
        return None if assistant_with_calls else ""
    if len(items) == 1 and items[0].get("type") == "text":
        return items[0]["text"]
    return items


def _from_parts(m: dict[str, Any], at: At) -> list[dict[str, Any]]:
    """One conventions ``ChatMessage`` (``role``, ``parts``) as chat messages: a tool result part
    is a ``tool`` message of its own."""
    role = str(m.get("role") or "user")
    parts = m.get("parts")
    if parts is None and "content" in m:  # the older event form: {"role", "content"}
        old = {k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "name")}
        old["role"] = role
        if role == "tool":
            old["tool_call_id"] = str(m.get("tool_call_id") or m.get("id") or "")
        return [old]
    items: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    reasoning: list[str] = []
    for p in parts if isinstance(parts, list) else ():
        if not isinstance(p, dict):
            at.deviate("parts[]", "not an object, skipped")
            continue
        t = p.get("type")
        if t == "text":
            text = p.get("content", p.get("text"))
            items.append({"type": "text", "text": "" if text is None else str(text)})
        elif t == "tool_call":
            calls.append(_tool_call(p.get("id"), p.get("name"), p.get("arguments")))
        elif t == "tool_call_response":
            response = p.get("response", p.get("result"))
            if not isinstance(response, (str, list)):
                response = "" if response is None else orjson.dumps(response).decode()
            results.append(
                {"role": "tool", "tool_call_id": str(p.get("id") or ""), "content": response}
            )
        elif t == "reasoning":
            reasoning.append(str(p.get("content") or ""))
        else:
            items.append(p)
    out = results
    if items or calls or reasoning or not results:
        msg: dict[str, Any] = {
            "role": "user" if role == "tool" else role,
            "content": _content(items, role == "assistant" and bool(calls)),
        }
        if role == "tool" and (m.get("tool_call_id") or m.get("id")):
            msg["role"] = "tool"
            msg["tool_call_id"] = str(m.get("tool_call_id") or m.get("id"))
        if calls:
            msg["tool_calls"] = calls
        if reasoning and role == "assistant":
            msg["reasoning_content"] = "".join(reasoning)
        out = [*results, msg]
    if isinstance(m.get("name"), str):
        for x in out:
            if x["role"] != "tool":
                x["name"] = m["name"]
    return out


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened ``PREFIX.N.rest`` keys as one dict per N (by N): ``{rest: value}``."""
    by_n: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            n, _, rest = key[len(prefix) :].partition(".")
            if n.isdigit() and rest:
                by_n.setdefault(int(n), {})[rest] = value
    return [by_n[n] for n in sorted(by_n)]


def _strip(d: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k.removeprefix(prefix): v for k, v in d.items()}


def _flat_message(d: dict[str, Any]) -> dict[str, Any]:
    """One flattened message (OpenLLMetry's ``gen_ai.prompt.N.*``, OpenInference's
    ``llm.input_messages.N.message.*`` less its prefix) as a chat message."""
    role = str(d.get("role") or "user")
    calls = [
        _tool_call(
            c.get("id"),
            c.get("name", c.get("function.name")),
            c.get("arguments", c.get("function.arguments")),
        )
        for c in (_strip(c, "tool_call.") for c in _indexed(d, "tool_calls."))
    ]
    content = d.get("content", d.get("user"))
    if content is None:
        items: list[dict[str, Any]] = []
        for c in (_strip(c, "message_content.") for c in _indexed(d, "contents.")):
            if c.get("type", "text") == "text":
                items.append({"type": "text", "text": str(c.get("text") or "")})
            elif c.get("image.image.url"):
                items.append({"type": "image_url", "image_url": {"url": c["image.image.url"]}})
        content = _content(items, role == "assistant" and bool(calls))
    elif isinstance(content, str) and content.startswith("[{"):  # OpenLLMetry: parts as JSON
        try:
            parsed = orjson.loads(content)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and all(isinstance(p, dict) and "type" in p for p in parsed):
            content = parsed
    if role == "assistant" and calls and content == "":
        content = None
    msg: dict[str, Any] = {"role": role, "content": content}
    if calls:
        msg["tool_calls"] = calls
    if d.get("tool_call_id") is not None:
        msg["tool_call_id"] = str(d["tool_call_id"])
    if isinstance(d.get("name"), str):
        msg["name"] = d["name"]
    return msg


def _raw_json(attrs: dict[str, Any], key: str) -> dict[str, Any] | None:
    """OpenInference's ``input.value`` / ``output.value`` when it is a JSON object."""
    value = attrs.get(key)
    if not isinstance(value, str) or not value.startswith("{"):
        return None
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _text(value: Any) -> str:
    """System instructions (a string, or a list of parts) as one text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            str(p.get("content", p.get("text", ""))) if isinstance(p, dict) else str(p)
            for p in value
        )
    return "" if value is None else str(value)


def _messages(attrs: dict[str, Any], at: At) -> list[dict[str, Any]]:
    fld = "gen_ai.input.messages"
    msgs: list[dict[str, Any]] = []
    if attrs.get(fld) is not None:
        value = _json_attr(attrs[fld], at, fld)
        if not isinstance(value, list):
            at.fail(fld, "expected a list of messages")
        for m in value:
            if isinstance(m, dict):
                msgs.extend(_from_parts(m, _in(at, f"{fld}[]")))
            else:
                at.deviate(f"{fld}[]", "not an object, skipped")
    elif flat := _indexed(attrs, "gen_ai.prompt."):
        msgs = [_flat_message(d) for d in flat]
    elif flat := _indexed(attrs, "llm.input_messages."):
        msgs = [_flat_message(_strip(d, "message.")) for d in flat]
    elif (raw := _raw_json(attrs, "input.value")) is not None and isinstance(
        raw.get("messages"), list
    ):
        msgs = [m for m in raw["messages"] if isinstance(m, dict)]
    system = attrs.get("gen_ai.system_instructions")
    if system is not None:
        text = _text(_json_attr(system, at, "gen_ai.system_instructions"))
        if not (msgs and msgs[0].get("role") == "system" and msgs[0].get("content") == text):
            msgs.insert(0, {"role": "system", "content": text})
    if not msgs:
        at.fail(fld, _NO_CONTENT)
    return msgs


def _tool_def(t: Any) -> dict[str, Any] | None:
    if not isinstance(t, dict):
        return None
    if isinstance(t.get("function"), dict):
        return t
    fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}
    return {"type": str(t.get("type") or "function"), "function": fn}


def _tools(attrs: dict[str, Any], at: At) -> list[dict[str, Any]]:
    raw: list[Any] = []
    if attrs.get("gen_ai.tool.definitions") is not None:
        value = _json_attr(attrs["gen_ai.tool.definitions"], at, "gen_ai.tool.definitions")
        raw = value if isinstance(value, list) else []
    elif flat := _indexed(attrs, "llm.tools."):
        for d in flat:
            schema = d.get("tool.json_schema")
            raw.append(_json_attr(schema, at, "llm.tools[].tool.json_schema"))
    elif flat := _indexed(attrs, "llm.request.functions."):
        for d in flat:
            params = d.get("parameters")
            if isinstance(params, str):
                params = _json_attr(params, at, "llm.request.functions[].parameters")
            fn = {"name": d.get("name"), "description": d.get("description")}
            raw.append({**{k: v for k, v in fn.items() if v is not None}, "parameters": params})
    return [t for t in map(_tool_def, raw) if t is not None]


def _answer(attrs: dict[str, Any], at: At) -> tuple[dict[str, Any] | None, str | None]:
    """The assistant's answer (chat shape) and its finish reason, as the span gives them."""
    fld = "gen_ai.output.messages"
    msg: dict[str, Any] | None = None
    finish: Any = None
    if attrs.get(fld) is not None:
        value = _json_attr(attrs[fld], at, fld)
        first = (
            next((m for m in value if isinstance(m, dict)), None)
            if isinstance(value, list)
            else None
        )
        if first is not None:
            finish = first.get("finish_reason")
            got = [
                m for m in _from_parts({**first, "role": "assistant"}, at) if m["role"] != "tool"
            ]
            msg = got[0] if got else None
    elif flat := _indexed(attrs, "gen_ai.completion."):
        finish = flat[0].get("finish_reason")
        msg = _flat_message({**flat[0], "role": "assistant"})
    elif flat := _indexed(attrs, "llm.output_messages."):
        msg = _flat_message({**_strip(flat[0], "message."), "role": "assistant"})
    elif (raw := _raw_json(attrs, "output.value")) is not None and isinstance(
        raw.get("choices"), list
    ):
        ch = next((c for c in raw["choices"] if isinstance(c, dict)), {})
        if isinstance(ch.get("message"), dict):
            msg, finish = dict(ch["message"]), ch.get("finish_reason")
    if finish is None:
        reasons = attrs.get("gen_ai.response.finish_reasons")
        finish = reasons[0] if isinstance(reasons, list) and reasons else reasons
        finish = finish if finish is not None else attrs.get("llm.finish_reason")
    if msg is not None:
        content = msg.get("content")
        if isinstance(content, list):  # chat's answer is one text
            msg["content"] = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        msg["role"] = "assistant"
    return msg, _FINISH.get(finish) if isinstance(finish, str) else None


def _int_attr(attrs: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
        if isinstance(v, float) and v.is_integer() and v >= 0:
            return int(v)
    return None


def _usage(attrs: dict[str, Any]) -> dict[str, Any] | None:
    prompt = _int_attr(
        attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"
    )
    completion = _int_attr(
        attrs,
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
    )
    cached = _int_attr(
        attrs,
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
    )
    reasoning = _int_attr(
        attrs, "gen_ai.usage.reasoning_tokens", "llm.token_count.completion_details.reasoning"
    )
    if prompt is None and completion is None:
        return None
    usage: dict[str, Any] = {}
    if prompt is not None:
        usage["prompt_tokens"] = prompt
    if completion is not None:
        usage["completion_tokens"] = completion
    if prompt is not None and completion is not None:
        usage["total_tokens"] = prompt + completion
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def _body(
    attrs: dict[str, Any], messages: list[dict[str, Any]], at: At, tally: Tally
) -> dict[str, Any]:
    params = _raw_json(attrs, "llm.invocation_parameters") or {}
    model = _str_attr(
        {**attrs, "params.model": params.get("model")},
        "gen_ai.request.model",
        "params.model",
        "llm.model_name",
        "gen_ai.response.model",
    )
    if model is None:
        model = "unknown"
        tally.derived["model"] = "not in a span (gen_ai.request.model, llm.model_name): unknown"
    body: dict[str, Any] = {"model": model, "messages": messages}
    tools = _tools(attrs, at)
    if tools:
        body["tools"] = tools
    for k in _PARAMS:
        if params.get(k) is not None:
            body[k] = params[k]
    for k in (
        "max_tokens",
        "temperature",
        "top_p",
        "seed",
        "frequency_penalty",
        "presence_penalty",
    ):
        v = attrs.get(f"gen_ai.request.{k}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            body[k] = v
    stream = attrs.get("gen_ai.request.stream", attrs.get("gen_ai.is_streaming"))
    if isinstance(stream, bool):
        body["stream"] = stream
    return body


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
    events = _get(sp, "events", at)
    for ev in events if t is None and isinstance(events, list) else ():
        name = ev.get("name") if isinstance(ev, dict) else None
        if isinstance(name, str) and ("first_token" in name or "first_chunk" in name):
            when = _get(ev, "timeUnixNano", at)
            if isinstance(when, (int, str)) and _INT.fullmatch(str(when)):
                t = int(when)
                break
    if t is None or not start <= t <= end:
        return None
    return t


def _exchange(
    sp: dict[str, Any], quiet: At, at: At, tally: Tally, headers: dict[str, str]
) -> Exchange:
    """The call one LLM span records (see the module docstring)."""
    attrs = _attrs(_get(sp, "attributes", quiet), quiet)
    start = _nanos(_get(sp, "startTimeUnixNano", quiet), quiet, "startTimeUnixNano")
    end = _nanos(_get(sp, "endTimeUnixNano", quiet), quiet, "endTimeUnixNano")
    if end < start:
        at.deviate("endTimeUnixNano", "before the start, taken as the start")
        end = start
    body = _body(attrs, _messages(attrs, at), at, tally)
    answer, finish = _answer(attrs, at)
    status = _get(sp, "status", quiet)
    error: str | None = None
    if isinstance(status, dict) and _get(status, "code", quiet) in _STATUS_ERROR:
        message = status.get("message")
        error = str(message) if message else str(attrs.get("error.type") or "error")
    if answer is None:
        answer = {"role": "assistant", "content": ""}
        if error is None:
            tally.derived["answer"] = "not in a span (gen_ai.output.messages ...): an empty answer"
    try:
        x = chat_exchange(
            body, answer, (start, end), finish_reason=finish, usage=_usage(attrs), headers=headers
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
            last[r] = _load(rec)
        obj = last[r]
        for c in by_rec[r]:
            pos = scan.spans[c.key].pos
            at = _in(
                rec.at(tally.dev), f"resourceSpans[{pos[0]}].scopeSpans[{pos[1]}].spans[{pos[2]}]"
            )
            quiet = At(at.file, at.record)
            headers = {SESSION_HEADER: c.session}
            if c.agent is not None:
                headers[AGENT_HEADER] = c.agent
            out.append((c, _exchange(_span_at(obj, pos), quiet, at, tally, headers)))
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
            raise ConfigError(f"{p}: no such file or directory")


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
    progress = Progress("otel sessions", total=len(groups))
    tally.derived["times"] = (
        "each call from its span's start to its end; a first token only where "
        "gen_ai.response.time_to_first_chunk (or a first-token event) gives it"
    )

    def sessions() -> Iterator[list[Exchange]]:
        last: dict[int, Any] = {}
        for calls in groups.values():
            yield _session(scan, calls, tally, last)

    n_sessions, n_calls = write_sessions(
        out,
        lambda t0: full_header(FORMAT, scan.files, len(scan.records), tally, t0),
        sessions(),
        progress,
    )
    warning = tally.dev.warning()
    if warning:
        print(warning, file=sys.stderr)
    n_llm = sum(len(calls) for calls in groups.values())
    return (
        f"wrote {out}: {n_sessions:,} sessions, {n_calls:,} calls from {n_llm:,} LLM spans in "
        f"{len(scan.files):,} OTLP/JSON files ({scan.n_spans - n_llm:,} other spans skipped)"
    )
