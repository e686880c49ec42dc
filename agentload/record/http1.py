"""HTTP/1.1 framing for the recording proxy: message heads and bodies, nothing else.

The proxy forwards bytes as they come and reads them only to know where a message ends (and,
for the recorder, what its payload was), so these are small incremental readers:

* ``split_head(buf)``: a complete head (start line + headers) off the front of ``buf``, or None
  while it is still arriving; ``HeadError`` for one that is malformed or too large.
* ``Body``: one body by its framing (``Content-Length``, ``chunked``, up to the connection's
  end, or none): ``feed(data)`` → the payload bytes in ``data``; ``done`` once it ended;
  ``extra`` any bytes past its end (the next message on the connection).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MAX_HEAD", "Body", "Head", "HeadError", "body_for", "split_head"]

MAX_HEAD = 64 * 1024
"""Largest head accepted (start line and headers together)."""

Headers = list[tuple[bytes, bytes]]


class HeadError(Exception):
    """A message head or chunk framing the proxy cannot read."""


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

    def tokens(self, name: bytes) -> set[bytes]:
        """The comma-separated, lower-cased values of every header ``name``."""
        out: set[bytes] = set()
        for k, v in self.headers:
            if k == name:
                out.update(t.strip().lower() for t in v.split(b","))
        return out


def split_head(buf: bytes | bytearray) -> tuple[Head, int] | None:
    """The head at the start of ``buf`` and its length, or None until all of it is there."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        if len(buf) > MAX_HEAD:
            raise HeadError(f"head over {MAX_HEAD} bytes")
        return None
    if end > MAX_HEAD:
        raise HeadError(f"head over {MAX_HEAD} bytes")
    lines = bytes(buf[:end]).split(b"\r\n")
    while lines and not lines[0]:  # stray CRLFs between messages (RFC 9112 §2.2)
        lines.pop(0)
    if not lines:
        raise HeadError("empty head")
    parts = lines[0].split(b" ", 2)
    if len(parts) != 3:
        raise HeadError(f"bad start line {lines[0][:80]!r}")
    headers: Headers = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise HeadError(f"bad header line {line[:80]!r}")
        headers.append((name.lower(), value.strip()))
    return Head((parts[0], parts[1], parts[2]), headers), end + 4


class Body:
    """One message body as it arrives (see the module docstring). ``length``: its
    ``Content-Length``; ``chunked``: chunked transfer coding; ``to_close``: it runs until the
    connection ends (``done`` stays False: the caller ends it)."""

    def __init__(self, *, length: int = 0, chunked: bool = False, to_close: bool = False) -> None:
        self.chunked = chunked
        self.to_close = to_close
        self._left = length
        """Payload bytes still to come: of the body (``Content-Length``) or of this chunk."""
        self._state = 0 if chunked else 1
        """chunked: 0 size line, 1 chunk data, 2 the CRLF after it, 3 trailers; else 1."""
        self._buf = b""
        self.done = not chunked and not to_close and length == 0
        self.extra = b""

    def feed(self, data: bytes) -> bytes:
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
        return self._chunked(data)

    def _chunked(self, data: bytes) -> bytes:
        buf = self._buf + data if self._buf else data
        self._buf = b""
        out: list[bytes] = []
        i, n = 0, len(buf)
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
                if n - i > 4096:
                    raise HeadError("chunk size line over 4096 bytes")
                self._buf = buf[i:]
                break
            line = buf[i:cut]
            i = cut + 2
            if self._state == 2:  # the CRLF after a chunk's data
                if line:
                    raise HeadError("chunk data longer than its size")
                self._state = 0
            elif self._state == 0:  # a size line (extensions after ';' are ignored)
                size = line.split(b";", 1)[0].strip()
                try:
                    self._left = int(size, 16)
                except ValueError:
                    raise HeadError(f"bad chunk size {size[:40]!r}") from None
                if self._left < 0:
                    raise HeadError(f"bad chunk size {size[:40]!r}")
                self._state = 1 if self._left else 3
            elif not line:  # state 3: the empty line that ends the trailers
                self.done = True
                self.extra = buf[i:]
                break
        return out[0] if len(out) == 1 else b"".join(out)


def body_for(head: Head, *, request: bool, no_body: bool = False) -> Body:
    """The framing of the body that follows ``head`` (RFC 9112 §6.3). ``no_body``: the answer
    to a HEAD request, or a 1xx/204/304 status."""
    if no_body:
        return Body()
    codings = head.tokens(b"transfer-encoding")
    if codings:
        if b"chunked" in codings:
            return Body(chunked=True)
        if request:
            raise HeadError("request transfer-encoding without chunked")
        return Body(to_close=True)
    length = head.get(b"content-length")
    if length is not None:
        try:
            n = int(length.split(b",")[0])
        except ValueError:
            raise HeadError(f"bad content-length {length[:40]!r}") from None
        if n < 0:
            raise HeadError(f"bad content-length {length[:40]!r}")
        return Body(length=n)
    return Body() if request else Body(to_close=True)
