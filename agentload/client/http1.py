"""HTTP/1.1 framing: message heads and bodies, nothing else; the recording proxy's, and the
client's lean connections' (``lean``).

The proxy forwards bytes as they come and reads them only to know where a message ends (and,
for the recorder, what its payload was); the client reads an answer's head and then its body
as it streams. So these are small incremental readers:

* ``split_head(buf, request=...)``: a complete head (start line + headers) off the front of
  ``buf``, or None while it is still arriving; ``HeadError`` for one that is malformed or too
  large.
* ``Body``: one body by its framing (``Content-Length``, ``chunked``, up to the connection's
  end, or none): ``feed(data)`` → the payload bytes in ``data``; ``done`` once it ended;
  ``extra`` any bytes past its end (the next message on the connection); ``wanted`` the bytes
  still to come when a ``Content-Length`` tells.
* ``field_line(name, value)``: one header line to write, checked as a read one is.

They are strict, as an intermediary must be (RFC 9112 §2.2, §3, §5, §6.3, §7.1): lines end in
CRLF only; a bare CR or LF, a NUL or any other control byte in a start line, a field or a chunk
line is an error, and so are obs-fold, whitespace before a field's colon, a field name that is
not a token, a request target outside visible ASCII, a version other than HTTP/1.0 or 1.1, a
request with both ``Content-Length`` and ``Transfer-Encoding`` or with more than one ``Host``, a
``Content-Length`` that is not digits (or several that differ) and a chunk size that is not hex
digits. What the proxy forwards it rebuilds from what it parsed, so nothing it did not read can
reach the other side.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_HEAD", "Body", "Head", "HeadError", "body_for", "field_line", "split_head"]

MAX_HEAD = 64 * 1024
"""Largest head accepted (start line and headers together)."""
MAX_CHUNK_LINE = 4096
"""Largest chunk-size line (size and extensions) or trailer line."""

_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""RFC 9110 §5.6.2 token: a method or a field name."""
_CTL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")
"""Control bytes other than HTAB: never in a field value, a reason phrase or a chunk extension."""
_FIELDS = re.compile(
    rb"(?:" + _TOKEN.pattern + rb":" + _CTL.pattern.replace(b"[", b"[^", 1) + rb"*(?:\r\n|\Z))*"
)
"""Field lines joined by CRLF, each well formed (what ``_field`` checks one at a time)."""
_TARGET_BAD = re.compile(rb"[^\x21-\x7e]")
"""A request target is visible ASCII only."""
_DIGITS = re.compile(rb"[0-9]{1,18}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")
_VERSIONS = (b"HTTP/1.1", b"HTTP/1.0")

Headers = list[tuple[bytes, bytes]]


class HeadError(Exception):
    """A message head or chunk framing that cannot be read (or a header that cannot be
    written)."""


@dataclass
class Head:
    """A message head: its start line's three parts and its headers, names lower-cased."""

    start: tuple[bytes, bytes, bytes]
    headers: Headers

    def get(self, name: bytes) -> bytes | None:
        for k, v in self.headers:
            if k == name:
                return v
        return None

    def values(self, name: bytes) -> list[bytes]:
        """The comma-separated, lower-cased values of every header ``name``, in order."""
        return [t.strip().lower() for k, v in self.headers if k == name for t in v.split(b",")]

    def tokens(self, name: bytes) -> set[bytes]:
        """``values`` as a set."""
        return set(self.values(name))


