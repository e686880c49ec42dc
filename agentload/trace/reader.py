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
from typing import Any, BinaryIO

import orjson
import zstandard
from pydantic import ValidationError

from agentload.errors import SchemaVersionError, TraceFormatError
from agentload.infile import Unreadable, open_fd, regular_fd
from agentload.trace.events import EventKind
from agentload.trace.schema import (
    SCHEMA_MAJOR,
    AgentRecord,
    EventRecord,
    Header,
    LLMCallRecord,
    Record,
    SessionRecord,
    ToolCallRecord,
    record_adapter,
)

__all__ = [
    "MAX_LINE_BYTES",
    "MAX_SPAN_NS",
    "TraceReader",
    "Truncation",
    "format_validation_error",
    "read_trace",
]

MAX_SPAN_NS = 366 * 86_400_000_000_000
"""How far any recorded time may lie from the header's clock anchor (a year and a day)."""

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 18  # bytes per read of the file
_FEED = 1 << 12  # compressed bytes per decompress call: at most ~128 MiB out of one, however
# well it compresses (RLE blocks); typically ~40 KiB
MAX_LINE_BYTES = 256 * 1024 * 1024
"""The longest record line read (a blob of a very long message is a few MiB; 256 MiB bounds what
one line of a hostile file can make the reader hold)."""


class _LineBuffer:
    """Lines out of a byte stream in linear time (a long line is kept as pieces and joined
    once), each at most ``MAX_LINE_BYTES``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._parts: list[bytes] = []
        self.pending = 0  # bytes of the line not yet ended

    def feed(self, data: bytes) -> list[bytes]:
        out: list[bytes] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            piece = data[start:end]
            if self._parts:
                self._grow(len(piece))
                self._parts.append(piece)
                piece = b"".join(self._parts)
                self._parts, self.pending = [], 0
            elif len(piece) > MAX_LINE_BYTES:
                self._grow(len(piece))
            out.append(piece)
            start = end + 1
        if start < len(data):
            self._grow(len(data) - start)
            self._parts.append(data[start:])
        return out

    def _grow(self, n: int) -> None:
        self.pending += n
        if self.pending > MAX_LINE_BYTES:
            raise TraceFormatError(
                f"{self.path}: a line longer than {MAX_LINE_BYTES // (1024 * 1024)} MiB "
                "(not a trace, or a damaged one)"
            )

    def rest(self) -> bytes:
        return b"".join(self._parts)


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
        f = self._open()
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
                f"no {EventKind.TRACE_END} record: the writer did not close the file (killed run?)",
            )

    # -- line sources: yield (line bytes, byte offset, complete?) ----------------------------
    def _plain_lines(self, f: Any) -> Iterator[tuple[bytes, int, bool]]:
        lines = _LineBuffer(self.path)
        offset = 0
        while chunk := f.read(_CHUNK):
            for p in lines.feed(chunk):
                yield p, offset, True
                offset += len(p) + 1
        if lines.pending:
            yield lines.rest(), offset, False

    def _zstd_lines(self, f: Any) -> Iterator[tuple[bytes, int, bool]]:
        dctx = zstandard.ZstdDecompressor()
        dobj = dctx.decompressobj()
        lines = _LineBuffer(self.path)
        consumed = 0  # compressed bytes fed
        frame_open = False
        while chunk := f.read(_CHUNK):
            pos = 0
            while pos < len(chunk):
                # A small slice at a time: one decompress call's output stays bounded however
                # well the data compresses (an RLE block of 4 bytes inflates to 128 KiB).
                piece = chunk[pos : pos + _FEED]
                try:
                    out = dobj.decompress(piece)
                except zstandard.ZstdError as exc:
                    if lines.pending:
                        yield lines.rest(), consumed, False
                    self._fail_zstd(consumed, exc)
                if dobj.eof:
                    used = len(piece) - len(dobj.unused_data)
                    dobj = dctx.decompressobj()
                    frame_open = False
                    after = chunk[pos + used : pos + used + 4]
                    if after and not _ZSTD_MAGIC.startswith(after):
                        consumed += used
                        for p in lines.feed(out):
                            yield p, consumed, True
                        self._fail_zstd(consumed, zstandard.ZstdError("unknown frame descriptor"))
                else:
                    used = len(piece)
                    frame_open = True
                consumed += used
                pos += used
                for p in lines.feed(out):
                    yield p, consumed, True
        if lines.pending or frame_open:
            if lines.pending:
                yield lines.rest(), consumed, False
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
        self.ended = isinstance(rec, EventRecord) and rec.kind == EventKind.TRACE_END
        self.count += 1
        self.lineno = lineno
        return rec

    def _check_times(self, rec: Record, rtype: str, where: str) -> None:
        """Every time of ``rec`` within ``MAX_SPAN_NS`` of the header's clock anchor: replay
        waits out recorded gaps, so a time 146 years away (2**62 ns) would have it wait
        forever; no real recording spans a year. (Cheap on the common path: comparisons only.)"""
        assert self.header is not None
        anchor = self.header.clock.mono_ns
        lo, hi = anchor - MAX_SPAN_NS, anchor + MAX_SPAN_NS
        if isinstance(rec, LLMCallRecord):
            t = rec.timings
            first, last, offs = t.first_token_ns, t.last_token_ns, t.chunk_offsets_ns
            if not lo <= t.submit_ns <= hi:
                self._far(where, rtype, "timings.submit_ns", t.submit_ns, anchor)
            if first is not None and not lo <= first <= hi:
                self._far(where, rtype, "timings.first_token_ns", first, anchor)
            if last is not None and not lo <= last <= hi:
                self._far(where, rtype, "timings.last_token_ns", last, anchor)
            if offs and (max(offs) > MAX_SPAN_NS or min(offs) < -MAX_SPAN_NS):
                self._far(
                    where, rtype, "timings.chunk_offsets_ns", anchor + max(offs, key=abs), anchor
                )
        elif isinstance(rec, ToolCallRecord | SessionRecord | AgentRecord):
            if not lo <= rec.start_ns <= hi:
                self._far(where, rtype, "start_ns", rec.start_ns, anchor)
            if rec.end_ns is not None and not lo <= rec.end_ns <= hi:
                self._far(where, rtype, "end_ns", rec.end_ns, anchor)
        elif isinstance(rec, EventRecord) and not lo <= rec.ns <= hi:
            self._far(where, rtype, "ns", rec.ns, anchor)

    def _open(self) -> BinaryIO:
        """The trace file, opened without blocking (a FIFO never hangs the reader) and only
        when it is a regular file (``/dev/zero``, a FIFO or a socket is refused)."""
        try:
            fd = open_fd(self.path)
            regular_fd(fd)
        except OSError as exc:
            raise TraceFormatError(f"{self.path}: cannot open: {exc.strerror or exc}") from None
        except Unreadable:
            raise TraceFormatError(f"{self.path}: not a regular file (a trace is a file)") from None
        return os.fdopen(fd, "rb")

    @staticmethod
    def _far(where: str, rtype: str, name: str, value: int, anchor: int) -> None:
        days = abs(value - anchor) / 86_400e9
        raise TraceFormatError(
            f"{where}: {rtype}.{name}: {value} is {days:,.0f} days from the trace's clock anchor "
            f"(header.clock.mono_ns {anchor}); a trace spans at most "
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
