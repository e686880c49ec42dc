"""The trace writer: one writer task fed by a queue, complete zstd frames at least every second.

    async with TraceWriter(path, header) as w:
        await w.write(record)          # any number of concurrent agents may call this
        blob_id = await w.blob("message", message)   # written once per file
        await w.flush()                # e.g. at every session end
        w.write_encoded(line, blob_id)  # a line another writer encoded (generate --ray's merge)

Every flush appends one complete zstd frame (for ``*.zst`` paths; plain JSON lines otherwise)
and fsyncs on close, so a process killed at any moment leaves a file whose complete records
are all readable. ``close`` ends the file with an ``event`` of kind ``trace_end``: a file
without it was not closed by its writer (a killed run), which the reader reports as truncated
even when the cut fell exactly between two frames. Blob content is scrubbed of secrets before
its id is computed; every other serialized record passes through the byte scrubber.

``tee`` (a callable) is handed every line as it is queued, with its blob id for a blob line:
``generate --ray``'s workers relay their records to the driver with it, whose writer takes them
with ``write_encoded`` (a blob it holds already is dropped, so each blob is still written once).

The header is the file's first frame on its own: ``replace_header`` swaps it for another once
the file is closed (an import knows what it derived and what it met only at the end).

A write that fails (a full disk: ENOSPC, EDQUOT, EFBIG) never leaves half a frame: the file is
cut back to its last whole frame. By default the error is raised (``flush``, ``close``, or the
next ``write``'s ``flush``). With ``on_disk`` (the recorder) the writer holds on instead: the
lines that could not be written stay in memory (up to ``max_held`` bytes; past it the newest are
dropped and counted in ``lost``), are tried again every ``flush_interval_s`` and at ``close``,
and ``on_disk`` is told each change (the error, then None once a write went through again). A
file that could not be opened, or whose header could not be written, is removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

import orjson
import zstandard
from pydantic import BaseModel

from agentload.hashing import content_id
from agentload.masking import scrub_bytes, scrub_json
from agentload.trace.events import TraceEnd
from agentload.trace.schema import BlobRecord, EventRecord, Header

__all__ = ["TraceWriter", "encode_record", "replace_header"]

_MAX_REMEMBERED = 1 << 17
"""Content ids a writer remembers (written blobs, scrubbed contents): ~25 MB at most, however
long the run; the shared ones (system prompts, tool lists) stay, being met again and again."""
_UNKNOWN: Any = object()

_STOP = object()
_MAX_FRAME = 8 << 20  # a burst of records is cut into frames of at most ~8 MiB (bounded memory)
MAX_HELD = 64 << 20
"""With ``on_disk``: the bytes of lines a writer keeps in memory while the disk refuses them."""


def encode_record(record: BaseModel | dict[str, Any], *, scrub: bool = True) -> bytes:
    """One JSON line (with newline), secrets scrubbed (``scrub=False``: the caller scrubbed
    the content already, as ``TraceWriter.blob`` does)."""
    if isinstance(record, BaseModel):
        data = record.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        data = record
    line = orjson.dumps(data)
    return (scrub_bytes(line) if scrub else line) + b"\n"


class _ContentMemory:
    """What a writer remembers of the contents it met, the most recent ``_MAX_REMEMBERED`` of
    each: the blob ids it wrote (a blob met again after it was forgotten is written again: the
    same id and content, which readers take as one), and each content's scrubbed form."""

    def __init__(self) -> None:
        self.blobs: OrderedDict[str, None] = OrderedDict()
        self._scrubbed: OrderedDict[str, tuple[Any, str] | None] = OrderedDict()
        """Content id -> None (clean) or its scrubbed form and id."""

    def seen(self, blob_id: str) -> bool:
        """Whether the blob was written (recently); if not, it is about to be."""
        if blob_id in self.blobs:
            self.blobs.move_to_end(blob_id)
            return True
        self.blobs[blob_id] = None
        if len(self.blobs) > _MAX_REMEMBERED:
            self.blobs.popitem(last=False)
        return False

    def scrubbed(self, value: Any) -> tuple[Any, str]:
        """``value`` with its secrets scrubbed, and its content id (``TraceWriter.scrubbed``)."""
        vid = content_id(value)
        known = self._scrubbed.get(vid, _UNKNOWN)
        if known is _UNKNOWN:
            clean = scrub_json(value)
            if clean is value:
                known = self._scrubbed[vid] = None
            else:
                cid = content_id(clean)
                known = self._scrubbed[vid] = (clean, cid)
                self._scrubbed[cid] = None  # the scrubbed content is clean
            while len(self._scrubbed) > _MAX_REMEMBERED:
                self._scrubbed.popitem(last=False)
        else:
            self._scrubbed.move_to_end(vid)
        return known or (value, vid)