def split_head(buf: bytes | bytearray, *, request: bool) -> tuple[Head, int] | None:
    """The head at the start of ``buf`` and its length, or None until all of it is there.
    ``request``: a request head (request line, one ``Host``) rather than an answer's."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise HeadError(f"head over {MAX_HEAD} bytes")
        if buf.find(b"\n\n") >= 0:
            raise HeadError("a line ended by a bare LF")
        return None
    if end > MAX_HEAD:
        raise HeadError(f"head over {MAX_HEAD} bytes")
    lines = bytes(buf[:end]).split(b"\r\n")
    while lines and not lines[0]:  # stray CRLFs between messages (RFC 9112 §2.2)
        lines.pop(0)
    if not lines:
        raise HeadError("empty head")
    start = _request_line(lines[0]) if request else _status_line(lines[0])
    if _FIELDS.fullmatch(b"\r\n".join(lines[1:])):  # every field well formed: split them
        headers = [
            (name.lower(), value.strip(b" \t"))
            for name, _, value in (line.partition(b":") for line in lines[1:])
        ]
    else:  # find the first bad one, and say why
        headers = [_field(line) for line in lines[1:]]
    head = Head(start, headers)
    if request and sum(1 for k, _ in headers if k == b"host") > 1:
        raise HeadError("more than one host header")
    return head, end + 4


def _request_line(line: bytes) -> tuple[bytes, bytes, bytes]:
    parts = line.split(b" ")
    if (
        len(parts) != 3
        or not _TOKEN.fullmatch(parts[0])
        or not parts[1]
        or _TARGET_BAD.search(parts[1])
        or parts[2] not in _VERSIONS
    ):
        raise HeadError(f"bad request line {line[:80]!r}")
    return parts[0], parts[1], parts[2]


def _status_line(line: bytes) -> tuple[bytes, bytes, bytes]:
    parts = line.split(b" ", 2)
    reason = parts[2] if len(parts) == 3 else b""
    if (
        len(parts) < 2
        or parts[0] not in _VERSIONS
        or len(parts[1]) != 3
        or not parts[1].isdigit()
        or _CTL.search(reason)
    ):
        raise HeadError(f"bad status line {line[:80]!r}")
    return parts[0], parts[1], reason


def field_line(name: bytes, value: bytes) -> bytes:
    """``name: value`` and CRLF, for a head to write; ``HeadError`` for a name that is not a
    token or a value with a control byte (CR, LF, NUL, ...), so nothing but this one field
    can reach the other side."""
    if not _TOKEN.fullmatch(name):
        raise HeadError(f"bad header name {name[:40]!r}")
    if _CTL.search(value):
        raise HeadError(f"a control byte (CR, LF, NUL, ...) in header {name[:40]!r}")
    return b"%s: %s\r\n" % (name, value)


def _field(line: bytes) -> tuple[bytes, bytes]:
    """One field line: a token, a colon, a value of visible bytes, spaces and tabs."""
    if line[:1] in (b" ", b"\t"):
        raise HeadError(f"obs-fold (a field line that starts with whitespace) {line[:80]!r}")
    name, sep, value = line.partition(b":")
    if not sep or not _TOKEN.fullmatch(name):
        raise HeadError(f"bad header line {line[:80]!r}")
    if _CTL.search(value):
        raise HeadError(f"a control byte (CR, LF, NUL, ...) in header {name[:40]!r}")
    return name.lower(), value.strip(b" \t")


class Body:
    """One message body as it arrives (see the module docstring). ``length``: its
    ``Content-Length``; ``chunked``: chunked transfer coding; ``to_close``: it runs until the
    connection ends (``done`` stays False: the caller ends it)."""

    def __init__(self, *, length: int = 0, chunked: bool = False, to_close: bool = False) -> None:
        self.chunked = chunked
        self.to_close = to_close
        self.length = length
        self._left = length
        """Payload bytes still to come: of the body (``Content-Length``) or of this chunk."""
        self._state = 0 if chunked else 1
        """chunked: 0 size line, 1 chunk data, 2 the CRLF after it, 3 trailers; else 1."""
        self._buf = b""
        self.done = not chunked and not to_close and length == 0
        self.extra = b""

    def again(self) -> Body:
        """A new body framed as this one was, read from its start."""
        return Body(length=self.length, chunked=self.chunked, to_close=self.to_close)

    @property
    def wanted(self) -> int | None:
        """Bytes still to come when its framing tells (a ``Content-Length``), else None."""
        if self.chunked or self.to_close:
            return None
        return self._left

    def feed(self, data: bytes, start: int = 0) -> bytes:
        """The payload in ``data[start:]`` (``start``: where a head before it ended, so
        the caller need not copy what follows it)."""
        if start and not (self.chunked and not self._buf and not self.done):
            data = data[start:]
            start = 0
        if self.done:
            self.extra += data
            return b""
        if self.to_close:
            return data
        if not self.chunked:
            if len(data) < self._left:
                self._left -= len(data)
                return data
            n, self._left = self._left, 0
            self.done = True
            self.extra = data[n:]
            return data[:n] if n < len(data) else data
        return self._chunked(data, start)

    def _chunked(self, data: bytes, start: int) -> bytes:
        buf = self._buf + data if self._buf else data
        self._buf = b""
        out: list[bytes] = []
        i, n = start, len(buf)
        while i < n:
            if self._state == 1:  # chunk data
                take = min(self._left, n - i)
                out.append(buf[i : i + take])
                i += take
                self._left -= take
                if self._left == 0:
                    self._state = 2
                continue
            cut = buf.find(b"\r\n", i)
            if cut < 0:
                if n - i > MAX_CHUNK_LINE:
                    raise HeadError(f"chunk size or trailer line over {MAX_CHUNK_LINE} bytes")
                self._buf = buf[i:]
                break
            line = buf[i:cut]
            i = cut + 2
            if self._state == 2:  # the CRLF after a chunk's data
                if line:
                    raise HeadError("chunk data longer than its size")
                self._state = 0
            elif self._state == 0:  # a size line; extensions after ';' are checked, not used
                # a CR or LF inside the line fails these too (CTL), as in the CRLF after data
                size, _, ext = line.partition(b";")
                if ext:
                    size = size.rstrip(b" \t")
                    if _CTL.search(ext):
                        raise HeadError(f"bad chunk extension {line[:40]!r}")
                if not _HEX.fullmatch(size):
                    raise HeadError(f"bad chunk size {line[:40]!r}")
                self._left = int(size, 16)
                self._state = 1 if self._left else 3
            elif line:  # state 3: a trailer field
                _field(line)
            else:  # state 3: the empty line that ends the trailers
                self.done = True
                self.extra = buf[i:]
                break
        return out[0] if len(out) == 1 else b"".join(out)


def body_for(head: Head, *, request: bool, no_body: bool = False) -> Body:
    """The framing of the body that follows ``head`` (RFC 9112 §6.3). ``no_body``: the answer
    to a HEAD request, or a 1xx/204/304 status. Framing that two readers could read two ways
    (both lengths, a length list that disagrees, a request coding other than ``chunked``) is an
    error, never a guess."""
    if no_body:
        return Body()
    codings = head.values(b"transfer-encoding")
    lengths = head.values(b"content-length")
    if codings:
        if lengths:
            raise HeadError("both content-length and transfer-encoding")
        if request:
            if head.start[2] != b"HTTP/1.1" or codings != [b"chunked"]:
                raise HeadError(f"request transfer-encoding {b', '.join(codings)[:40]!r}")
            return Body(chunked=True)
        if codings[-1] == b"chunked" and codings.count(b"chunked") == 1:
            return Body(chunked=True)
        if b"chunked" in codings:
            raise HeadError(f"transfer-encoding {b', '.join(codings)[:40]!r}")
        return Body(to_close=True)
    if lengths:
        if len(set(lengths)) != 1 or not _DIGITS.fullmatch(lengths[0]):
            raise HeadError(f"bad content-length {b', '.join(lengths)[:40]!r}")
        return Body(length=int(lengths[0]))
    return Body() if request else Body(to_close=True)
