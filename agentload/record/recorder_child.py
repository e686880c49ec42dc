"""The recorder process's own end (``python -m agentload.record.recorder_child``; the proxy's
end, the frames and the status lines are in ``recorder_process``): it reads the frames from its
stdin, reads each call's answer (``read_answer``) and writes the trace through a
``transcribe.Recorder``, at a lower CPU priority (``recorder_process.NICE``)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pickle
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from agentload.errors import WireError
from agentload.errortext import clip
from agentload.masking import remember
from agentload.record.decoding import Decoder
from agentload.record.recorder_process import NICE, RecordStats
from agentload.record.sink import CLIENT_LEFT, describe
from agentload.trace.events import RecordError
from agentload.wire import Api, WireReply, reply_from_json, stream_reader

if TYPE_CHECKING:
    from agentload.record.transcribe import Pending, Recorder

__all__ = ["main", "read_answer"]


def read_answer(
    api: Api, streamed_call: bool, fields: tuple[Any, ...], submit_ns: int
) -> tuple[WireReply, int | None, list[int], int, str | None]:
    """An ``Answer``'s fields → (the reply, first token ns, chunk offsets, end ns, error)."""
    status, ctype, coding, pieces, end_ns, error = fields
    coding = (coding or "identity").strip().lower()
    reply = WireReply()
    first: int | None = None
    offsets: list[int] = []
    parse_error: str | None = None
    payload: list[tuple[int, bytes]] = pieces
    try:
        decoder = Decoder(coding)
        if not decoder.identity:
            payload = [(t, decoder.feed(p)) for t, p in pieces]
    except WireError as exc:
        parse_error = f"answer {exc}"
    if status is None:
        pass
    elif parse_error is not None:
        reply = WireReply(error=parse_error)
    elif "text/event-stream" in ctype and status < 400:
        reader = stream_reader(api)
        try:
            for t, p in payload:
                if reader.feed(p):
                    first = first or t
                    offsets.append(t - submit_ns)
        except Exception as exc:  # a stream we cannot read was still forwarded
            parse_error = f"answer stream not readable: {exc}"
        reply = reader.reply()
        if error == CLIENT_LEFT and reader.done:
            error = None  # it had the whole answer and closed before the framing's last bytes
        if parse_error and not reply.error:
            reply.error = parse_error
        elif not reader.done and not reply.error and error is None:
            reply.error = "upstream ended the stream before its last event"
    else:
        raw = b"".join(p for _, p in payload)
        reply = _body_reply(api, status, raw)
    if not streamed_call:
        first = end_ns if not error else None
    return reply, first, offsets, end_ns, error


def _body_reply(api: Api, status: int, raw: bytes) -> WireReply:
    try:
        obj = orjson.loads(raw) if raw else None
    except orjson.JSONDecodeError:
        obj = None
    if status >= 400:
        text = raw.decode("utf-8", "replace")
        if isinstance(obj, dict) and obj.get("error") is not None:
            err = obj["error"]
            text = str(err.get("message", err)) if isinstance(err, dict) else str(err)
        return WireReply(error=f"HTTP {status}: {clip(text)}")
    try:
        return reply_from_json(api, obj)
    except Exception as exc:
        return WireReply(error=f"answer not readable: {exc}")


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    size = int.from_bytes(await reader.readexactly(4), "big")
    return pickle.loads(await reader.readexactly(size))


def _say(line: str) -> None:
    """A status line to the proxy; nothing if the proxy is gone (its frames are still read)."""
    try:
        sys.stdout.buffer.write(line.encode() + b"\n")
        sys.stdout.buffer.flush()
    except OSError:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115  (and no error at exit's flush)


def _why(exc: OSError | None) -> str | None:
    return None if exc is None else (exc.strerror or describe(exc))


def _say_disk(exc: OSError | None) -> None:
    """The trace's writes fail (``exc``), or go through again (None)."""
    _say(f"disk {_why(exc) or ''}".rstrip())


async def _end_call(rec: Recorder, p: Pending, fields: tuple[Any, ...]) -> None:
    """Read a call's answer (an ``e`` frame's ``Answer`` fields) and write the call; a failure
    is noted in the trace, never raised (the agent already has its answer)."""
    from agentload.trace.schema import Timings

    try:
        streamed = bool(p.chat.get("stream"))
        reply, first, offsets, end, error = read_answer(p.api, streamed, fields, p.submit_ns)
        timings = Timings(
            submit_ns=p.submit_ns, first_token_ns=first, last_token_ns=end, chunk_offsets_ns=offsets
        )
        await rec.end(p, reply, timings, error)
    except Exception as exc:  # the agent already has its answer; note the loss
        rec.note(RecordError(where="end", error=describe(exc)), time.perf_counter_ns())


async def _take_frames(reader: asyncio.StreamReader, rec: Recorder) -> None:
    """Each frame the proxy sends, in order, until it closes its end (or dies): a call begun
    (its body follows the frame), an event, a session's outcome, a call's answer."""
    pending: dict[int, Pending | None] = {}
    sessions = 0
    while True:
        try:
            msg = await _read_frame(reader)
        except asyncio.IncompleteReadError:
            return  # the proxy closed its end (or died)
        if msg[0] == "b":
            _, cid, api, size, headers, now, creds, path = msg
            body = await reader.readexactly(size)
            remember(*creds)
            try:
                pending[cid] = rec.begin(api, body, headers, now, path)
            except Exception as exc:  # recording never gets in the agent's way
                pending[cid] = None
                rec.note(RecordError(where="begin", error=describe(exc)), now)
            if len(rec.threads.sessions) != sessions:
                sessions = len(rec.threads.sessions)
                _say(f"sessions {sessions}")
        elif msg[0] == "n":
            rec.note(msg[1], msg[2])
        elif msg[0] == "s":
            rec.outcome(msg[1])
        elif msg[0] == "e":
            p = pending.pop(msg[1], None)
            if p is not None:
                await _end_call(rec, p, msg[2:])


async def _serve() -> int:
    from agentload.record.transcribe import Recorder
    from agentload.trace.schema import Header
    from agentload.trace.writer import TraceWriter

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    try:
        cfg = await _read_frame(reader)
        remember(*cfg["secrets"])
        writer = TraceWriter(
            Path(cfg["path"]), Header.model_validate(cfg["header"]), on_disk=_say_disk, sync=True
        )
        await writer.open()
    except Exception as exc:
        _say(f"error {describe(exc)}")
        return 2
    rec = Recorder(writer, session_header=cfg["session_header"], agent_header=cfg["agent_header"])
    if cfg.get("report"):
        rec.on_recorded = lambda r: _say("recorded " + orjson.dumps(dataclasses.asdict(r)).decode())
    _say("ready")
    try:
        await _take_frames(reader, rec)
    finally:
        rec.close()
        await writer.close()
    stats = RecordStats(
        rec.calls,
        len(rec.threads.sessions),
        rec.errors,
        rec.unread,
        rec.unread_first,
        rec.websockets,
        rec.embeddings,
        writer.delayed,
        writer.lost,
        _why(writer.write_error),
    )
    _say("done " + orjson.dumps(stats.__dict__).decode())
    return 0


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(NICE)
    return asyncio.run(_serve())


if __name__ == "__main__":
    sys.exit(main())
