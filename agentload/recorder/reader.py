"""Streaming trace reader: validates every record, survives a truncated tail.

    reader = read_trace(path)
    for record in reader:      # raises TraceFormatError on a bad record (file:line: field: why)
        ...
    reader.truncated           # None, or where and why the file ends early

A truncated tail (a cut zstd frame, half a line) never raises: every complete record before it
is yielded and ``truncated`` says where the file was cut. A file that ends cleanly but without
the writer's closing ``trace_end`` event (a run killed between two frames) is reported as
truncated too. Line numbers count lines of the decompressed stream, 1-based.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import zstandard
from pydantic import ValidationError

from agentload.errors import SchemaVersionError, TraceFormatError
from agentload.recorder.schema import (
    SCHEMA_MAJOR,
    TRACE_END,
    AgentRecord,
    EventRecord,
    Header,
    LLMCallRecord,
    Record,
    SessionRecord,
    ToolCallRecord,
    record_adapter,
)

__all__ = ["MAX_SPAN_NS", "TraceReader", "Truncation", "format_validation_error", "read_trace"]

MAX_SPAN_NS = 366 * 86_400_000_000_000
"""How far any recorded time may lie from the header's clock anchor (a year and a day)."""

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 18  # compressed bytes per read: bounds the copy per small frame


@dataclass(frozen=True)
class Truncation:
    """Where a file ends early: after ``records`` complete records, and why."""

    records: int
    offset: int
    reason: str

    def __str__(self) -> str:
        return f"truncated after record {self.records} (byte {self.offset}): {self.reason}"


def format_validation_error(exc: ValidationError, type_name: str) -> str:
    """``llm_call.usage.prompt_tokens: Input should be a valid integer`` for the first error."""
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ())]
    if loc and loc[0] == type_name:  # the discriminated union puts the tag first
        loc = loc[1:]
    path = ".".join([type_name, *loc]) if type_name else ".".join(loc)
    return f"{path}: {err.get('msg', 'invalid')}"


