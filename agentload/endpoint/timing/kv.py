"""KV-cache block accounting with prefix caching (the simulator's "GPU memory").

Blocks are named by chained token-block hashes (``agentload.trace.prefix``): two prompts that
share a prefix share its blocks. A block referenced by a running sequence is *active*; when the
last sequence releases it, it stays resident as *cached* (reusable by a later prompt with the
same prefix) until an allocation needs its slot, least recently used first (an *eviction*).
Partial prompt blocks and generated tokens take anonymous blocks that are freed at the end.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

__all__ = ["KVCache"]


class KVCache:
    """LRU prefix cache over ``num_blocks`` blocks of ``block_size`` tokens."""

    def __init__(self, num_blocks: int, block_size: int = 16) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._ref: dict[str, int] = {}
        self._cached: OrderedDict[str, None] = OrderedDict()
        self.anon = 0
        self.evictions = 0

    @property
    def active_blocks(self) -> int:
        """Blocks referenced by running sequences."""
        return len(self._ref) + self.anon

    @property
    def cached_blocks(self) -> int:
        """Resident blocks no sequence references (evictable)."""
        return len(self._cached)

    @property
    def usage(self) -> float:
        """Fraction of blocks active (vLLM's ``kv_cache_usage_perc``: cached blocks count as free)."""
        return self.active_blocks / self.num_blocks

    def _free_slots(self) -> int:
        return self.num_blocks - len(self._ref) - self.anon - len(self._cached)

    def resident_prefix(self, hashes: Sequence[str]) -> int:
        """How many leading blocks of ``hashes`` are resident (active or cached)."""
        n = 0
        for h in hashes:
            if h in self._ref or h in self._cached:
                n += 1
            else:
                break
        return n

    def can_allocate(self, hashes: Sequence[str], n_anon: int) -> bool:
        """Whether ``hashes`` plus ``n_anon`` anonymous blocks fit, evicting cached blocks."""
        new = reuse = 0
        for h in hashes:
            if h in self._ref:
                continue
            if h in self._cached:
                reuse += 1
            else:
                new += 1
        return self._free_slots() + len(self._cached) - reuse >= new + n_anon

    def _take_slot(self) -> None:
        if self._free_slots() > 0:
            return
        if not self._cached:
            raise MemoryError("KV cache full")
        self._cached.popitem(last=False)
        self.evictions += 1

    def allocate(self, hashes: Sequence[str], n_anon: int) -> None:
        """Reference ``hashes`` (reusing resident ones) and take ``n_anon`` anonymous blocks.

        Call ``can_allocate`` first: this raises ``MemoryError`` when they do not fit."""
        for h in hashes:
            if h in self._ref:
                self._ref[h] += 1
            elif h in self._cached:
                del self._cached[h]
                self._ref[h] = 1
            else:
                self._take_slot()
                self._ref[h] = 1
        for _ in range(n_anon):
            self._take_slot()
            self.anon += 1

    def grow(self, n_anon: int = 1) -> bool:
        """Take ``n_anon`` more anonymous blocks for generated tokens; False when full."""
        if self._free_slots() + len(self._cached) < n_anon:
            return False
        for _ in range(n_anon):
            self._take_slot()
            self.anon += 1
        return True

    def release(self, hashes: Sequence[str], n_anon: int) -> None:
        """Drop a sequence's references; its prompt blocks stay cached (most recently used).

        Released tail-first, as vLLM frees them, so eviction takes a prefix's last blocks
        before its first ones."""
        for h in reversed(hashes):
            c = self._ref.get(h)
            if c is None:
                continue
            if c > 1:
                self._ref[h] = c - 1
            else:
                del self._ref[h]
                self._cached[h] = None
        self.anon -= n_anon
