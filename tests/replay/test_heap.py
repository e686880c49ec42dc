"""While a point runs the garbage collector leaves the heap built before it alone and makes no
full collection (``replay.heap.quiet_heap``); after it, both are as they were."""

from __future__ import annotations

import gc
from typing import Any

from agentload.replay.heap import quiet_heap


def _fulls_while(work: Any) -> int:
    """How many full collections the collector made while ``work()`` ran."""
    fulls = 0

    def count(phase: str, info: dict[str, int]) -> None:
        nonlocal fulls
        fulls += phase == "start" and info["generation"] == 2

    gc.callbacks.append(count)
    try:
        work()
    finally:
        gc.callbacks.remove(count)
    return fulls


def _grow() -> list[list[int]]:
    """Objects that live on, enough to call a full collection under the usual thresholds."""
    return [[i] for i in range(400_000)]


def test_a_point_makes_no_full_collection_and_then_the_collector_is_as_it_was() -> None:
    before = gc.get_threshold()
    kept: list[Any] = []
    with quiet_heap():
        assert gc.get_freeze_count() > 0
        assert _fulls_while(lambda: kept.append(_grow())) == 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    # the same growth outside a point does call one (so the check above could fail)
    assert _fulls_while(lambda: kept.append(_grow())) >= 1
