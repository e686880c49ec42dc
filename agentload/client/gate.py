"""Scheduled sends: a request written at its due clock time from whatever code runs then.

A task that sleeps until its due time and then writes resumes one event-loop turn after the
sleeper was woken, and a turn of a loop serving many streams lasts up to milliseconds. So a
scheduled request is handed to a ``Gate`` with its due time instead: the gate runs the write
itself (a ``SendNow``: stamp, then a non-blocking ``send``) as soon as the clock reaches the
due time, from its own timer or from a poll between two socket reads (``netback``'s ``tick``),
and the request's task goes on with the rest of the exchange. Replay's ``waker.Waker`` is the
gate; HTTPS connections (httpx) wait on it and then send as usual.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["Due", "Gate", "SendNow"]

SendNow = Callable[[], int]
"""Stamp the request and write what the socket takes now; how many bytes went."""


class Gate(Protocol):
    """Runs a send at its due time (see the module docstring)."""

    async def fire_at(self, t: int, fn: SendNow) -> int:
        """Run ``fn`` at clock ``t`` (at once when it has passed); its result."""
        ...


Due = tuple[Gate, int]
"""A request's gate and due time (clock ns)."""
