"""The files of a content-free import: its JSONL source read, and the agentload trace it
becomes written (see ``agentload.trace.schema``: content-free traces).

* ``need_file``, ``json_lines`` (a JSONL file, plain or ``.gz``, streamed one object at a time)
  and ``count_lines`` read the source, with the one-line ``TraceFormatError`` of
  ``content_free``.
* ``ContentFreeCall``, ``prefix_of``, ``ns``: an ``llm_call`` of a content-free trace as the
  dict the writer serializes (records are plain dicts: a million-line import must not build and
  dump a pydantic model per record; ``load_trace`` validates them when the trace is read).
* ``import_header``, ``write_trace``, ``summary``: the trace's header; the records drained into
  a ``TraceWriter``, showing the ``Progress`` line on stderr when it is a terminal and removing
  the partial output when the source turns out bad; the one summary line of the import.
"""

from __future__ import annotations

import asyncio
import gzip
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agentload.errors import ConfigError, TraceFormatError
from agentload.infile import why_unreadable
from agentload.interop.content_free import Deviations, Progress, show
from agentload.outfile import atomic_output
from agentload.trace import make_header
from agentload.trace.schema import Header, SourceInfo
from agentload.trace.writer import TraceWriter, replace_header

__all__ = [
    "ContentFreeCall",
    "count_lines",
    "import_header",
    "json_lines",
    "need_file",
    "ns",
    "prefix_of",
    "summary",
    "write_trace",
]

_YIELD_EVERY = 2048  # records between two turns of the writer task (bounded queue)
_FLUSH_EVERY = 1 << 16  # records between two waits for the writer (bounded memory)


def need_file(path: Path) -> Path:
    """``path`` when it is a readable file, else a one-line error."""
    if path.is_dir():
        raise ConfigError(f"{path}: is a directory (give the JSONL file)")
    if not path.is_file():
        raise ConfigError(f"{path}: {why_unreadable(path)}")
    return path


