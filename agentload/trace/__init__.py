"""The trace: schema, its event kinds and their payloads (``events``), writer, reader, capture,
prefix hashing, secrets."""

from agentload.trace.capture import CallCapture, ObservedCall, assistant_message
from agentload.trace.reader import TraceReader, Truncation, read_trace
from agentload.trace.schema import (
    SCHEMA,
    AgentRecord,
    BlobRecord,
    ClockAnchor,
    EventRecord,
    Header,
    HostFacts,
    LLMCallRecord,
    PrefixInfo,
    RequestParams,
    ResponseRecord,
    SessionRecord,
    Timings,
    ToolCallRecord,
    ToolCallRef,
    Usage,
)
from agentload.trace.trace import Trace, load_trace
from agentload.trace.writer import TraceWriter

__all__ = [
    "SCHEMA",
    "AgentRecord",
    "BlobRecord",
    "CallCapture",
    "ClockAnchor",
    "EventRecord",
    "Header",
    "HostFacts",
    "LLMCallRecord",
    "ObservedCall",
    "PrefixInfo",
    "RequestParams",
    "ResponseRecord",
    "SessionRecord",
    "Timings",
    "ToolCallRecord",
    "ToolCallRef",
    "Trace",
    "TraceReader",
    "TraceWriter",
    "Truncation",
    "Usage",
    "assistant_message",
    "load_trace",
    "make_header",
    "read_trace",
]


def make_header(**fields: object) -> Header:
    """A header with tool version, UTC time, clock anchor and host facts filled in."""
    import datetime
    import os
    import platform
    import sys
    import time

    from agentload import __version__
    from agentload.masking import redact_url

    mono = time.perf_counter_ns()
    unix = time.time_ns()
    base: dict[str, object] = {
        "tool_version": __version__,
        "created_at": datetime.datetime.now(datetime.UTC).isoformat(),
        "clock": ClockAnchor(unix_ns=unix, mono_ns=mono),
        "tokenizer": "o200k_base",
        "host": HostFacts(
            python=sys.version.split()[0], os=platform.platform(), cpu_count=os.cpu_count() or 1
        ),
    }
    base.update(fields)
    endpoint = base.get("endpoint")
    if isinstance(endpoint, str):
        base["endpoint"] = redact_url(endpoint)
    return Header.model_validate(base)
