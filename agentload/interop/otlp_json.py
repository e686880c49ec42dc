"""Reading OTLP/JSON: its requests, spans, ids, times and attribute values (nothing of GenAI).

The input is a file holding one ``ExportTraceServiceRequest`` object, or JSON Lines of them (what
``agentload trace export otel -o`` and the Collector's file exporter write):
``resourceSpans[].scopeSpans[].spans[]``. Read as the protobuf JSON mapping reads it: ids hex
(OTLP) or base64 (protobuf), ``kind`` and ``status.code`` integers or enum names, 64-bit integers
(times, ``intValue``) numbers or decimal strings, attribute values ``{"stringValue" |
"intValue" | "doubleValue" | "boolValue" | "arrayValue" | "kvlistValue" | "bytesValue"}``.
What departs from that mapping without losing meaning (snake_case keys, keys a message does not
have, a bare attribute value) is counted as a deviation; the OpenTelemetry packages are not
needed (orjson reads it).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from agentload.errors import TraceFormatError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.interop.content_free import EXTRA_KEY, INTEGRAL_FLOAT, At
from agentload.interop.exchanges import Tally, jsonl_values

__all__ = [
    "STATUS_ERROR",
    "Record",
    "any_value",
    "attributes",
    "check_span_keys",
    "inside",
    "int64",
    "looks_like_otel",
    "member",
    "nanos",
    "otlp_id",
    "read_records",
    "reload",
    "request_spans",
    "span_at",
]

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
STATUS_ERROR = (2, "STATUS_CODE_ERROR")
"""A failed span's ``status.code`` (an integer or the enum's name)."""


def looks_like_otel(first: dict[str, Any]) -> bool:
    """Whether a file's first object is an OTLP/JSON ``ExportTraceServiceRequest``."""
    return isinstance(first.get("resourceSpans", first.get("resource_spans")), list)


@dataclass(frozen=True)
class Record:
    """One ExportTraceServiceRequest: a line of a file (``lineno`` > 0) or the whole file."""

    path: Path
    lineno: int
    offset: int
    length: int

    def at(self, dev: Any) -> At:
        return At(str(self.path), f"line {self.lineno}" if self.lineno else "", dev)


def inside(at: At, part: str) -> At:
    """``at.sub(part)``, joined by a dot past the first part (``line 3 resourceSpans[0]`` +
    ``scopeSpans[1]``), so that a deviation's field reads ``resourceSpans[].scopeSpans[]``."""
    if not at.record or (at.record.startswith("line ") and " " not in at.record[5:]):
        return at.sub(part)
    return At(at.file, f"{at.record}.{part}", at.dev)


def member(d: dict[str, Any], key: str, at: At) -> Any:
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


def read_records(path: Path, tally: Tally) -> Iterator[tuple[Record, Any]]:
    """Each JSON object of ``path``: every line of a JSON Lines file (a line that is not JSON,
    say one cut short, is counted and skipped), else the whole file as one document."""
    try:
        with open(path, "rb") as f:
            lines = _is_object(_first_line(f))
            if lines:
                f.seek(0)
                for lineno, start, length, obj in jsonl_values(f, tally, MAX_DOCUMENT_BYTES):
                    yield Record(path, lineno, start, length), obj
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
    yield Record(path, 0, 0, len(data)), obj


def reload(rec: Record) -> Any:
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


def request_spans(
    obj: Any, at: At
) -> Iterator[tuple[tuple[int, int, int], dict[str, Any], str, At]]:
    """Each span of a request: its place, the span, its scope's name, its ``At``."""
    if not isinstance(obj, dict):
        at.fail("resourceSpans", "not a JSON object: not an OTLP ExportTraceServiceRequest")
    for key in obj:
        if key not in ("resourceSpans", "resource_spans"):
            at.deviate(key, EXTRA_KEY)
    rss = member(obj, "resourceSpans", at)
    if not isinstance(rss, list):
        at.fail("resourceSpans", "missing: not an OTLP ExportTraceServiceRequest")
    for i, rs in enumerate(rss):
        rat = inside(at, f"resourceSpans[{i}]")
        if not isinstance(rs, dict):
            at.deviate(f"resourceSpans[{i}]", "not an object, skipped")
            continue
        sss = member(rs, "scopeSpans", rat)
        if sss is None and "instrumentationLibrarySpans" in rs:  # OTLP before 0.15
            rat.deviate("instrumentationLibrarySpans", "renamed scopeSpans in OTLP 0.15")
            sss = rs["instrumentationLibrarySpans"]
        for j, ss in enumerate(sss if isinstance(sss, list) else ()):
            sat = inside(rat, f"scopeSpans[{j}]")
            if not isinstance(ss, dict):
                rat.deviate(f"scopeSpans[{j}]", "not an object, skipped")
                continue
            scope = member(ss, "scope", sat) or ss.get("instrumentationLibrary")
            name = scope.get("name") if isinstance(scope, dict) else None
            spans = member(ss, "spans", sat)
            for k, sp in enumerate(spans if isinstance(spans, list) else ()):
                if not isinstance(sp, dict):
                    sat.deviate(f"spans[{k}]", "not an object, skipped")
                    continue
                yield (
                    (i, j, k),
                    sp,
                    name if isinstance(name, str) else "",
                    inside(sat, f"spans[{k}]"),
                )


