"""Reading an answer into an ``Outcome``: its status, every content event's time, its usage.

A chat answer is read as Server-Sent Events with a fast path for compact mid-stream deltas; a
Responses or Messages answer by ``agentload.wire``'s reader for that API. A *content event* is
a chunk whose delta has non-empty ``content``, ``reasoning_content`` or ``tool_calls`` (of a
native stream: an event that carries output: text, a tool name or arguments); each gets the
time of the network read that brought it: a ``clock()`` reading, or the kernel's receive time
of that read when the connection has one (``netback``) and it lies between the send and the
reading. A usage report whose counts are not token counts fails the request as
``invalid_usage``; a stream that ends early is ``truncated``. Dynamo's answer extension
(``nvext``: the workers that served the request, the server's own timing) is read from the
events parsed whole: the first content event and the finish event. Asked for the answer itself (an
agent's call), any API's stream is read whole by ``wire``'s reader for it, the one reassembler
of streamed text and tool calls, and every event's time is kept too.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

import orjson

from agentload.client.failures import answer_failure, reported_failure
from agentload.client.netback import SocketStream
from agentload.client.outcome import Outcome
from agentload.client.textrun import Template
from agentload.errors import WireError
from agentload.errortext import clip
from agentload.measure.errorkinds import ErrorKind
from agentload.trace.schema import MAX_CALL_TOKENS
from agentload.wire import WireReply, stream_reader

__all__ = ["MAX_ERROR_BODY", "Answer", "ChunkHook", "read_answer"]

MAX_ERROR_BODY = 65536
"""How much of an error answer's body is kept (``Outcome.body``)."""

ChunkHook = Callable[[int], None]
"""Gets the count of content events read so far, after each one."""


class Answer(Protocol):
    """An answer's status and headers, its body still to read (``lean.LeanAnswer`` on plain
    HTTP, ``pool.HttpxAnswer`` over httpx)."""

    status_code: int
    network_stream: object
    """The connection it came on (``netback.SocketStream``: kernel receive times)."""

    def header(self, name: str) -> str | None: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    async def aread(self, limit: int | None = None) -> bytes: ...

    async def aclose(self) -> None: ...


async def read_answer(
    resp: Answer,
    out: Outcome,
    api: str,
    clock: Callable[[], int],
    reply: ChunkHook | bool = False,
) -> None:
    """Read the answer to a request in ``api`` into ``out``: a failure when it is not HTTP
    200, else its stream (with ``reply``: the answer itself too, a callable getting the count
    of content events so far after each)."""
    out.status = resp.status_code
    if resp.status_code != 200:
        body = (await resp.aread(MAX_ERROR_BODY))[:MAX_ERROR_BODY]
        out.body = body
        out.retry_after = resp.header("retry-after")
        out.error_kind = answer_failure(resp.status_code, body)
        out.error = clip(body[:2000].decode("utf-8", "replace"))
    elif api == "chat" and reply is False:
        await _read_chat(resp, out, clock)
    else:
        await _read_wire(resp, out, api, clock, reply)


def _stamped(resp: Answer) -> SocketStream | None:
    """The connection of ``resp`` when it has kernel receive times, else None."""
    rx = resp.network_stream
    return rx if type(rx) is SocketStream and rx.stamped else None


async def _read_chat(resp: Answer, out: Outcome, clock: Callable[[], int]) -> None:
    """A Chat Completions stream: one chunk time per content event. Until the first content
    event every event is parsed; after it, a block's leading run of text deltas shaped as the
    stream's plain deltas is counted by their bytes (``textrun.Template``), and the rest by
    ``_read_rest``."""
    chunks = out.chunk_ns
    append = chunks.append
    buf = b""
    done = False
    tpl: Template | None = None
    rx = _stamped(resp)
    send = out.send_ns
    async for raw in resp.aiter_raw():
        now = clock()
        if rx is not None and send < rx.rx_ns < now:
            now = rx.rx_ns
        buf += raw
        if b"\n" not in raw:
            continue
        cut = buf.rfind(b"\n") + 1
        block, buf = buf[:cut], buf[cut:]
        if not chunks:
            # the first content event is parsed whole; the block goes on after its line
            first, ended, line = _first_content_line(block, out)
            done = done or ended
            if first < 0:
                continue
            append(now)
            tpl = Template.learn(line)
            block = block[first:]
        if tpl is not None:
            n, end = tpl.run(block)
            if n:
                chunks.extend([now] * n)
                block = block[end:]
        if block:
            ended, learned = _read_rest(block, out, now)
            done = done or ended
            tpl = learned or tpl
    if chunks:
        out.first_ns = chunks[0]
    if out.error_kind is None and not done and out.finish_reason is None:
        out.error_kind, out.error = ErrorKind.TRUNCATED, "stream ended without [DONE]"


