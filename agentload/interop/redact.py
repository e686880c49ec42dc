"""``agentload trace redact``: the same trace with every text replaced by lengths and salted ids.

The output is a content-free trace (``header.redacted``; see ``agentload.trace.schema``) that
keeps the shape of the original record by record: sessions, the agent tree, every call with its
order, ``depends_on``, timings, usage and sizes, every tool call with its timing and sizes. What
changes (all ids below are keyed blake2b of the salt, which is never written):

* ``llm_call.prefix``: each block id becomes ``H(salt, "block", id)``, 16 hex chars, so equal
  blocks stay equal and the incremental ``base`` / ``base_blocks`` structure is kept as is;
* message blobs hold ``{"role", "chars", "ref"}`` (plus ``tool_call_id`` for a tool result and
  ``tool_calls`` / ``tool_call_chars`` for an assistant message that called tools), ``ref``
  being ``H(salt, "blob", original id)``: the blob id is the content id of that, not of the
  text, so a short message cannot be guessed from it; tool-schema blobs hold one
  ``{"name", "chars"}`` per tool, text blobs ``{"chars", "ref"}``; ``blob.tokens`` is kept;
* tool calls lose ``arguments`` (written as ``{}``, with ``arguments_chars``), ``raw_arguments``,
  the error text (``"redacted"`` marks that there was one), ``sandbox_id`` and
  ``model_call_id``; the calls' ``response.tool_calls`` lose their arguments likewise;
* free text goes: the header's endpoint, scenario name and config, host name and calibration
  error; a session's workspace and the text values of its ``meta`` (numbers and booleans stay);
  events keep kind and time, and only the numbers of their ``details``; an llm_call's error text
  becomes ``"redacted"``; ``request.extra`` and a non-keyword ``tool_choice`` are dropped; any
  field a later schema adds is dropped rather than passed through.

Kept as they are: record ids (session, agent, call and tool-call ids: agentload's own, built from
roles and seeds), agent roles, models, each call's ``turn`` and modeled ``wait_ns`` with the
header's ``waits`` (the fitted model and its corpus: numbers and a citation), and tool names (the product's tool vocabulary, which
``trace stats`` counts by; ``hash_tool_names`` replaces them by ``tool-`` + 8 hex salted).
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import ConfigError, TraceFormatError
from agentload.outfile import atomic_output
from agentload.trace.events import EventKind
from agentload.trace.reader import read_trace
from agentload.trace.schema import (
    AgentRecord,
    BlobRecord,
    EventRecord,
    Header,
    HostFacts,
    LLMCallRecord,
    PrefixInfo,
    RequestParams,
    ResponseRecord,
    SessionRecord,
    SourceInfo,
    Timings,
    TokenCalibration,
    ToolCallRecord,
    ToolCallRef,
    Usage,
)
from agentload.trace.writer import TraceWriter

__all__ = ["Redactor", "redact_trace"]

_REDACTED = "redacted"
_TOOL_CHOICES = ("auto", "none", "required")


def _numbers(d: dict[str, Any]) -> dict[str, Any]:
    """Only the number and boolean values of a free-form dict (no text survives)."""
    return {k: v for k, v in d.items() if isinstance(v, (int, float, bool))}


def _text_len(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(p.get("text", "")) for p in content if isinstance(p, dict))
    return len(orjson.dumps(content))


def _json_len(value: Any) -> int:
    return len(value) if isinstance(value, str) else len(orjson.dumps(value))


class Redactor:
    """Maps the records of one trace to their redacted form (see the module docstring)."""

    def __init__(self, salt: bytes, *, hash_tool_names: bool = False, path: str = "") -> None:
        self.path = path
        self._key = hashlib.blake2b(b"agentload.redact\x00" + salt, digest_size=32).digest()
        self.hash_tool_names = hash_tool_names
        self.blob_ids: dict[str, str] = {}  # original blob id -> redacted blob id

    def h(self, kind: str, value: str, chars: int = 16) -> str:
        """Keyed hash of ``value`` in the namespace ``kind``, ``chars`` hex chars."""
        d = hashlib.blake2b(f"{kind}\x00{value}".encode(), key=self._key, digest_size=chars // 2)
        return d.hexdigest()

    def tool_name(self, name: str) -> str:
        return f"tool-{self.h('tool', name, 8)}" if self.hash_tool_names else name

    def header(self, h: Header) -> Header:
        host = h.host and HostFacts(python=h.host.python, os=h.host.os, cpu_count=h.host.cpu_count)
        cal = h.token_calibration
        if cal is not None:
            cal = TokenCalibration(
                server_per_ours=cal.server_per_ours,
                sample_tokens_ours=cal.sample_tokens_ours,
                sample_tokens_server=cal.sample_tokens_server,
            )
        src = h.source
        if src is not None:
            src = SourceInfo(
                format=src.format,
                files=[],
                block_size=src.block_size,
                hash_id_scope=src.hash_id_scope,
                records=src.records,
                derived=src.derived,
                deviations=src.deviations,
            )
        return Header(
            tool_version=h.tool_version,
            created_at=h.created_at,
            clock=h.clock,
            tokenizer=h.tokenizer,
            block_size=h.block_size,
            model=h.model,
            scenario_hash=h.scenario_hash,
            seed=h.seed,
            host=host,
            redacted=True,
            source=src,
            token_calibration=cal,
            waits=h.waits,  # the fitted model and its corpus: numbers and a citation, no content
        )

    def blob(self, b: BlobRecord) -> tuple[str, Any]:
        """(kind, redacted content) of a blob."""
        ref = self.h("blob", b.id)
        c = b.content
        if b.kind == "message" and isinstance(c, dict):
            out: dict[str, Any] = {
                "role": str(c.get("role", "")),
                "chars": _text_len(c.get("content")),
                "ref": ref,
            }
            if c.get("tool_call_id") is not None:
                out["tool_call_id"] = str(c["tool_call_id"])
            calls = c.get("tool_calls") or []
            if calls:
                out["tool_calls"] = len(calls)
                out["tool_call_chars"] = sum(
                    _json_len((tc.get("function") or {}).get("arguments", "")) for tc in calls
                )
            return "message", out
        if b.kind == "tools" and isinstance(c, list):
            tools = []
            for t in c:
                name = str(((t.get("function") or {}) if isinstance(t, dict) else {}).get("name"))
                tools.append({"name": self.tool_name(name), "chars": _json_len(t)})
            return "tools", tools
        return "text", {"chars": _json_len(c), "ref": ref}

    def _blob_id(self, bid: str, where: str) -> str:
        try:
            return self.blob_ids[bid]
        except KeyError:
            raise TraceFormatError(
                f"{self.path}: {where}: blob {bid} is not written before its first use"
            ) from None

    def _opt_blob_id(self, bid: str | None, where: str) -> str | None:
        return None if bid is None else self._blob_id(bid, where)

    def call(self, c: LLMCallRecord) -> LLMCallRecord:
        r = c.request
        where = f"llm_call {c.id}"
        choice = r.tool_choice if r.tool_choice in _TOOL_CHOICES else None
        prefix = c.prefix and PrefixInfo(
            base=c.prefix.base,
            base_blocks=c.prefix.base_blocks,
            blocks=[self.h("block", b) for b in c.prefix.blocks],
        )
        resp = c.response
        return LLMCallRecord(
            id=c.id,
            session_id=c.session_id,
            agent_id=c.agent_id,
            seq=c.seq,
            request=RequestParams(
                model=r.model,
                max_tokens=r.max_tokens,
                temperature=r.temperature,
                top_p=r.top_p,
                seed=r.seed,
                tools=self._opt_blob_id(r.tools, f"{where}: request.tools"),
                tool_choice=choice,
                stream=r.stream,
            ),
            messages=[self._blob_id(b, f"{where}: messages.{i}") for i, b in enumerate(c.messages)],
            response=ResponseRecord(
                content=self._opt_blob_id(resp.content, f"{where}: response.content"),
                text_len=resp.text_len,
                tool_calls=[
                    ToolCallRef(
                        id=t.id,
                        name=self.tool_name(t.name),
                        arguments="",
                        arguments_chars=len(t.arguments),  # type: ignore[call-arg]
                    )
                    for t in resp.tool_calls
                ],
                finish_reason=resp.finish_reason,
            ),
            usage=Usage.model_validate(c.usage.model_dump(include=set(Usage.model_fields))),
            timings=Timings.model_validate(c.timings.model_dump(include=set(Timings.model_fields))),
            depends_on=list(c.depends_on),
            prefix=prefix,
            error=_REDACTED if c.error is not None else None,
            turn=c.turn,
            wait_ns=c.wait_ns,
        )

    def tool_call(self, t: ToolCallRecord) -> ToolCallRecord:
        return ToolCallRecord(
            id=t.id,
            session_id=t.session_id,
            agent_id=t.agent_id,
            llm_call_id=t.llm_call_id,
            name=self.tool_name(t.name),
            arguments={},
            arguments_chars=_json_len(t.arguments),  # type: ignore[call-arg]
            start_ns=t.start_ns,
            end_ns=t.end_ns,
            exit_code=t.exit_code,
            timed_out=t.timed_out,
            output_bytes=t.output_bytes,
            output_tokens=t.output_tokens,
            truncated=t.truncated,
            error=_REDACTED if t.error is not None else None,
            child_agent_id=t.child_agent_id,
        )

    @staticmethod
    def session(s: SessionRecord) -> SessionRecord:
        return SessionRecord(
            id=s.id,
            start_ns=s.start_ns,
            end_ns=s.end_ns,
            end_reason=s.end_reason,
            sandbox=s.sandbox,
            eval_passed=s.eval_passed,
            meta=_numbers(s.meta),
        )

    @staticmethod
    def agent(a: AgentRecord) -> AgentRecord:
        return AgentRecord.model_validate(a.model_dump(include=set(AgentRecord.model_fields)))

    @staticmethod
    def event(e: EventRecord) -> EventRecord:
        return EventRecord(
            kind=e.kind,
            ns=e.ns,
            session_id=e.session_id,
            agent_id=e.agent_id,
            details=_numbers(e.details),
        )


async def _redact(trace: Path, out: Path, rd: Redactor) -> dict[str, int]:
    reader = read_trace(trace)
    records = iter(reader)
    header = next(records, None)
    if not isinstance(header, Header):
        raise TraceFormatError(f"{trace}: no header record (file cut before its first record?)")
    counts: dict[str, int] = {}
    w = TraceWriter(out, rd.header(header))
    await w.open()
    end_ns: int | None = None  # the source's own end, on its clock
    try:
        for rec in records:
            if isinstance(rec, BlobRecord):
                kind, content = rd.blob(rec)
                rd.blob_ids[rec.id] = await w.blob(kind, content, rec.tokens)
            elif isinstance(rec, LLMCallRecord):
                await w.write(rd.call(rec))
            elif isinstance(rec, ToolCallRecord):
                await w.write(rd.tool_call(rec))
            elif isinstance(rec, SessionRecord):
                await w.write(rd.session(rec))
            elif isinstance(rec, AgentRecord):
                await w.write(rd.agent(rec))
            elif isinstance(rec, EventRecord):
                if rec.kind == EventKind.TRACE_END:
                    end_ns = rec.ns
                    continue  # the writer ends the file with its own, at the same time
                await w.write(rd.event(rec))
            counts[rec.type] = counts.get(rec.type, 0) + 1
    finally:
        await w.close(end_ns=end_ns)
    if reader.truncated is not None:
        counts["truncated"] = reader.truncated.records
    return counts


def redact_trace(
    trace: Path, out: Path, salt: bytes, *, hash_tool_names: bool = False, force: bool = False
) -> str:
    """Write ``trace`` redacted to ``out``; returns the summary line."""
    if not trace.is_file():
        raise ConfigError(f"{trace}: no such trace file")
    if not salt:
        raise ConfigError("the salt is empty")
    rd = Redactor(salt, hash_tool_names=hash_tool_names, path=str(trace))
    with atomic_output(out, [trace], force=force) as tmp:
        counts = asyncio.run(_redact(trace, tmp, rd))
    n = counts.get
    line = (
        f"{out}: redacted {n('llm_call', 0)} calls, {n('tool_call', 0)} tool calls, "
        f"{n('agent', 0)} agent records, {n('blob', 0)} blobs of {trace} (message text, tool "
        f"arguments and free text dropped; block ids salted, the salt not written)"
    )
    if "truncated" in counts:
        line += f"; the input is truncated after record {counts['truncated']}"
    return line