class TraceWriter:
    """Async, concurrency-safe writer of one trace file (see the module docstring)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        header: Header,
        *,
        flush_interval_s: float = 1.0,
        level: int = 3,
        tee: Callable[[bytes, str | None], None] | None = None,
        on_disk: Callable[[OSError | None], None] | None = None,
        sync: bool = False,
        max_held: int = MAX_HELD,
    ) -> None:
        """``on_disk``: hold lines a failed write could not write, and say so (see the module
        docstring); ``sync``: fsync after every frame (a disk that refuses a write only at
        fsync is then seen at once)."""
        self.path = Path(path)
        self.header = header
        self.compressed = self.path.name.endswith(".zst")
        self._interval = flush_interval_s
        self._cctx = zstandard.ZstdCompressor(level=level, write_checksum=True)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._buf: list[bytes] = []
        self._buf_bytes = 0
        self._task: asyncio.Task[None] | None = None
        self._fd: int | None = None
        self._on_disk = on_disk
        self._sync = sync
        self._max_held = max_held
        self._held: list[bytes] = []
        """Lines whose write failed (with ``on_disk``), oldest first."""
        self.write_error: OSError | None = None
        """Why the last write failed, while the disk refuses them (with ``on_disk``)."""
        self.lost = 0
        """Lines never written: dropped past ``max_held``, or still refused at ``close``."""
        self.delayed = 0
        """Lines written late: held while the disk refused them, then written."""
        self._contents = _ContentMemory()
        self.records_written = 0
        self.bytes_written = 0
        self.header_bytes = 0
        self._tee = tee

    async def __aenter__(self) -> TraceWriter:
        await self.open()
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def open(self) -> None:
        """Create the file and write its header; a failure leaves no file behind."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
        self._fd = os.open(self.path, flags, 0o666)
        try:
            self._buf.append(encode_record(self.header))
            self.records_written += 1
            data = self._encode(self._buf)
            self._buf.clear()
            await asyncio.to_thread(self._write_all, data)
        except BaseException:
            os.close(self._fd)
            self._fd = None
            with contextlib.suppress(OSError):
                self.path.unlink()
            raise
        self.bytes_written += len(data)
        self.header_bytes = self.bytes_written
        """The size of the header's frame (``replace_header``)."""
        self._task = asyncio.create_task(self._run(), name=f"trace-writer:{self.path.name}")

    async def write(self, record: BaseModel | dict[str, Any]) -> None:
        """Queue a record; it reaches the file within ``flush_interval_s``.

        The record is serialized now: later changes to it (or to the dicts it holds) do not
        reach the file, and a record that cannot be serialized fails here, in the caller.
        """
        self.write_nowait(record)

    def write_nowait(self, record: BaseModel | dict[str, Any]) -> None:
        """Same as ``write`` for synchronous callers on the writer's event loop."""
        self._enqueue(encode_record(record))

    def write_encoded(self, line: bytes, blob_id: str | None = None) -> None:
        """Queue a line another ``TraceWriter`` encoded and scrubbed (see ``tee``), as is; a
        blob line (``blob_id``) whose blob this file holds already is dropped."""
        if blob_id is not None and self._contents.seen(blob_id):
            return
        self._enqueue(line, blob_id)

    def _enqueue(self, line: bytes, blob_id: str | None = None) -> None:
        self._check_open()
        self._queue.put_nowait(line)
        self.records_written += 1
        if self._tee is not None:
            self._tee(line, blob_id)

    def scrubbed(self, value: Any) -> tuple[Any, str]:
        """``value`` as this file records it (secrets scrubbed) and its content id: the id a
        blob of it gets. Each distinct content is scanned once per file."""
        return self._contents.scrubbed(value)

    async def blob(self, kind: str, content: Any, tokens: int | None = None) -> str:
        """Intern content; the blob record is written once per file, before first use. Content
        is scrubbed of secrets first (``scrubbed``), so the id returned is the hash of what the
        file holds."""
        content, bid = self.scrubbed(content)
        if not self._contents.seen(bid):
            rec = BlobRecord(id=bid, kind=kind, content=content, tokens=tokens)  # type: ignore[arg-type]
            self._enqueue(encode_record(rec, scrub=False), bid)  # scrubbed above, before hashing
        return bid

    def has_blob(self, blob_id: str) -> bool:
        return blob_id in self._contents.blobs

    async def flush(self) -> None:
        """Write everything queued so far as one complete frame, now."""
        self._check_open()
        assert self._task is not None
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(done)
        await asyncio.wait([done, self._task], return_when=asyncio.FIRST_COMPLETED)
        if not done.done():  # the writer task died (e.g. the disk is full): say why
            done.cancel()
            self._task.result()

    async def close(self, end_ns: int | None = None) -> None:
        """Drain the queue, write the last frame, fsync, close. Safe to call twice.
        ``end_ns``: the ``trace_end`` event's time, when the trace's times are not this
        process's clock (an import); default now."""
        if self._task is None:
            return
        self._queue.put_nowait(_STOP)
        task, self._task = self._task, None
        with contextlib.suppress(asyncio.CancelledError):
            await task
        while not self._queue.empty():  # left over if the writer task was cancelled
            item = self._queue.get_nowait()
            if isinstance(item, bytes):
                self._buf.append(item)
            elif isinstance(item, asyncio.Future) and not item.done():
                item.set_result(None)
        self.records_written += 1
        end = EventRecord.of(
            TraceEnd(records=self.records_written),
            time.perf_counter_ns() if end_ns is None else end_ns,
        )
        self._buf.append(encode_record(end))
        fd, self._fd = self._fd, None
        assert fd is not None
        try:
            await self._write_frame(fd)
            self.lost += len(self._held)  # still refused: the file ends at its last whole frame
            self._held.clear()
            if not self._sync:  # (with ``sync``, every frame written was fsynced)
                await asyncio.to_thread(os.fsync, fd)
        finally:
            os.close(fd)

    def _check_open(self) -> None:
        if self._task is None:
            raise RuntimeError("TraceWriter is not open")

    async def _run(self) -> None:
        # A frame is due ``_interval`` (less a margin for the write itself) after the first
        # record that went into an empty buffer: no record waits longer than the interval.
        loop = asyncio.get_running_loop()
        budget = self._interval * 0.85
        deadline: float | None = None
        while True:
            try:
                item = self._queue.get_nowait()
            except asyncio.QueueEmpty:
                timeout = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    item = await asyncio.wait_for(self._queue.get(), timeout)
                except TimeoutError:
                    item = None
            if item is _STOP:
                return
            if isinstance(item, asyncio.Future):
                await self._write_frame()
                deadline = loop.time() + self._interval if self._held else None
                if not item.done():
                    item.set_result(None)
                continue
            if item is not None:
                if deadline is None:
                    deadline = loop.time() + budget
                self._buf.append(item)
                self._buf_bytes += len(item)
            if deadline is not None and (loop.time() >= deadline or self._buf_bytes >= _MAX_FRAME):
                await self._write_frame()
                deadline = loop.time() + self._interval if self._held else None  # try again

    def _encode(self, lines: list[bytes]) -> bytes:
        data = b"".join(lines)
        return self._cctx.compress(data) if self.compressed else data

    async def _write_frame(self, fd: int | None = None) -> None:
        """Write the held lines and the buffer as one frame (see the module docstring for a
        write that fails)."""
        if not self._buf and not self._held:
            return
        lines = self._held + self._buf if self._held else list(self._buf)
        self._buf.clear()
        self._buf_bytes = 0
        data = (
            self._encode(lines) if len(lines) < 64 else await asyncio.to_thread(self._encode, lines)
        )
        try:
            await asyncio.to_thread(self._write_all, data, fd)
        except OSError as exc:
            if self._on_disk is None:
                raise
            self._hold(lines, exc)
            return
        self.bytes_written += len(data)
        if self._held:
            self.delayed += len(self._held)
            self._held = []
        if self.write_error is not None and self._on_disk is not None:
            self.write_error = None
            self._on_disk(None)

    def _hold(self, lines: list[bytes], exc: OSError) -> None:
        """Keep the lines a write refused (the newest dropped past ``max_held``)."""
        assert self._on_disk is not None
        size = 0
        for n, line in enumerate(lines):
            size += len(line)
            if size > self._max_held:
                self.lost += len(lines) - n
                lines = lines[:n]
                break
        self._held = lines
        if self.write_error is None:
            self._on_disk(exc)
        self.write_error = exc

    def _write_all(self, data: bytes, fd: int | None = None) -> None:
        """Write ``data`` at the end of the file (fsynced with ``sync``); if any of it fails,
        the file is cut back to what it was (never half a frame) and the error raised."""
        fd = self._fd if fd is None else fd
        assert fd is not None
        start = self.bytes_written
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(fd, view) :]
            if self._sync:
                os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
                os.lseek(fd, start, os.SEEK_SET)
            raise


def replace_header(path: Path, header_bytes: int, header: Header, level: int = 3) -> None:
    """Replace the first ``header_bytes`` of the closed trace ``path`` (its header's frame,
    ``TraceWriter.header_bytes``) by ``header``'s, copying the rest as it is (beside, then
    renamed into place)."""
    line = encode_record(header)
    if path.name.endswith(".zst"):
        line = zstandard.ZstdCompressor(level=level, write_checksum=True).compress(line)
    tmp = path.with_name(path.name + ".header")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        src.seek(header_bytes)
        dst.write(line)
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, path)