def span_at(obj: Any, pos: tuple[int, int, int]) -> dict[str, Any]:
    """The span at ``pos`` of a request read again (its keys already checked once)."""
    quiet = At("", "")
    rs = member(obj, "resourceSpans", quiet)[pos[0]]
    sss = member(rs, "scopeSpans", quiet)
    if sss is None:
        sss = rs["instrumentationLibrarySpans"]
    span: dict[str, Any] = member(sss[pos[1]], "spans", quiet)[pos[2]]
    return span


def otlp_id(value: Any, size: int, at: At, fld: str) -> str | None:
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


def nanos(value: Any, at: At, fld: str) -> int:
    """A time in Unix nanoseconds: a number or a decimal string."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    if isinstance(value, str) and _INT.fullmatch(value) and int(value) > 0:
        return int(value)
    if isinstance(value, float) and value.is_integer() and value > 0:
        at.deviate(fld, INTEGRAL_FLOAT)
        return int(value)
    at.fail(fld, f"expected Unix nanoseconds (an integer > 0), got {value!r:.40}")


def _int_value(x: Any, at: At) -> int | None:
    """An ``intValue``: a number or a decimal string (anything else counted, ignored)."""
    if isinstance(x, int) and not isinstance(x, bool):
        return x
    if isinstance(x, str) and _INT.fullmatch(x):
        return int(x)
    if isinstance(x, float) and x.is_integer():
        at.deviate("value.intValue", INTEGRAL_FLOAT)
        return int(x)
    at.deviate("value.intValue", "not an integer, ignored")
    return None


def _double_value(x: Any, at: At) -> float | None:
    """A ``doubleValue``: a number, or a string of one (anything else counted, ignored)."""
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return float(x)
    try:  # the protobuf JSON mapping writes "NaN", "Infinity"; a number may be a string
        return float(x)
    except (TypeError, ValueError):
        at.deviate("value.doubleValue", "not a number, ignored")
        return None


def _bool_value(x: Any, at: At) -> bool | None:
    """A ``boolValue`` (anything but true or false counted, ignored)."""
    if isinstance(x, bool):
        return x
    at.deviate("value.boolValue", "not true or false, ignored")
    return None


_SCALARS: dict[str, Callable[[Any, At], Any]] = {
    "intValue": _int_value,
    "doubleValue": _double_value,
    "boolValue": _bool_value,
}
"""How each scalar ``AnyValue`` but ``stringValue`` is read."""


def _list_value(key: str, x: Any, at: At) -> Any:
    """An ``arrayValue`` as a list, a ``kvlistValue`` as a dict (empty without ``values``)."""
    values = member(x, "values", at) if isinstance(x, dict) else None
    if not isinstance(values, list):
        return [] if key == "arrayValue" else {}
    if key == "arrayValue":
        return [any_value(e, at) for e in values]
    return {
        str(kv.get("key")): any_value(kv.get("value"), at) for kv in values if isinstance(kv, dict)
    }


def any_value(v: Any, at: At) -> Any:
    """An ``AnyValue`` as a Python value (None when it holds none)."""
    if not isinstance(v, dict):
        if v is not None:
            at.deviate("value", "not an AnyValue object, taken as given")
        return v
    for key in _VALUE_KEYS:
        x = member(v, key, at)
        if x is not None or key in v:
            break
    else:
        return None
    if key == "stringValue":
        return x if isinstance(x, str) else None if x is None else str(x)
    if key in _SCALARS:
        return _SCALARS[key](x, at)
    if key in ("arrayValue", "kvlistValue"):
        return _list_value(key, x, at)
    return x  # bytesValue: its base64 text


def attributes(raw: Any, at: At) -> dict[str, Any]:
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
        out[kv["key"]] = any_value(kv.get("value"), inside(at, "attributes[]"))
    return out


def check_span_keys(sp: dict[str, Any], at: At) -> None:
    """Count the keys a ``Span`` does not have (in either case)."""
    for name in sp:
        if name not in _SPAN_KEYS and name not in _SPAN_SNAKE:
            at.deviate(name, EXTRA_KEY)


def int64(value: Any) -> int | None:
    """A 64-bit integer as OTLP/JSON writes it (a number or a decimal string); else None."""
    if isinstance(value, (int, str)) and _INT.fullmatch(str(value)):
        return int(value)
    return None
