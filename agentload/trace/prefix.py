"""Chained token-block hashes of prompts, computed incrementally.

Block k's hash covers tokens 0..B(k+1) of the prompt (B = block size, 16 natively): it is
blake2b-64 over (hash of block k-1 || token ids of block k). Equal hashes mean an equal prefix,
so prefix reuse is measurable without content. Only full blocks are hashed.

``PrefixHasher`` resumes from the longest prompt prefix it has already hashed (keyed by the
sequence of piece ids: tools blob, message blobs), so hashing a call whose history was hashed
before costs O(new tokens). A prompt ends with a piece that the next call does not repeat (the
reply priming), so besides the state after the whole prompt the hasher keeps checkpoints at
earlier piece boundaries (``checkpoints``): the next call resumes from the state before the
priming. Memory is bounded by the number of block references the kept states hold.

``hash_prompt`` is the one path from a chat request (tools + messages + the reply priming) to its
content ids, token count and blocks; the recorder and the simulator both use it, so the blocks a
trace records are the blocks the simulator's KV model caches.
"""

from __future__ import annotations

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Callable, Container, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from agentload.hashing import content_id
from agentload.tokenizer import ChatTokenCounter

__all__ = [
    "PrefixHasher",
    "PrefixState",
    "PromptPrefix",
    "chain_blocks",
    "common_blocks",
    "hash_prompt",
    "seen_blocks",
]


def _h(prev: bytes, ids: Sequence[int]) -> bytes:
    return hashlib.blake2b(prev + array("I", ids).tobytes(), digest_size=8).digest()


def chain_blocks(token_ids: Sequence[int], block_size: int = 16) -> list[str]:
    """Block hashes of a whole token sequence, from scratch (reference implementation)."""
    out: list[str] = []
    prev = b""
    for i in range(0, len(token_ids) - block_size + 1, block_size):
        prev = _h(prev, token_ids[i : i + block_size])
        out.append(prev.hex())
    return out


def _leading(n: int, holds: Callable[[int], bool]) -> int:
    """How many of positions 0..n-1 satisfy ``holds`` from the start. Chained hashes make it a
    prefix property (equal block k means equal blocks 0..k), so a binary search finds it."""
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            lo = mid + 1
        else:
            hi = mid
    return lo


def seen_blocks(blocks: Sequence[Hashable], seen: Container[Hashable]) -> int:
    """Leading blocks of a prompt's chained block list that are in ``seen`` (the blocks of
    earlier prompts): the prefix those prompts already hold."""
    return _leading(len(blocks), lambda k: blocks[k] in seen)


def common_blocks(a: Sequence[Hashable], b: Sequence[Hashable]) -> int:
    """Leading blocks two prompts' chained block lists share."""
    return _leading(min(len(a), len(b)), lambda k: a[k] == b[k])


@dataclass(frozen=True)
class PrefixState:
    """Hash state after a sequence of pieces: its blocks, the leftover partial block."""

    blocks: tuple[str, ...]
    last: bytes
    leftover: tuple[int, ...]
    tokens: int
    owner: str | None  # the call id that produced this state, if any


