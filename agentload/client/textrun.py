"""A run of plain text deltas in a Chat Completions stream, counted by its bytes.

A server writes every plain text delta of one stream with the same bytes around the text:
``data: {"id":"chatcmpl-1",...,"choices":[{"index":0,"delta":{"content":"`` before it and
``"},"logprobs":null,"finish_reason":null}]}`` and the line's end after it. ``Template.learn``
takes the two (``head``, ``tail``) from one such event the reader parsed whole, and
``Template.run`` counts, in a block of whole SSE lines, the content events of its leading part
when that part holds only events of that shape, each followed by one blank line: three byte
counts (the *joint* of two such events, ``tail`` + blank line + ``head``; the newlines; a head
followed at once by a quote, an empty text), where a check event by event would cost a parse
or a dozen byte scans per event.

Why the counts are enough. The part starts with the head (after blank lines only) and ends with
the tail; the head holds no newline and the tail one, at its end. With ``n - 1`` joints in the
part and ``2n - 1`` newlines, the joints hold every newline but the last tail's, so the part is
exactly ``n`` lines, each the head, a text with no newline, and the tail, with one blank line
between two. Inside a JSON string a quote is escaped, so the head and the tail (each a run of
JSON structure around quotes) cannot be taken for text; when no head is followed at once by a
quote, every text is non-empty. So each of those lines is one content event with the shape of
the learned one: index 0, ``finish_reason`` as learned (null or absent), no usage, no error
(what a server may add after the text inside the delta, a tool call or reasoning, is one
content event still). Anything else (an empty text, a finish, a usage report, a second choice,
a comment, a server that writes a new ``created`` each second) makes the counts differ, and
the reader takes that part event by event as before, and learns the shape again from a later
plain delta (``Template.learn`` on a line it parsed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["Template"]

_CONTENT = b'"content":"'
_UNPARSED: Any = object()
"""``Template.learn``'s default: the line's JSON is still to parse."""


@dataclass(frozen=True, slots=True)
class Template:
    """The bytes around the text of this stream's plain text deltas (see the module
    docstring)."""

    head: bytes
    """From ``data:`` up to and with the text's opening quote."""
    tail: bytes
    """From the text's closing quote to the end of the line, its newline included."""
    joint: bytes
    """``tail``, a blank line (ended as ``tail`` is) and ``head``: two deltas in a row."""
    empty: bytes
    """``head`` and a quote: a delta whose text is empty."""

    @classmethod
    def learn(cls, line: bytes, event: Any = _UNPARSED) -> Template | None:
        """The template of ``line`` (one SSE ``data:`` line, its newline left off; ``event``:
        its JSON, when parsed already) when it is a plain text delta: one choice of index 0,
        non-empty ``content`` (nothing else in its delta but what follows the text),
        ``finish_reason`` null or absent, no usage, no error; else None."""
        if not line.startswith(b"data:"):
            return None
        if event is _UNPARSED:
            try:
                event = orjson.loads(line[5:])
            except orjson.JSONDecodeError:
                return None
        if not _plain_delta(event):
            return None
        start = line.find(_CONTENT)
        if start < 0 or line.count(_CONTENT) != 1:
            return None
        close = _closing_quote(line, start + len(_CONTENT))
        if close is None:
            return None
        head, tail = line[: start + len(_CONTENT)], line[close:] + b"\n"
        if b"\r" in head or b"\r" in tail[:-2]:
            return None
        blank = b"\r\n" if tail.endswith(b"\r\n") else b"\n"
        return cls(head, tail, tail + blank + head, head + b'"')

    def run(self, block: bytes, pos: int, stop: int) -> tuple[int, int]:
        """In ``block[pos:stop]`` (whole lines): the content events of its leading part up to
        the last line that ends with the tail, and where that part ends; ``(0, pos)`` when
        that part holds anything but events of this template's shape (see the module
        docstring)."""
        start = pos
        if not block.startswith(self.head, pos, stop):
            start = block.find(self.head, pos, stop)
            if start < 0 or block[pos:start].strip():  # only blank lines before it
                return 0, pos
        end = block.rfind(self.tail, start, stop)
        if end < 0:
            return 0, pos
        end += len(self.tail)
        n = block.count(self.joint, start, end) + 1
        if _newlines(block[start:end]) != 2 * n - 1 or block.count(self.empty, start, end):
            return 0, pos
        return n, end


def _newlines(part: bytes) -> int:
    """The newlines in ``part``. ``bytes.count`` of one byte tests every byte in turn; a
    deletion finds each with ``memchr``: about a third of the time on a stream's bytes."""
    return len(part) - len(part.replace(b"\n", b""))


def _plain_delta(ev: Any) -> bool:
    """Whether ``ev`` (an SSE event's JSON) is one plain text delta (see ``Template.learn``)."""
    if not isinstance(ev, dict) or ev.get("usage") is not None or "error" in ev:
        return False
    choices = ev.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return False
    ch = choices[0]
    delta = ch.get("delta")
    return (
        ch.get("index", 0) == 0
        and ch.get("finish_reason") is None
        and isinstance(delta, dict)
        and isinstance(delta.get("content"), str)
        and bool(delta["content"])
    )


def _closing_quote(line: bytes, at: int) -> int | None:
    """The offset of the quote that ends the JSON string whose text starts at ``at``."""
    while (q := line.find(b'"', at)) >= 0:
        slashes = 0
        while q - slashes - 1 >= at and line[q - slashes - 1] == 0x5C:  # backslash
            slashes += 1
        if slashes % 2 == 0:
            return q
        at = q + 1
    return None
