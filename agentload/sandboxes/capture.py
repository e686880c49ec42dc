"""What the sandboxes share around a command: the check before it runs, the environment it starts
from, and the bounded output capture (keeps the head and the tail, counts the rest)."""

from __future__ import annotations

import select
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentload.errors import SandboxError

__all__ = ["DEFAULT_CAPTURE_BYTES", "Capture", "base_env", "check_command", "pump"]

DEFAULT_CAPTURE_BYTES = 8 * 1024 * 1024


def check_command(sandbox_id: str, closed: bool, argv: Sequence[str]) -> None:
    """SandboxError unless the sandbox is open and ``argv`` names a command."""
    if closed:
        raise SandboxError(f"sandbox {sandbox_id} is closed")
    if not argv:
        raise SandboxError("empty command")


def pump(
    source: Any,
    read: Callable[[], bytes],
    feed: Callable[[bytes], None],
    deadline_ns: int,
    until: int | None = None,
) -> bool:
    """Feed what ``read()`` returns whenever ``source`` (a file descriptor or socket) is readable,
    until end of file (True) or ``deadline_ns`` on the perf_counter clock (False). A source that
    is closed under us (the sandbox is closing) counts as end of file.

    With ``until`` (a pidfd: readable once its process exited), the end is that process's exit
    instead (True): a source that reaches end of file first is no longer read, and one that stays
    open (a leftover child holds it) does not keep the caller waiting."""
    sources = [source]
    while True:
        remaining = (deadline_ns - time.perf_counter_ns()) / 1e9
        if remaining <= 0:
            return False
        waiting = [*sources, *(() if until is None else (until,))]
        try:
            ready, _, _ = select.select(waiting, [], [], min(remaining, 1.0))
            if until is not None and until in ready:
                return True
            if not ready:
                continue
            data = read()
        except (OSError, ValueError):
            data = b""
        if data:
            feed(data)
        elif until is None:
            return True
        else:
            sources = []


def base_env(home: str) -> dict[str, str]:
    """The environment every sandboxed command starts from (nothing of the user's leaks in).

    No bytecode is written: the workspace stays clean for ``git diff``, and reading the
    interpreter's own cached stdlib bytecode is faster than a fresh per-sandbox cache."""
    return {
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }


class Capture:
    """Collects a command's output up to ``limit`` bytes: the first and last halves are kept."""

    def __init__(self, limit: int = DEFAULT_CAPTURE_BYTES) -> None:
        self.half = max(1, limit // 2)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        """Append ``data``."""
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def dropped(self) -> int:
        """Bytes produced but not kept."""
        return self.total - len(self.head) - len(self.tail)

    def output(self) -> bytes:
        """What was kept, with a marker where bytes were dropped."""
        if not self.dropped:
            return bytes(self.head + self.tail)
        marker = f"\n[... {self.dropped} bytes of output dropped by the sandbox ...]\n".encode()
        return bytes(self.head) + marker + bytes(self.tail)