def _read_rest(block: bytes, out: Outcome, now: int) -> tuple[bool, Template | None]:
    """Whole lines of a stream past its first content event that its template did not take: a
    run of plain text deltas counted by byte patterns (``_plain_run``), any other event
    classified line by line; whether ``[DONE]`` was among them, and the template of the last
    content line taken line by line (the stream's shape may have changed: a new ``created``)."""
    chunks = out.chunk_ns
    plain, block = _plain_run(block)
    if plain:
        chunks.extend([now] * (plain.count(b'"content":"') - plain.count(b'"content":""')))
    done = False
    last = b""
    for line in block.split(b"\n"):
        got = _line(line, out, fast=True)
        if got == _DONE:
            done = True
        elif got:
            chunks.append(now)
            last = line
    return done, Template.learn(last) if last else None


_DONE = 2
"""``_line``'s answer for ``data: [DONE]``."""


def _line(line: bytes, out: Outcome, fast: bool) -> int:
    """One SSE line: 1 for a content event, ``_DONE`` for ``[DONE]``, else 0; an event is
    folded into ``out``. With ``fast`` a compact mid-stream delta (finish_reason null, no usage
    object, no error) is classified by its bytes alone; anything else (other spacing
    included) is parsed with orjson."""
    if not line.startswith(b"data:"):
        return 0
    payload = line[5:].strip()
    if payload == b"[DONE]":
        return _DONE
    if (
        fast
        and b'"finish_reason":null' in payload
        and b'"usage":{' not in payload
        and b'"error"' not in payload
    ):
        return int(
            (b'"content":"' in payload and b'"content":""' not in payload)
            or b'"tool_calls":[' in payload
            or b'"reasoning_content":"' in payload
        )
    try:
        ev: Any = orjson.loads(payload)
    except orjson.JSONDecodeError:
        out.error_kind, out.error = ErrorKind.STREAM_ERROR, "unparseable SSE event"
        return 0
    return int(_event(ev, out))


_NOT_PLAIN = (
    b'"finish_reason":"',
    b"[DONE]",
    b'"usage":{',
    b'"error"',
    b'"tool_calls":[',
    b'"reasoning_content":"',
    b'"index":1',
    b"\n:",
)
"""Byte patterns of events the block count must not take (see ``_text_deltas``)."""


def _plain_run(block: bytes) -> tuple[bytes, bytes]:
    """``block`` (whole lines) split into a leading run of plain text deltas (see
    ``_text_deltas``; empty when there is none) and the rest, read event by event."""
    end = len(block)
    for pat in _NOT_PLAIN:
        i = block.find(pat, 0, end)
        if i >= 0:
            end = i
    if end < len(block):
        end = block.rfind(b"\n", 0, end) + 1  # back to the start of that line
    head = block[:end]
    if head and _compact(head):
        return head, block[end:]
    return b"", block


def _compact(head: bytes) -> bool:
    """Whether every event of ``head`` (free of ``_NOT_PLAIN`` patterns) is a compact
    mid-stream delta: one ``"finish_reason":null`` per ``data:`` line, no leading comment."""
    return head.count(b"data:") == head.count(b'"finish_reason":null') and head[:1] != b":"


def _first_content_line(block: bytes, out: Outcome) -> tuple[int, bool, bytes]:
    """Parse ``block``'s events in turn until one carries content: the offset just after that
    event's line (-1 when none did), whether ``[DONE]`` was among them, and that line."""
    pos = 0
    done = False
    while (nl := block.find(b"\n", pos)) >= 0:
        line = block[pos:nl]
        got = _line(line, out, fast=False)
        pos = nl + 1
        if got == _DONE:
            done = True
        elif got:
            return pos, done, line
    return -1, done, b""


def _text_deltas(block: bytes) -> bool:
    """Whether every event of ``block`` (whole SSE lines) is a compact mid-stream text delta of
    one choice: ``finish_reason`` null, no usage, error, tool call, reasoning or comment. Such
    an event carries content exactly when it holds a non-empty ``"content":"``: inside a JSON
    string a quote is escaped, so these byte patterns are keys, never text."""
    return all(p not in block for p in _NOT_PLAIN) and _compact(block)


async def _read_wire(
    resp: Answer,
    out: Outcome,
    api: str,
    clock: Callable[[], int],
    reply: ChunkHook | bool = False,
) -> None:
    """A stream of any API read by ``agentload.wire``'s reader for it: one time per event
    that carries output (text, a tool name or arguments) in ``chunk_ns``; with ``reply``,
    the answer in ``out.reply`` and one time per event in ``event_ns`` too (a callable
    ``reply`` gets the count of content events after each). The stream is left at its first
    malformed event (``stream_error``)."""
    content = out.chunk_ns
    events: list[int] | None = [] if reply is not False else None
    on_chunk = reply if callable(reply) else None
    rx = _stamped(resp)
    send = out.send_ns
    reader = stream_reader(api)  # type: ignore[arg-type]
    async for raw in resp.aiter_raw():
        now = clock()
        if rx is not None and send < rx.rx_ns < now:
            now = rx.rx_ns
        seen = reader.events
        try:
            n = reader.feed(raw)
        except WireError as exc:
            out.error_kind, out.error = ErrorKind.STREAM_ERROR, str(exc)
            break
        if events is not None:
            events.extend([now] * (reader.events - seen))
        for _ in range(n):
            content.append(now)
            if on_chunk is not None:
                on_chunk(len(content))
    got = reader.reply()
    if events is not None:
        out.reply, out.event_ns = got, events
    _finish(out, got, ended=reader.done or (api == "chat" and got.finish_reason is not None))