class TraceReader:
    """Iterate the records of one trace file (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.truncated: Truncation | None = None
        self.header: Header | None = None
        self.count = 0
        self.ended = False  # the last record read is the writer's trace_end event
        self.lineno = 0  # line of the last record yielded

    def __iter__(self) -> Iterator[Record]:
        self.truncated = None
        self.header = None
        self.count = 0
        self.ended = False
        try:
            f = self.path.open("rb")
        except OSError as exc:
            raise TraceFormatError(f"{self.path}: cannot open: {exc.strerror or exc}") from None
        with f:
            head = f.read(4)
            f.seek(0)
            zstd = head == _ZSTD_MAGIC
            lines = self._zstd_lines(f) if zstd else self._plain_lines(f)
            lineno = 0  # physical line in the (decompressed) stream, 1-based
            for line, offset, complete in lines:
                lineno += 1
                if not complete:
                    rec = self._try_last(line, lineno)
                    if rec is None:
                        self.truncated = Truncation(self.count, offset, "incomplete last line")
                        return
                    yield rec
                    continue
                if not line.strip():
                    continue
                yield self._parse(line, lineno)
            size = f.tell()
        if self.header is None and self.truncated is None:
            raise TraceFormatError(f"{self.path}: empty file: no header record")
        if self.truncated is None and not self.ended:
            self.truncated = Truncation(
                self.count,
                size,
                f"no {TRACE_END} record: the writer did not close the file (killed run?)",
            )

    # -- line sources: yield (line bytes, byte offset, complete?) ----------------------------
    def _plain_lines(self, f: Any) -> Iterator[tuple[bytes, int, bool]]:
        rest = b""
        offset = 0
        while chunk := f.read(_CHUNK):
            data = rest + chunk
            parts = data.split(b"\n")
            rest = parts.pop()
            for p in parts:
                yield p, offset, True
                offset += len(p) + 1
        if rest:
            yield rest, offset, False

    def _zstd_lines(self, f: Any) -> Iterator[tuple[bytes, int, bool]]:
        dctx = zstandard.ZstdDecompressor()
        dobj = dctx.decompressobj()
        rest = b""
        consumed = 0  # compressed bytes fed
        frame_open = False
        pending = b""
        while True:
            chunk = pending or f.read(_CHUNK)
            pending = b""
            if not chunk:
                break
            try:
                out = dobj.decompress(chunk)
            except zstandard.ZstdError as exc:
                if rest:
                    yield rest, consumed, False
                self._fail_zstd(consumed, exc)
            frame_open = not dobj.eof
            if dobj.eof:
                pending = dobj.unused_data
                consumed += len(chunk) - len(pending)
                dobj = dctx.decompressobj()
            else:
                consumed += len(chunk)
            data = rest + out
            parts = data.split(b"\n")
            rest = parts.pop()
            for p in parts:
                yield p, consumed, True
            if pending and not pending.startswith(_ZSTD_MAGIC[: len(pending)]):
                self._fail_zstd(consumed, zstandard.ZstdError("unknown frame descriptor"))
        if rest or frame_open:
            if rest:
                yield rest, consumed, False
            if frame_open and self.truncated is None:
                self.truncated = Truncation(self.count, consumed, "incomplete zstd frame")

    def _fail_zstd(self, offset: int, exc: Exception) -> None:
        # Garbage inside the stream (not a clean cut): the file is damaged, not truncated.
        raise TraceFormatError(f"{self.path}: byte {offset}: bad zstd data: {exc}")

    # -- parsing ------------------------------------------------------------------------------
    def _try_last(self, line: bytes, lineno: int) -> Record | None:
        try:
            return self._parse(line, lineno)
        except TraceFormatError:
            return None

    def _parse(self, line: bytes, lineno: int) -> Record:
        where = f"{self.path.name}:{lineno}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(f"{where}: not valid JSON: {exc}") from None
        if not isinstance(obj, dict):
            raise TraceFormatError(f"{where}: a record must be a JSON object")
        rtype = obj.get("type")
        if self.header is None:
            if rtype != "header":
                raise TraceFormatError(
                    f"{where}: the first record must be the header, got type={rtype!r}"
                )
            self._check_schema(obj.get("schema"), where)
        elif rtype == "header":
            raise TraceFormatError(f"{where}: a second header record")
        if not isinstance(rtype, str):
            raise TraceFormatError(f"{where}: type: missing or not a string")
        try:
            rec = record_adapter.validate_python(obj)
        except ValidationError as exc:
            raise TraceFormatError(f"{where}: {format_validation_error(exc, rtype)}") from None
        if isinstance(rec, Header):
            self.header = rec
        else:
            self._check_times(rec, rtype, where)
        self.ended = isinstance(rec, EventRecord) and rec.kind == TRACE_END
        self.count += 1
        self.lineno = lineno
        return rec

    def _check_times(self, rec: Record, rtype: str, where: str) -> None:
        """Every time of ``rec`` within ``MAX_SPAN_NS`` of the header's clock anchor: replay
        waits out recorded gaps, so a time 146 years away (2**62 ns) would have it wait
        forever; no real recording spans a year."""
        assert self.header is not None
        anchor = self.header.clock.mono_ns
        times: list[tuple[str, int | None]]
        if isinstance(rec, LLMCallRecord):
            t = rec.timings
            times = [("timings.submit_ns", t.submit_ns), ("timings.first_token_ns", t.first_token_ns),
                     ("timings.last_token_ns", t.last_token_ns)]  # fmt: skip
            if t.chunk_offsets_ns and max(map(abs, t.chunk_offsets_ns)) > MAX_SPAN_NS:
                times.append(
                    ("timings.chunk_offsets_ns", max(t.chunk_offsets_ns, key=abs) + anchor)
                )
        elif isinstance(rec, ToolCallRecord | SessionRecord | AgentRecord):
            times = [("start_ns", rec.start_ns), ("end_ns", rec.end_ns)]
        elif isinstance(rec, EventRecord):
            times = [("ns", rec.ns)]
        else:
            return
        for name, value in times:
            if value is not None and abs(value - anchor) > MAX_SPAN_NS:
                days = abs(value - anchor) / 86_400e9
                raise TraceFormatError(
                    f"{where}: {rtype}.{name}: {value} is {days:,.0f} days from the trace's clock "
                    f"anchor (header.clock.mono_ns {anchor}); a trace spans at most "
                    f"{MAX_SPAN_NS // 86_400_000_000_000} days"
                )

    def _check_schema(self, schema: object, where: str) -> None:
        if not isinstance(schema, str) or not schema.startswith("agentload.trace/"):
            raise TraceFormatError(
                f"{where}: header.schema: expected 'agentload.trace/N', got {schema!r}"
            )
        major = schema.split("/", 1)[1].split(".", 1)[0]
        if major != str(SCHEMA_MAJOR):
            raise SchemaVersionError(
                f"{where}: trace schema {schema!r} is not supported by this agentload "
                f"(reads agentload.trace/{SCHEMA_MAJOR}); upgrade agentload to read it"
            )


def read_trace(path: str | os.PathLike[str]) -> TraceReader:
    """A reader over ``path`` (zstd or plain JSON lines, detected by content)."""
    return TraceReader(path)
