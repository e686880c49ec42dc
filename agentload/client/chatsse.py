"""A Chat Completions stream (Server-Sent Events) folded into an ``Outcome``, a network read at
a time: every content event's time, the finish reason, usage, a reported error, Dynamo's
answer extension.

A *content event* is a chunk whose delta has non-empty ``content``, ``reasoning_content`` or
``tool_calls``. ``ChatReader.feed`` takes one read's bytes and the time they arrived; every
content event in them gets that time. Until the first content event every event is parsed
whole (orjson); after it, a read's leading run of text deltas shaped as the stream's plain
deltas is counted by the bytes around their text (``textrun.Template``), and what is left by
``_read_rest``: a run of compact text deltas counted by byte patterns (``_plain_run``), any
other event classified line by line (``_line``: a compact mid-stream delta by its bytes,
anything else parsed). A usage report whose counts are not token counts fails the request as
``invalid_usage``. Dynamo's answer extension (``nvext``: the workers that served the request,
the server's own timing) is read from the events parsed whole: the first content event and the
finish event. ``ChatReader`` is synchronous, so a lean connection can feed it from its socket's
callback (``lean.LeanAnswer.pump``) with no task step per read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import orjson

from agentload.client.failures import reported_failure
from agentload.client.outcome import Outcome
from agentload.client.textrun import Template
from agentload.errortext import clip
from agentload.measure.errorkinds import ErrorKind
from agentload.trace.schema import MAX_CALL_TOKENS

__all__ = ["ChatReader", "fold_usage"]


class ChatReader:
    """Folds one Chat Completions stream into ``out`` (see the module docstring)."""

    __slots__ = ("_buf", "_clock", "_tpl", "done", "out")

    def __init__(self, out: Outcome, clock: Callable[[], int]) -> None:
        self.out = out
        self._clock = clock
        self._buf = b""
        self._tpl: Template | None = None
        self.done = False
        """``data: [DONE]`` was read."""

    def feed(self, raw: bytes, rx_ns: int = 0) -> None:
        """One read's bytes; ``rx_ns``: when the kernel received them (0: unknown), taken
        over the clock's reading when it lies between the send and that reading."""
        now = self._clock()
        if self.out.send_ns < rx_ns < now:
            now = rx_ns
        pos = 0
        if self._buf:
            # the line a read before left unfinished ends in this one: it is taken on its own,
            # so this read's bytes are not copied behind it
            pos = raw.find(b"\n") + 1
            if not pos:
                self._buf += raw
                return
            line, self._buf = self._buf + raw[:pos], b""
            self._take(line, 0, len(line), now)
        cut = raw.rfind(b"\n", pos) + 1  # whole lines up to there; the rest waits for its end
        if cut <= pos:
            self._buf = raw[pos:]
            return
        self._buf = raw[cut:]
        self._take(raw, pos, cut, now)

    def _take(self, buf: bytes, pos: int, cut: int, now: int) -> None:
        """The whole lines ``buf[pos:cut]``, all read at ``now``."""
        out = self.out
        chunks = out.chunk_ns
        if not chunks:
            # the first content event is parsed whole; the lines go on after its own
            pos, ended, self._tpl = _first_content_line(buf, pos, out)
            self.done = self.done or ended
            if pos < 0:
                return
            chunks.append(now)
        tpl = self._tpl
        if tpl is not None:
            n, end = tpl.run(buf, pos, cut)
            if n:
                chunks.extend([now] * n)
                pos = end
        if cut - pos > 2 or buf[pos:cut].strip():  # more than the blank line after an event
            ended, learned = _read_rest(buf[pos:cut], out, now)
            self.done = self.done or ended
            self._tpl = learned or tpl

    def finish(self) -> None:
        """The stream ended: its first chunk's time, and ``truncated`` when it ended without
        ``[DONE]`` or a finish reason."""
        out = self.out
        if out.chunk_ns:
            out.first_ns = out.chunk_ns[0]
        if out.error_kind is None and not self.done and out.finish_reason is None:
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
    return _parsed(payload, out)[0]


def _parsed(payload: bytes, out: Outcome) -> tuple[int, Any]:
    """One event's JSON parsed and folded into ``out``: 1 when it carries content, else 0;
    and the event (None when it could not be parsed: ``stream_error``)."""
    try:
        ev: Any = orjson.loads(payload)
    except orjson.JSONDecodeError:
        out.error_kind, out.error = ErrorKind.STREAM_ERROR, "unparseable SSE event"
        return 0, None
    return int(_event(ev, out)), ev


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


def _first_content_line(block: bytes, pos: int, out: Outcome) -> tuple[int, bool, Template | None]:
    """Parse ``block``'s events from ``pos`` in turn until one carries content: the offset
    just after that event's line (-1 when none did), whether ``[DONE]`` was among them, and
    the template of that line (``Template.learn``; None when it is not a plain text delta)."""
    done = False
    while (nl := block.find(b"\n", pos)) >= 0:
        line = block[pos:nl]
        pos = nl + 1
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            done = True
            continue
        got, ev = _parsed(payload, out)
        if got:
            return pos, done, Template.learn(line, ev)
    return -1, done, None


def _text_deltas(block: bytes) -> bool:
    """Whether every event of ``block`` (whole SSE lines) is a compact mid-stream text delta of
    one choice: ``finish_reason`` null, no usage, error, tool call, reasoning or comment. Such
    an event carries content exactly when it holds a non-empty ``"content":"``: inside a JSON
    string a quote is escaped, so these byte patterns are keys, never text."""
    return all(p not in block for p in _NOT_PLAIN) and _compact(block)


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


def fold_usage(usage: Any, out: Outcome) -> None:
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
        fold_usage(usage, out)
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
