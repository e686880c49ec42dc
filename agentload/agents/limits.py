"""How a session ends: ``SessionEnd(reason)`` steers the agent loop out, mini-swe-agent style.

One mechanism: the orchestrator graph returning means ``done``; every other reason is a
``SessionEnd`` raised where it is noticed (a node, the client, the deadline), or the exception
that ended the session (``interrupted``, ``error``). ``run_session`` records it in ``finally:``.

The reasons are ``EndReason`` (the trace format's: ``trace.schema``; recorded as
``session.end_reason``, its value).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from agentload.trace.schema import EndReason

__all__ = ["DEFAULT_CALL_TIMEOUT_S", "Deadline", "EndReason", "SessionEnd"]

DEFAULT_CALL_TIMEOUT_S: Final = 300.0
"""The most one attempt of a call may take (``--call-timeout``), first byte to last."""


class SessionEnd(Exception):
    """Ends a session cleanly with a recorded reason; ``cause`` says more where one reason has
    several (an ``endpoint_error`` after the retries, or a request the endpoint will refuse
    again: ``agentload.client.failures.verdict``)."""

    def __init__(self, reason: EndReason, detail: str = "", *, cause: str | None = None) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.cause = cause


class Deadline:
    """A wall-clock budget on the monotonic ns clock; ``check()`` raises when it is spent."""

    def __init__(
        self, budget_s: float | None, clock: Callable[[], int] = time.perf_counter_ns
    ) -> None:
        self.clock = clock
        self.start_ns = clock()
        self.end_ns = None if budget_s is None else self.start_ns + int(budget_s * 1e9)

    def remaining_s(self) -> float | None:
        if self.end_ns is None:
            return None
        return max(0.0, (self.end_ns - self.clock()) / 1e9)

    def check(self) -> None:
        if self.end_ns is not None and self.clock() >= self.end_ns:
            raise SessionEnd(EndReason.WALL_BUDGET, "the session's wall-clock budget is spent")