def _finish(out: Outcome, reply: WireReply, ended: bool) -> None:
    """Fold a native or whole reply's usage, finish and error into ``out``; a stream that
    did not reach its end is ``truncated``."""
    _usage(reply.usage or {}, out)
    out.finish_reason = reply.finish_reason
    if reply.error and out.error_kind is None:
        out.error_kind = reported_failure(reply.error.encode())
        out.error = clip(reply.error)
    if out.chunk_ns:
        out.first_ns = out.chunk_ns[0]
    if out.error_kind is None and not ended:
        out.error_kind, out.error = ErrorKind.TRUNCATED, "stream ended before its last event"


def _count(usage: Any, key: str, out: Outcome) -> int | None:
    """``usage[key]``: a token count 0..``MAX_CALL_TOKENS`` (what a call of a trace may hold),
    or None when absent; anything
    else (negative, fractional, huge, not a number) fails the request as ``invalid_usage``,
    so the report is counted, never stored, and the run goes on."""
    v = usage.get(key) if isinstance(usage, dict) else None
    if v is None:
        return None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if type(v) is int and 0 <= v <= MAX_CALL_TOKENS:
        return v
    if out.error_kind is None:
        out.error_kind = ErrorKind.INVALID_USAGE
        out.error = f"usage.{key}: {clip(repr(v), 40)} is not a token count"
    return None


def _usage(usage: Any, out: Outcome) -> None:
    """Fold a usage report (Chat Completions' ``usage``, or a native reply's) into ``out``."""
    out.prompt_tokens = _count(usage, "prompt_tokens", out)
    out.completion_tokens = _count(usage, "completion_tokens", out)
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
    cached = _count(details, "cached_tokens", out)
    if cached is not None:
        out.cached_tokens = cached


def _event(ev: Any, out: Outcome) -> bool:
    """Fold one SSE event into ``out``; True when it carries content."""
    if not isinstance(ev, dict):
        return False
    err = ev.get("error")
    if err:
        text = orjson.dumps(err)
        out.error_kind = reported_failure(text)
        out.error = clip(text.decode())
        return False
    usage = ev.get("usage")
    if usage:
        _usage(usage, out)
    timings = ev.get("timings")
    if out.cached_tokens is None and isinstance(timings, dict):
        # llama.cpp's own account of the prompt tokens reused from its cache (older builds
        # report it only here, not in usage.prompt_tokens_details)
        n = timings.get("cache_n")
        if isinstance(n, int) and n >= 0:
            out.cached_tokens = n
    nvext = ev.get("nvext")
    if isinstance(nvext, dict):
        _served(nvext, out)
    choices = ev.get("choices")
    if not choices:
        return False
    ch = choices[0]
    fr = ch.get("finish_reason")
    if fr:
        out.finish_reason = fr
    delta = ch.get("delta")
    if not delta:
        return False
    return bool(delta.get("content") or delta.get("reasoning_content") or delta.get("tool_calls"))


_MAX_TIMING_FIELDS = 32
"""At most this many of a server's timing fields are kept per request."""


def _worker(ids: dict[str, Any], role: str) -> str | None:
    """The ``role`` (prefill, decode) worker of Dynamo's ``worker_id`` object: its id as a
    decimal string (``/RANK`` appended for a data-parallel rank other than 0); None when
    absent or not an id."""
    wid = ids.get(f"{role}_worker_id")
    if type(wid) is int and wid >= 0:
        wid = str(wid)
    if not isinstance(wid, str) or not wid or len(wid) > 64:
        return None
    rank = ids.get(f"{role}_dp_rank")
    return f"{wid}/{rank}" if type(rank) is int and rank > 0 else wid


def _served(nvext: dict[str, Any], out: Outcome) -> None:
    """Fold Dynamo's answer extension into ``out``: which workers served the request (in
    every chunk) and the server's timing of it (in the last): numbers only, others ignored."""
    ids = nvext.get("worker_id")
    if isinstance(ids, dict) and out.decode_worker is None:
        out.prefill_worker = _worker(ids, "prefill")
        out.decode_worker = _worker(ids, "decode")
    timing = nvext.get("timing")
    if isinstance(timing, dict):
        kept = {
            k: float(v)
            for k, v in timing.items()
            if isinstance(k, str) and type(v) in (int, float) and math.isfinite(v)
        }
        out.server_timing = dict(list(kept.items())[:_MAX_TIMING_FIELDS]) or None