class PrefixHasher:
    """Incremental chained block hashing over a sequence of token-id pieces."""

    def __init__(
        self, block_size: int = 16, max_states: int = 4096, max_blocks: int = 4_000_000
    ) -> None:
        self.block_size = block_size
        self._states: OrderedDict[bytes, PrefixState] = OrderedDict()
        self._max = max_states
        self._max_blocks = max_blocks
        self._held = 0  # block references held by the kept states

    @staticmethod
    def _keys(piece_keys: Sequence[str]) -> list[bytes]:
        keys = []
        k = b""
        for pk in piece_keys:
            k = hashlib.blake2b(k + pk.encode(), digest_size=16).digest()
            keys.append(k)
        return keys

    def hash(
        self,
        piece_keys: Sequence[str],
        piece_ids: Sequence[Sequence[int]] | None = None,
        *,
        get_ids: object = None,
        owner: str | None = None,
        checkpoints: Sequence[int] = (-2, -1),
    ) -> tuple[PrefixState, PrefixState | None, int]:
        """Hash a prompt given as pieces (``piece_keys[i]`` names piece i's content).

        Token ids come from ``piece_ids[i]``, or lazily from ``get_ids(i)`` so that pieces
        already hashed are never tokenized again. The states after the pieces named by
        ``checkpoints`` (indexes, negative from the end; default: the whole prompt and the
        prompt without its last piece, the reply priming) are kept for later calls to resume
        from. Returns ``(state, base, start)``: the new state, the
        kept state it resumed from (or None) and the piece index it resumed at.
        """
        keys = self._keys(piece_keys)
        base: PrefixState | None = None
        start = 0
        for i in range(len(keys) - 1, -1, -1):
            st = self._states.get(keys[i])
            if st is not None:
                base, start = st, i + 1
                self._states.move_to_end(keys[i])
                break
        blocks = list(base.blocks) if base else []
        last = base.last if base else b""
        buf = list(base.leftover) if base else []
        tokens = base.tokens if base else 0
        bs = self.block_size
        n = len(keys)
        keep = {c % n for c in checkpoints if -n <= c < n} if n else set()
        state = PrefixState(tuple(blocks), last, tuple(buf), tokens, owner)
        for i in range(start, n):
            ids = piece_ids[i] if piece_ids is not None else get_ids(i)  # type: ignore[operator]
            tokens += len(ids)
            buf.extend(ids)
            n_full = len(buf) // bs * bs
            for j in range(0, n_full, bs):
                last = _h(last, buf[j : j + bs])
                blocks.append(last.hex())
            del buf[:n_full]
            if i in keep or i == n - 1:
                state = PrefixState(tuple(blocks), last, tuple(buf), tokens, owner)
                if i in keep:
                    self._keep(keys[i], state)
        return state, base, start

    def _keep(self, key: bytes, state: PrefixState) -> None:
        old = self._states.pop(key, None)
        if old is not None:
            self._held -= len(old.blocks)
        self._states[key] = state
        self._held += len(state.blocks)
        while len(self._states) > 1 and (
            len(self._states) > self._max or self._held > self._max_blocks
        ):
            _, dropped = self._states.popitem(last=False)
            self._held -= len(dropped.blocks)


@dataclass(frozen=True)
class PromptPrefix:
    """A chat prompt's content ids and block state (see ``hash_prompt``)."""

    message_ids: list[str]
    """Content id of each message, in order."""
    tools_id: str | None
    """Content id of the tools list, None without tools."""
    state: PrefixState
    """The state after the whole prompt: ``state.tokens`` tokens, ``state.blocks``."""
    base: PrefixState | None
    """The kept state it resumed from (None: hashed from scratch)."""


def hash_prompt(
    hasher: PrefixHasher,
    counter: ChatTokenCounter,
    messages: Sequence[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    *,
    owner: str | None = None,
    message_ids: Sequence[str] | None = None,
) -> PromptPrefix:
    """Hash a chat prompt as the pieces tools, each message, the reply priming (keyed by their
    content ids; the priming by a constant). The state before the priming is kept too: the next
    call of the same conversation resumes there. Token ids are computed only for pieces not
    hashed before. ``message_ids``: the messages' content ids when the caller has them."""
    keys: list[str] = []
    getters: list[Callable[[], tuple[int, ...]]] = []
    tools_id = None
    if tools:
        tools_id = content_id(tools)
        keys.append(tools_id)
        getters.append(lambda t=tools, k=tools_id: counter.ids_for_tools(t, k))  # type: ignore[misc]
    mids = list(message_ids) if message_ids is not None else [content_id(m) for m in messages]
    for m, mid in zip(messages, mids, strict=True):
        keys.append(mid)
        getters.append(lambda m=m, k=mid: counter.ids_for_message(m, k))  # type: ignore[misc]
    keys.append("priming")
    getters.append(lambda: counter.priming_ids)
    state, base, _ = hasher.hash(
        keys, get_ids=lambda i: getters[i](), owner=owner, checkpoints=(-2, -1)
    )
    return PromptPrefix(mids, tools_id, state, base)
