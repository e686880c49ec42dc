"""Prompt synthesis for content-free traces: block ids → deterministic text of exact length.

A content-free call (``header.redacted``) has block ids (``Trace.blocks(call)``, at
``header.block_size`` tokens a block) and an input length (``usage.prompt_tokens_ours``), no
text. ``Synthesizer`` turns them into chat messages such that, under the chosen tokenizer and
the framing convention of ``agentload.tokenizer`` (``ChatTokenCounter``):

* the prompt has exactly the recorded input length (when it is at least the framing's tokens);
* the same block id always gives the same block of text, different ids different blocks, each
  block ``block_size`` tokens: a target's prefix cache sees the recorded sharing;
* everything is a pure function of (tokenizer, seed, ids, lengths, call id).

**Vocabulary**: the tokens of the tokenizer that decode to a space + lowercase ASCII letters
and encode back to exactly that one token (o200k_base: 47,450 of them). Pre-tokenizers split
text before every `` word``, so a run of such words is one token a word; the constructor
checks this on samples (and the framing around them) and raises ``TokenizerError`` when it
does not hold.

**Text**: a block's text is ``block_size`` words, each a space + letters. Its first
``code_words`` words are a 64-bit keyed hash of the id written in base V (V the vocabulary's
size), so two ids' blocks can only be equal if their 64-bit hashes are; the rest are drawn
from a keyed stream (blake2b of the seed, the id and a counter). A partial last block is that
block's first k words. The words beyond the last id (the part of the prompt the source did not
hash) are a stream keyed by the call's id, with the same hash words in front: unique per call.

**Messages**: a fixed short system message (replay's ``--salt-at start`` salt goes there;
``after-system`` puts it in front of the user message, before the words), then one user message: the words, then one space (a Metaspace/
sentencepiece tokenizer would otherwise merge the last word with the closing framing). The
framing (the system piece, the user piece's own tokens, the reply priming) comes off the
recorded length; the ids cover the prompt's words from the start, so the last id's block is
cut by the framing's tokens (an id left with no room is dropped). A target's own chat template
frames the messages differently from the convention: its usage then differs by a roughly
constant number of tokens a call, which replay's server/ours prompt-token ratio shows.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from agentload.errors import TokenizerError
from agentload.tokenizer import DEFAULT_TOKENIZER, ChatTokenCounter, render_message, token_texts

__all__ = ["SYSTEM_TEXT", "Layout", "Synthesizer", "vocabulary"]

SYSTEM_TEXT = "Synthetic prompt of a content-free trace."
"""The fixed system message of every synthesized prompt."""

_WORD = re.compile(r"^ [a-z]+$")
_CACHE_CHARS = 64 << 20
_MAX_EXTEND = 256
"""Words compared one by one past the last shared id (different ids differ within the hash
words, so this is never reached in practice)."""


@functools.cache
def vocabulary(tokenizer: str) -> tuple[str, ...]:
    """The words of ``tokenizer`` (see the module docstring), in token-id order."""
    tok = ChatTokenCounter(tokenizer).tokenizer
    words = []
    for i, text in token_texts(tok):
        word = text if text.startswith(" ") else " " + text
        if _WORD.match(word) and tok.encode(word) == [i]:
            words.append(word)
    if len(words) < 256:
        raise TokenizerError(
            f"tokenizer {tokenizer}: only {len(words)} tokens are a space + lowercase letters; "
            "prompts cannot be synthesized with it"
        )
    return tuple(words)


@dataclass(frozen=True)
class Layout:
    """Where a synthesized call's words come from."""

    key: str
    """The call's id: keys the words beyond its ids."""
    ids: Sequence[str]
    """The block ids that fit the prompt (at least one of their words is in it)."""
    block_size: int
    words: int
    """Words of the user message (one token each)."""
    tokens: int
    """The prompt's tokens under the framing convention (unsalted)."""

    @property
    def covered(self) -> int:
        """Words that come from block ids (the rest come from the call's own stream)."""
        return min(self.words, len(self.ids) * self.block_size)


