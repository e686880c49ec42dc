"""Block ids for the exports: a trace's prompt blocks regrouped to a target block size and
numbered as the small ints Weka and Mooncake files carry.

A trace stores each prompt's blocks at ``header.block_size`` tokens (16 for generated traces,
the source's size for imported ones). A ``target``-token block is ``f = target / block_size``
consecutive source blocks, so no re-tokenizing is needed; a block size that does not divide the
target is one ``TraceFormatError``. Only whole target blocks are kept (a trailing group of fewer
than ``f`` source blocks is fresh text to the reader), and at most ``ceil(input / target)`` ids
(the readers' rule) when the input length is smaller than our blocks cover.

``BlockNumbers`` numbers target blocks as a trie: block k's number is keyed by block k-1's
number and the k-th group of source ids, so equal numbers mean an equal prefix whether or not
the source ids are chained (ours are; an import's are what the source wrote). One instance is
one namespace: Weka uses one per output file, Mooncake one for the whole file.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentload.errors import TraceFormatError
from agentload.trace.trace import Trace

__all__ = ["BlockNumbers", "group_factor", "max_ids"]


def group_factor(trace: Trace, target: int) -> int:
    """Source blocks per ``target``-token block; ``TraceFormatError`` when the trace's block
    size does not divide ``target``."""
    size = trace.header.block_size
    if target % size:
        raise TraceFormatError(
            f"{trace.path}: header.block_size: {size}-token blocks cannot be regrouped into "
            f"{target}-token blocks (the export needs a block size that divides {target})"
        )
    return target // size


def max_ids(input_tokens: int, target: int) -> int:
    """The most block ids a call of ``input_tokens`` may carry: ``ceil(input / target)``."""
    return -(-input_tokens // target)


class BlockNumbers:
    """One namespace of block numbers (see the module docstring), counting from ``first``."""

    def __init__(self, first: int = 0) -> None:
        self._numbers: dict[tuple[int, tuple[str, ...]], int] = {}
        self._next = first

    def __len__(self) -> int:
        return len(self._numbers)

    def number(self, blocks: Sequence[str], factor: int, limit: int, scope: str = "") -> list[int]:
        """The numbers of the whole ``factor``-groups of ``blocks``, at most ``limit`` of them.
        ``scope`` keeps ids of different sources apart (an imported trace's ids mean something
        only within that trace)."""
        out: list[int] = []
        parent = -1
        whole = min(len(blocks) // factor, limit)
        for k in range(whole):
            group = tuple(blocks[k * factor : (k + 1) * factor])
            if scope and k == 0:
                group = (scope, *group)
            key = (parent, group)
            n = self._numbers.get(key)
            if n is None:
                n = self._next
                self._next += 1
                self._numbers[key] = n
            out.append(n)
            parent = n
        return out