def _open(path: Path) -> Any:
    """``path`` opened for reading bytes (through gzip when it ends in ``.gz``)."""
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each non-blank line, read one line at a time."""
    lineno = 0
    try:
        with _open(path) as f:
            for lineno, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    obj = orjson.loads(raw)
                except orjson.JSONDecodeError as exc:
                    cut = "" if raw.endswith(b"\n") else " (the file ends inside it: cut short?)"
                    raise TraceFormatError(
                        f"{path}:line {lineno}: invalid JSON{cut}: {exc}"
                    ) from None
                if not isinstance(obj, dict):
                    raise TraceFormatError(
                        f"{path}:line {lineno}: expected a JSON object, got {show(obj)}"
                    )
                yield lineno, obj
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(f"{path}:line {lineno + 1}: cannot read: {exc}") from None


def count_lines(path: Path) -> int:
    """Non-blank lines of a JSONL file, counted in chunks (for the header and the progress)."""
    n = 0
    try:
        with _open(path) as f:
            for raw in f:
                if raw.strip():
                    n += 1
    except (OSError, EOFError, zlib.error) as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc}") from None
    return n


def ns(seconds: float) -> int:
    """Seconds as integer nanoseconds."""
    return round(seconds * 1e9)


def prefix_of(prev: tuple[str, list[str]] | None, blocks: list[str]) -> dict[str, Any]:
    """The ``llm_call.prefix`` of ``blocks``, stored against the agent's previous call
    ``prev = (call id, its blocks)``: the leading blocks they share are named, not repeated."""
    if prev is None:
        return {"blocks": blocks}
    base_id, base = prev
    n = 0
    for a, b in zip(base, blocks, strict=False):
        if a != b:
            break
        n += 1
    if n == 0:
        return {"blocks": blocks}
    return {"base": base_id, "base_blocks": n, "blocks": blocks[n:]}


class ContentFreeCall(NamedTuple):
    """One content-free ``llm_call`` (the shared contract: no messages, lengths in usage and
    ``max_tokens``, the prompt's block ids in ``prefix``): ``record()`` is the dict the writer
    serializes. (A tuple, cheap to build: an import builds one per call.)"""

    call_id: str
    session_id: str
    agent_id: str
    seq: int
    model: str
    n_in: int
    n_out: int
    submit_ns: int
    prefix: dict[str, Any]
    stream: bool = True
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    depends_on: list[str] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    finish_reason: str | None = None
    turn: str | None = None

    def record(self) -> dict[str, Any]:
        """The ``llm_call`` record, as the dict the writer serializes."""
        timings: dict[str, Any] = {"submit_ns": self.submit_ns, "chunk_offsets_ns": []}
        if self.first_token_ns is not None:
            timings["first_token_ns"] = self.first_token_ns
        if self.last_token_ns is not None:
            timings["last_token_ns"] = self.last_token_ns
        response: dict[str, Any] = {"text_len": 0, "tool_calls": self.tool_calls or []}
        if self.finish_reason is not None:
            response["finish_reason"] = self.finish_reason
        n_in, n_out = self.n_in, self.n_out
        rec: dict[str, Any] = {
            "type": "llm_call",
            "id": self.call_id,
            "session_id": self.session_id,
            "agent_id": self.agent_id,
            "seq": self.seq,
            "request": {
                "model": self.model,
                "max_tokens": n_out,
                "stream": self.stream,
                "extra": {},
            },
            "messages": [],
            "response": response,
            "usage": {
                "prompt_tokens": n_in,
                "completion_tokens": n_out,
                "prompt_tokens_ours": n_in,
                "completion_tokens_ours": n_out,
            },
            "timings": timings,
            "depends_on": self.depends_on or [],
            "prefix": self.prefix,
        }
        if self.turn is not None:
            rec["turn"] = self.turn
        return rec


async def _drain(
    tmp: Path, header: Header, records: Iterable[dict[str, Any]], p: Progress
) -> tuple[Counter[str], int]:
    """Write ``header`` and ``records`` to ``tmp``; returns the count per type and the header's
    size."""
    counts: Counter[str] = Counter()
    writer = TraceWriter(tmp, header)
    await writer.open()
    try:
        for n, rec in enumerate(records, 1):
            writer.write_nowait(rec)
            counts[rec["type"]] += 1
            if n % _YIELD_EVERY == 0:
                if n % _FLUSH_EVERY == 0:
                    await writer.flush()
                else:
                    await asyncio.sleep(0)
                p.show()
    finally:
        await writer.close()
    p.show(final=True)
    return counts, writer.header_bytes


def write_trace(
    out: Path,
    header: Header,
    records: Iterable[dict[str, Any]],
    progress: Progress,
    deviations: Deviations | None = None,
) -> Counter[str]:
    """Write ``header`` and every record to ``out``; returns the count per record type. The
    trace is written beside ``out`` and renamed into place only when whole: a source error
    raised while ``records`` is read leaves ``out`` as it was (``import_trace`` refused an
    ``out`` that is an input, or that exists unasked, before anything was read). The
    ``deviations`` counted while the records were read go into the header's
    ``source.deviations`` (its first frame is rewritten once the rest is written)."""
    src = header.source
    if deviations is not None and src is not None:
        src.deviations = deviations.as_dict()
    with atomic_output(out, force=True, option="-o") as tmp:
        counts, header_bytes = asyncio.run(_drain(tmp, header, records, progress))
        if deviations is not None and src is not None and src.deviations != deviations.as_dict():
            src.deviations = deviations.as_dict()
            replace_header(tmp, header_bytes, header)
        return counts


def import_header(
    fmt: str,
    paths: list[Path],
    block_size: int,
    scope: str,
    records: int,
    model: str | None = None,
) -> Header:
    """The header of a trace imported from ``paths`` of format ``fmt``: content-free
    (``redacted``), its ``source`` naming the format, files, block size, scope and records."""
    return make_header(
        block_size=block_size,
        model=model,
        redacted=True,
        source=SourceInfo(
            format=fmt,
            files=[str(p) for p in paths],
            block_size=block_size,
            hash_id_scope=scope,
            records=records,
        ),
    )


def summary(out: Path, counts: Counter[str], header: Header) -> str:
    """``wrote OUT: 12 sessions, 40 agents, 1,234 calls from 12 weka files (block size 64)``."""
    src = header.source
    assert src is not None  # an imported trace's header (import_header)
    files = f"{len(src.files)} {src.format} {'file' if len(src.files) == 1 else 'files'}"
    return (
        f"wrote {out}: {counts['session']:,} sessions, {counts['agent']:,} agents, "
        f"{counts['llm_call']:,} calls from {files} (block size {src.block_size})"
    )
