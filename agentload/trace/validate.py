"""Whole-file validation for ``agentload trace validate``.

Reads every record (each validated against the schema by the reader), checks that every blob's
id is the content id of what it holds (``agentload.hashing.content_id``: a blob edited after it
was written, or scrubbed after it was hashed, is caught), and checks the references between
records: an ``llm_call`` names only blobs written before it (messages, tools
list, response) and only earlier calls as its prefix base; a ``tool_call`` names an
``llm_call`` of the file; every ``llm_call.depends_on`` id is a ``tool_call`` or an ``agent`` of
the file. The header names a tokenizer agentload knows (``o200k_base``, ``cl100k_base``,
``hf:PATH``); the schema itself rejects a ``block_size`` under 1 and negative counts. A broken
reference is a damaged file: ``TraceFormatError`` naming ``file:line`` and the field, like a
record that does not validate. A file that is whole may still lack calls: each request the
recording proxy could not turn into a call is an ``event`` (``events.NOT_RECORDED``); they are
counted (``ValidationReport.not_recorded``) and named in ``warnings``, without making the file
damaged.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import NoReturn

from agentload.errors import TraceFormatError
from agentload.errortext import clip
from agentload.hashing import content_id
from agentload.tokenizer import is_tokenizer_name
from agentload.trace.events import NOT_RECORDED
from agentload.trace.reader import TraceReader, Truncation, read_trace
from agentload.trace.schema import (
    AgentRecord,
    BlobRecord,
    EventRecord,
    Header,
    LLMCallRecord,
    Record,
    ToolCallRecord,
)

__all__ = ["ValidationReport", "validate_trace"]


@dataclass
class ValidationReport:
    """What ``validate_trace`` found in a file that is not damaged."""

    path: str
    header: Header | None
    counts: Counter[str] = field(default_factory=Counter)
    truncated: Truncation | None = None
    not_recorded: Counter[str] = field(default_factory=Counter)
    """Requests the file holds no call of (``NOT_RECORDED`` events), by kind."""
    first_not_recorded: str | None = None
    """The first such event's reason (its ``error``)."""

    @property
    def warnings(self) -> list[str]:
        """What a whole, valid file still lacks, one line each (``trace validate`` prints
        them; they do not change its exit code)."""
        n = sum(self.not_recorded.values())
        if not n:
            return []
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.not_recorded.items()))
        return [
            f"WARNING: {n} requests were not recorded as calls ({kinds}); "
            f"first: {self.first_not_recorded}"
        ]

    @property
    def records(self) -> int:
        """Number of complete records, the header included."""
        return sum(self.counts.values())


def validate_trace(path: str | os.PathLike[str]) -> ValidationReport:
    """Read and check the whole file; raises ``TraceFormatError`` if it is damaged."""
    reader = read_trace(path)
    check = _Checks(reader, ValidationReport(path=str(path), header=None))
    for rec in reader:
        check.record(rec)
    return check.finish()


class _Checks:
    """The checks of one file as it is read: each record against what came before it, then
    (``finish``) the references that may point forward."""

    def __init__(self, reader: TraceReader, report: ValidationReport) -> None:
        self.reader = reader
        self.report = report
        self.name = os.path.basename(report.path)
        self.blobs: set[str] = set()
        self.calls: set[str] = set()
        self.orphans: dict[str, int] = {}  # tool calls naming a call not (yet) seen: id -> line
        self.ids: set[str] = set()  # tool_call and agent ids: what depends_on may name
        self.wanted: dict[str, tuple[int, int]] = {}  # depends_on id not (yet) seen -> (line, i)

    def fail(self, what: str) -> NoReturn:
        """The file is damaged at the record just read."""
        raise TraceFormatError(f"{self.name}:{self.reader.lineno}: {what}")

    def record(self, rec: Record) -> None:
        """Count one record and check it against the records before it."""
        self.report.counts[rec.type] += 1
        if isinstance(rec, Header):
            self.header(rec)
        elif isinstance(rec, AgentRecord):
            self.ids.add(rec.id)
        elif isinstance(rec, BlobRecord):
            if content_id(rec.content) != rec.id:
                self.fail(f"blob.id: {rec.id} is not the content id of the blob's content")
            self.blobs.add(rec.id)
        elif isinstance(rec, LLMCallRecord):
            self.llm_call(rec)
        elif isinstance(rec, EventRecord) and rec.kind in NOT_RECORDED:
            self.report.not_recorded[rec.kind] += 1
            if self.report.first_not_recorded is None:
                error = str(rec.details.get("error", rec.kind))
                self.report.first_not_recorded = clip(error, 160)
        elif isinstance(rec, ToolCallRecord):
            self.ids.add(rec.id)
            if rec.llm_call_id not in self.calls:
                self.orphans.setdefault(rec.llm_call_id, self.reader.lineno)

    def header(self, rec: Header) -> None:
        """The header names a tokenizer agentload knows."""
        self.report.header = rec
        if not is_tokenizer_name(rec.tokenizer):
            self.fail(
                f"header.tokenizer: unknown tokenizer {rec.tokenizer!r} (o200k_base, "
                "cl100k_base or hf:PATH/tokenizer.json)"
            )

    def llm_call(self, rec: LLMCallRecord) -> None:
        """A call names only blobs written before it, and only an earlier call as its base."""
        for i, bid in enumerate(rec.messages):
            if bid not in self.blobs:
                self.fail(f"llm_call.messages.{i}: blob {bid} is not written before its first use")
        if rec.request.tools is not None and rec.request.tools not in self.blobs:
            self.fail(f"llm_call.request.tools: blob {rec.request.tools} is not written before use")
        if rec.response.content is not None and rec.response.content not in self.blobs:
            self.fail(f"llm_call.response.content: blob {rec.response.content} is not written")
        base = rec.prefix.base if rec.prefix is not None else None
        if base is not None and base not in self.calls:
            self.fail(f"llm_call.prefix.base: no earlier llm_call {base}")
        for i, dep in enumerate(rec.depends_on):
            if dep not in self.ids:
                self.wanted.setdefault(dep, (self.reader.lineno, i))
        self.calls.add(rec.id)

    def finish(self) -> ValidationReport:
        """The report, once the forward references (``depends_on``, a tool call's call) are
        all found in the file."""
        report, name = self.report, self.name
        report.truncated = self.reader.truncated
        if report.header is None:  # cut inside its first frame: nothing in it can be used
            raise TraceFormatError(f"{name}: no header record (file cut before its first record?)")
        for dep, (lineno, i) in self.wanted.items():
            if dep not in self.ids:
                raise TraceFormatError(
                    f"{name}:{lineno}: llm_call.depends_on.{i}: no tool_call or agent {dep}"
                )
        for call_id, lineno in self.orphans.items():
            if call_id not in self.calls:
                raise TraceFormatError(
                    f"{name}:{lineno}: tool_call.llm_call_id: no llm_call {call_id}"
                )
        return report
