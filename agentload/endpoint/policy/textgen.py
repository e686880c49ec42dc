"""Token-exact text: what the simulator emits is counted with the same tokenizer as usage.

Convention (documented in docs/simulator.md): ``completion_tokens`` = tokens of the message
content + tokens of each tool call's ``arguments`` string, each counted as plain text with the
server's tokenizer (tool names, ids and JSON framing of the call are not counted). The streamed
pieces of one response concatenate to exactly the text that was counted.

``fit(segments, n)`` turns a draft (a list of word-sized segments) into a text of exactly ``n``
tokens: cut at a segment boundary at or before token ``n``, then pad with single-token words
that always tokenize on their own (a space followed by lowercase letters), and verify.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from agentload.tokenizer import get_tokenizer

__all__ = ["TextTokens", "text_tokens"]

_FILLER = (
    " the",
    " code",
    " and",
    " path",
    " test",
    " call",
    " check",
    " which",
    " then",
    " also",
    " file",
    " line",
    " value",
    " result",
)


class TextTokens:
    """Encode, split into per-token pieces, and fit texts to exact token counts."""

    def __init__(self, tokenizer: str = "o200k_base") -> None:
        tok: Any = get_tokenizer(tokenizer)
        self.name = tokenizer
        self._encode = tok.encode
        self._decode = getattr(tok, "decode", None)
        self._filler = [w for w in _FILLER if len(self._encode(w)) == 1] or [" the"]
        self._piece_cache: dict[int, str] = {}

    def count(self, text: str) -> int:
        """Tokens of ``text`` as plain text."""
        return len(self._encode(text)) if text else 0

    def encode(self, text: str) -> list[int]:
        return self._encode(text) if text else []

    def pieces(self, text: str) -> list[str]:
        """Split ``text`` into one string per token (multi-byte characters stay whole, so a
        piece may then carry several tokens); the pieces join back to ``text``."""
        if not text:
            return []
        ids = self._encode(text)
        if self._decode is None or not text.isascii():
            return self._pieces_slow(text, ids)
        cache = self._piece_cache
        out = []
        for i in ids:
            p = cache.get(i)
            if p is None:
                p = cache[i] = self._decode([i])
            out.append(p)
        return out

    def _pieces_slow(self, text: str, ids: Sequence[int]) -> list[str]:
        if self._decode is None:  # a tokenizer without decode: split by characters evenly
            n = max(1, len(ids))
            step = max(1, len(text) // n)
            return [text[i : i + step] for i in range(0, len(text), step)]
        out: list[str] = []
        start = 0
        pos = 0
        for k in range(1, len(ids) + 1):
            chunk = self._decode(list(ids[start:k]))
            if "\ufffd" in chunk and k < len(ids):
                continue
            out.append(text[pos : pos + len(chunk)] if k < len(ids) else text[pos:])
            pos += len(chunk)
            start = k
        return out

    def filler(self, n: int, offset: int = 0) -> str:
        """``n`` tokens of filler words."""
        f = self._filler
        return "".join(f[(offset + i) % len(f)] for i in range(n))

    def fit(self, segments: Sequence[str], n: int) -> str:
        """A text of exactly ``n`` tokens from the start of ``"".join(segments)``."""
        if n <= 0:
            return ""
        text = "".join(segments)
        c = self.count(text)
        if c < n:
            return self._pad(text, c, n)
        if c == n:
            return text
        # Find the last segment boundary at or before the end of token n.
        ids = self._encode(text)
        head = self._decode(ids[:n]) if self._decode is not None else text
        limit = len(head)
        b = 0
        k = 0
        for k, seg in enumerate(segments):  # noqa: B007
            if b + len(seg) > limit:
                break
            b += len(seg)
        else:
            k = len(segments)
        while True:
            prefix = "".join(segments[:k])
            c = self.count(prefix)
            if c <= n:
                return self._pad(prefix, c, n)
            k -= 1

    def _pad(self, text: str, c: int, n: int) -> str:
        if not text:
            text, c = self._filler[0].lstrip(), 1
            if self.count(text) != 1:
                text, c = "", 0
        out = text + self.filler(n - c)
        got = self.count(out)
        for _ in range(8):  # padding is additive in practice; correct the rare exception
            if got == n:
                return out
            if got > n:
                out = out[: out.rfind(" ")] if " " in out else out[:-1]
            else:
                out += self.filler(1, got)
            got = self.count(out)
        if got != n:  # pragma: no cover - unreachable with BPE tokenizers we ship
            raise RuntimeError(f"cannot fit text to {n} tokens (got {got})")
        return out


@functools.cache
def text_tokens(tokenizer: str = "o200k_base") -> TextTokens:
    """One ``TextTokens`` per tokenizer per process."""
    return TextTokens(tokenizer)