class Synthesizer:
    """Prompts for content-free calls (module docstring); one per tokenizer and seed."""

    def __init__(self, tokenizer: str = DEFAULT_TOKENIZER, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.seed = seed
        self.counter = ChatTokenCounter(tokenizer)
        self.words = vocabulary(tokenizer)
        v = len(self.words)
        self.code_words = math.ceil(64 / math.log2(v))
        self._key = hashlib.blake2b(f"agentload-synth:{seed}".encode(), digest_size=32).digest()
        self.system = {"role": "system", "content": SYSTEM_TEXT}
        self._cache: OrderedDict[str, str] = OrderedDict()
        self._cached_chars = 0
        self._measure_framing()

    # ---- framing -----------------------------------------------------------------------
    def _measure_framing(self) -> None:
        """The framing's tokens, checked on samples: one token a word, a constant frame."""
        enc = self.counter.tokenizer.encode
        system = len(self.counter.ids_for_message(self.system))
        frames = set()
        for n, key in ((0, "a"), (1, "b"), (7, "c"), (300, "d")):
            text = self._stream(f"check:{key}", n)
            ids = enc(render_message({"role": "user", "content": text + " "}))
            frames.add(len(ids) - n)
            if len(enc(text)) != n:
                frames.add(-1)
        tail = self._stream("check:d", 300)
        a, b = (
            enc(render_message({"role": "user", "content": w + tail + " "})) for w in self.words[:2]
        )
        head = sum(1 for _ in _common(a, b))
        if len(frames) != 1 or head >= len(a) - 300:
            raise TokenizerError(
                f"tokenizer {self.tokenizer}: a run of its single-token words does not encode "
                "to one token a word inside the chat framing; prompts cannot be synthesized"
            )
        self.framing = system + frames.pop() + len(self.counter.priming_ids)
        """Tokens of a synthesized prompt besides its words."""
        self.head = system + head
        """Tokens in front of the first word (system piece, the user piece's opening)."""

    # ---- words -------------------------------------------------------------------------
    def _code(self, tag: str) -> list[int]:
        h = hashlib.blake2b(tag.encode(), key=self._key, digest_size=8).digest()
        x = int.from_bytes(h, "big")
        v = len(self.words)
        out = []
        for _ in range(self.code_words):
            x, d = divmod(x, v)
            out.append(d)
        return out[::-1]

    def _indexes(self, tag: str, n: int) -> list[int]:
        """``n`` word indexes of the stream ``tag``: the hash words, then the keyed stream."""
        out = self._code(tag)[:n]
        v = len(self.words)
        base = hashlib.blake2b(tag.encode(), key=self._key, digest_size=32).digest()
        c = 0
        while len(out) < n:
            chunk = array("I", hashlib.blake2b(base + c.to_bytes(4, "little")).digest())
            out.extend(x % v for x in chunk)
            c += 1
        del out[n:]
        return out

    def _stream(self, tag: str, n: int) -> str:
        w = self.words
        return "".join([w[i] for i in self._indexes(tag, n)])

    def block_text(self, block_id: str, block_size: int) -> str:
        """The text of one block: ``block_size`` words (cached, bounded)."""
        key = f"{block_size}:{block_id}"
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        text = self._stream("b:" + block_id, block_size)
        self._cache[key] = text
        self._cached_chars += len(text)
        while self._cached_chars > _CACHE_CHARS and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cached_chars -= len(old)
        return text

    def _word(self, lay: Layout, pos: int) -> int:
        """Index of the word at ``pos`` of a layout (for comparisons past the shared ids)."""
        if pos < lay.covered:
            b, k = divmod(pos, lay.block_size)
            return self._indexes("b:" + lay.ids[b], k + 1)[k]
        k = pos - lay.covered
        return self._indexes("t:" + lay.key, k + 1)[k]

    # ---- calls -------------------------------------------------------------------------
    def layout(self, key: str, ids: Sequence[str], input_tokens: int, block_size: int) -> Layout:
        """The layout of a call with these block ids and recorded input length."""
        words = max(0, input_tokens - self.framing)
        fit = -(-words // block_size)
        if fit < len(ids):
            ids = ids[:fit]
        return Layout(key, ids, block_size, words, words + self.framing)

    def user_text(self, lay: Layout) -> str:
        """The user message's content."""
        bs = lay.block_size
        full, rest = divmod(lay.covered, bs)
        parts = [self.block_text(b, bs) for b in lay.ids[:full]]
        if rest:
            parts.append(_first_words(self.block_text(lay.ids[full], bs), rest))
        parts.append(self._stream("t:" + lay.key, lay.words - lay.covered))
        parts.append(" ")
        return "".join(parts)

    def messages(self, lay: Layout) -> list[dict[str, str]]:
        """The chat messages of a call."""
        return [dict(self.system), {"role": "user", "content": self.user_text(lay)}]

    def common_words(self, a: Layout, b: Layout, ids: int) -> int:
        """Leading words two layouts share, given that their first ``ids`` block ids agree."""
        n = min(ids * a.block_size, a.covered, b.covered)
        end = min(a.words, b.words, n + _MAX_EXTEND)
        while n < end and self._word(a, n) == self._word(b, n):
            n += 1
        return n

    def common_tokens(self, a: Layout, b: Layout, ids: int) -> int:
        """Leading prompt tokens (unsalted) two layouts share (see ``common_words``)."""
        n = self.common_words(a, b, ids)
        if n == a.words == b.words:
            return a.tokens  # the same prompt
        return self.head + n


def _first_words(text: str, k: int) -> str:
    """The first ``k`` words of a block's text (each word starts with its space)."""
    pos = 0
    for _ in range(k):
        pos = text.find(" ", pos + 1)
        if pos < 0:
            return text
    return text[:pos]


def _common(a: Sequence[int], b: Sequence[int]) -> Sequence[bool]:
    out = []
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        out.append(True)
    return out
