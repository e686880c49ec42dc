"""Compressed bodies read for the recording, bounded (``Decoder``, ``decode``).

An agent may compress its request body (``Content-Encoding: gzip``, ``deflate``, ``zstd``,
``br``), and an upstream its answer although the proxy asked for none. The proxy forwards the
bytes as they came either way; the recorder reads them through a ``Decoder``, which stops at
``MAX_DECODED`` bytes of output: a small body that inflates without end (a decompression bomb)
costs at most that much memory and is noted as not read, never held whole. Any other coding is
noted as not read.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import brotli
import zstandard

from agentload.errors import WireError

__all__ = ["MAX_DECODED", "Decoder", "decode"]

MAX_DECODED = 256 << 20
"""The most bytes a compressed body may inflate to before the recorder gives up on it."""
_ZSTD_SLICE = 128
"""Compressed bytes given to zstd at a time: its output per slice stays under 4 MiB (zstd's
largest expansion is about 32768:1), so a bomb is caught within that much of the limit."""
_ZLIB = ("gzip", "x-gzip", "deflate")
"""Codings zlib reads (its ``wbits=47``: a gzip or a zlib header, as senders of ``deflate``
differ)."""


class Decoder:
    """Reads one body coded in ``coding`` (a ``Content-Encoding`` value; several codings are
    undone last first), piece by piece: ``feed(piece)`` → the bytes it decodes to. Raises
    ``WireError`` for a coding it cannot read, a corrupt body, or output past ``limit``."""

    def __init__(self, coding: str, limit: int = MAX_DECODED) -> None:
        names = [c.strip().lower() for c in coding.split(",")]
        names = [c for c in names if c and c != "identity"]
        self.coding = ", ".join(names)
        self.limit = limit
        self.total = 0
        self._steps = [_step(c) for c in reversed(names)]

    @property
    def identity(self) -> bool:
        """Whether the body is not coded at all."""
        return not self._steps

    def feed(self, piece: bytes) -> bytes:
        """The bytes ``piece`` (the next of the body) decodes to."""
        for step in self._steps:
            piece = self._run(step, piece)
        return piece

    def _run(self, step: _Step, data: bytes) -> bytes:
        room = self.limit - self.total
        try:
            got = step(data, room + 1)
        except (zlib.error, zstandard.ZstdError, brotli.error) as exc:
            raise WireError(f"body not readable: {self.coding}: {exc}") from None
        if len(got) > room:
            raise WireError(
                f"body not read: over {self.limit >> 20} MiB once decoded ({self.coding})"
            )
        self.total += len(got)
        return got


_Step = Callable[[bytes, int], bytes]
"""One coding's decompressor: (compressed bytes, the most output wanted) → output, longer than
that only when there was more (the caller refuses it)."""


def _zlib() -> _Step:
    z = zlib.decompressobj(wbits=47)

    def step(data: bytes, most: int) -> bytes:
        out = z.decompress(data, most)
        return out + b"+" if z.unconsumed_tail else out  # more to come: past the limit

    return step


def _zstd() -> _Step:
    z = zstandard.ZstdDecompressor().decompressobj()

    def step(data: bytes, most: int) -> bytes:
        out = bytearray()
        for at in range(0, len(data), _ZSTD_SLICE):
            out += z.decompress(data[at : at + _ZSTD_SLICE])
            if len(out) > most:
                break
        return bytes(out)

    return step


def _brotli() -> _Step:
    d = brotli.Decompressor()

    def step(data: bytes, most: int) -> bytes:
        out: bytes = d.process(data, output_buffer_limit=most + 1)
        return out if d.can_accept_more_data() else out + b"+"  # more held back: past the limit

    return step


_CODINGS: dict[str, Callable[[], _Step]] = {"zstd": _zstd, "br": _brotli}
_CODINGS.update(dict.fromkeys(_ZLIB, _zlib))


def _step(coding: str) -> _Step:
    """A fresh decompressor of one coding."""
    make = _CODINGS.get(coding)
    if make is None:
        raise WireError(
            f"body not readable: content-encoding {coding[:40]}"
            " (agentload reads gzip, deflate, zstd and br)"
        )
    return make()


def decode(data: bytes, coding: str, limit: int = MAX_DECODED) -> bytes:
    """A whole body coded in ``coding``, decoded (``Decoder``'s errors)."""
    decoder = Decoder(coding, limit)
    return data if decoder.identity else decoder.feed(data)
