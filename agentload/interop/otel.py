"""``agentload trace export otel``: agentload traces as OpenTelemetry GenAI spans.

Each session becomes one OTLP trace (``otel_spans`` builds its SDK spans). The spans are
encoded by the OTLP exporter's own encoder (``encode_spans`` -> ``ExportTraceServiceRequest``)
and either written as OTLP/JSON, one request per session per line (the JSON Lines layout the
Collector's file exporter writes and its ``otlpjsonfile`` receiver reads), or sent over OTLP/HTTP
(protobuf) with the SDK's ``OTLPSpanExporter``, one request per session.

OTLP/JSON is the protobuf JSON mapping with two differences the OTLP specification makes:
trace and span ids are hex strings (not base64), and enums are integers.
"""

from __future__ import annotations

import base64
import importlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agentload.errors import ConfigError, EndpointError
from agentload.outfile import atomic_output

if TYPE_CHECKING:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.sdk.trace import ReadableSpan

__all__ = ["export_otel", "otlp_json"]

_INSTALL = (
    "trace export otel: the OpenTelemetry packages are not installed: pip install 'agentload[otel]'"
)
_NEEDED = (
    "opentelemetry.sdk.trace",
    "opentelemetry.proto.collector.trace.v1.trace_service_pb2",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})
_EXPORTER_LOGGERS = ("opentelemetry.exporter.otlp.proto.http", "opentelemetry.exporter.otlp.common")


def _check_installed() -> None:
    try:
        for module in _NEEDED:
            importlib.import_module(module)
    except ImportError:
        raise ConfigError(_INSTALL) from None


def _hex_ids(node: Any) -> None:
    if isinstance(node, dict):
        for k, v in node.items():
            if k in _ID_KEYS and isinstance(v, str):
                node[k] = base64.b64decode(v).hex()
            else:
                _hex_ids(v)
    elif isinstance(node, list):
        for v in node:
            _hex_ids(v)


def otlp_json(request: ExportTraceServiceRequest) -> dict[str, Any]:
    """``request`` in the OTLP/JSON encoding (hex ids, integer enums, lowerCamelCase keys;
    64-bit integers as decimal strings, as the protobuf JSON mapping writes them)."""
    from google.protobuf import json_format  # type: ignore[import-untyped]

    doc: dict[str, Any] = json_format.MessageToDict(request, use_integers_for_enums=True)
    _hex_ids(doc)
    return doc


def _traces(paths: Sequence[Path], content: bool, notes: list[str]) -> Iterator[list[ReadableSpan]]:
    """The spans of every session of every trace, one list per session."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    from agentload.interop.otel_spans import (
        SEMCONV_SCHEMA_URL,
        session_ids,
        session_spans,
        tool_results,
    )
    from agentload.trace.trace import load_trace

    for path in paths:
        trace = load_trace(path)
        h = trace.header
        if content and h.redacted:
            notes.append(f"{path}: a content-free trace: its spans carry no message content")
        resource = Resource({"service.name": "agentload", "service.version": h.tool_version})
        scope = InstrumentationScope("agentload", h.tool_version, SEMCONV_SCHEMA_URL)
        results = tool_results(trace) if content and not h.redacted else {}
        for sid in session_ids(trace):
            yield session_spans(
                trace, sid, content=content, resource=resource, scope=scope, results=results
            )


def _write_file(paths: Sequence[Path], out: Path, content: bool, force: bool) -> list[str]:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    notes: list[str] = []
    sessions = spans = 0
    # ``out`` is checked (an input, a directory, exists unasked) before any trace is read.
    with atomic_output(out, paths, force=force) as tmp, tmp.open("wb") as f:
        for batch in _traces(paths, content, notes):
            f.write(orjson.dumps(otlp_json(encode_spans(batch))) + b"\n")
            sessions += 1
            spans += len(batch)
    return [
        *notes,
        f"{out}: {spans} spans in {sessions} OTLP traces (one per session; OTLP/JSON, one "
        f"ExportTraceServiceRequest per line) from {len(paths)} agentload trace(s)",
    ]


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@contextmanager
def _exporter_logs() -> Iterator[_Collect]:
    """The exporter's warnings and errors, collected instead of printed (we report one line)."""
    handler = _Collect()
    saved = []
    for name in _EXPORTER_LOGGERS:
        log = logging.getLogger(name)
        saved.append((log, log.propagate))
        log.addHandler(handler)
        log.propagate = False
    try:
        yield handler
    finally:
        for log, propagate in saved:
            log.removeHandler(handler)
            log.propagate = propagate


def _reason(messages: list[str]) -> str:
    """The exporter's last word, and its first when it retried (that one names the cause)."""
    if not messages:
        return "no reason given"
    if len(messages) > 1 and messages[0] != messages[-1]:
        return f"{messages[-1]} (first: {messages[0]})"
    return messages[-1]


def _send(paths: Sequence[Path], endpoint: str, content: bool) -> list[str]:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    from agentload.masking import redact_url, remember_url

    remember_url(endpoint)  # urllib3's messages quote its path and query
    shown = redact_url(endpoint)
    if not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"--otlp-endpoint {shown}: not an http(s) URL")
    notes: list[str] = []
    exporter = OTLPSpanExporter(endpoint=endpoint, timeout=10.0)
    sessions = spans = 0
    try:
        with _exporter_logs() as logs:
            for batch in _traces(paths, content, notes):
                if exporter.export(batch) is not SpanExportResult.SUCCESS:
                    why = _reason(logs.messages)
                    raise EndpointError(
                        f"--otlp-endpoint {shown}: export of session {sessions + 1} failed "
                        f"({sessions} sent): {why}"
                    )
                sessions += 1
                spans += len(batch)
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]
    return [
        *notes,
        f"{shown}: sent {spans} spans in {sessions} OTLP traces (one per session, OTLP/HTTP "
        f"protobuf) from {len(paths)} agentload trace(s)",
    ]


def export_otel(
    traces: Sequence[Path],
    out: Path | None,
    *,
    content: bool,
    endpoint: str | None,
    force: bool = False,
) -> list[str]:
    """Export ``traces`` as OTLP JSON to ``out``, or over OTLP/HTTP to ``endpoint``."""
    _check_installed()
    if endpoint is not None:
        if out is not None:
            raise ConfigError("--otlp-endpoint and -o/--out: give one of them")
        return _send(traces, endpoint, content)
    assert out is not None
    return _write_file(traces, out, content, force)
