"""A sandbox's disk quota: what a command writes into the session's host folders, watched.

The session's workspace is a host folder (a bind mount in Docker), and a bind mount carries no
quota; neither does the local sandbox's private ``HOME``. (A container's ``--storage-opt size=``
needs a storage driver that supports it, which overlay2 does only on xfs with ``pquota``; the
Docker sandbox's root filesystem is read-only anyway.) So while a command runs, a thread
(``DiskWatch``) measures the folders every ``PERIOD_S`` (``FAST_PERIOD_S`` once past half the
quota, and never more than a tenth of its time spent walking) with ``tree_bytes``: the blocks
allocated to every file and folder (``st_blocks``, so a sparse file counts what it holds, a file
of several hard links once), walking no further once the sum is past the quota; what the folders
held when the sandbox opened (the scenario's own files) does not count. Past it, the
command's processes are killed (the sandbox's ``kill``), its output ends with ``note()`` and its
result's ``over_limit`` says ``"workspace over its disk quota (2.0 GiB)"``, which ends the session
(``disk_quota``).

What it does not do: stop a write between two looks (a command writing as fast as the disk takes
it overshoots by what it writes in one period, tens of MiB), see into a folder the command made
unreadable to agentload (only when agentload does not run as root), or delete what was written.
The private scratch tmpfs (``/tmp`` and friends) are bounded by their own ``size=`` instead.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence

from agentload.outfile import human_bytes

__all__ = [
    "FAST_PERIOD_S",
    "PERIOD_S",
    "DiskWatch",
    "hurry_this_thread",
    "quota_reason",
    "tree_bytes",
]

PERIOD_S = 0.02
FAST_PERIOD_S = 0.005
_NICE = -10
_WALK_SHARE = 0.1
"""The most of its time the watch spends walking (a workspace of many files is walked less often)."""


def quota_reason(limit: int) -> str:
    """The session's end detail when its workspace passed ``limit`` bytes."""
    return f"workspace over its disk quota ({human_bytes(limit)})"


def tree_bytes(roots: Sequence[str], stop_past: int | None = None) -> int:
    """The bytes allocated under ``roots`` (files and folders, symbolic links not followed, each
    inode once); the walk stops as soon as the sum is past ``stop_past``."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = list(roots)
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:  # gone, or not ours to read
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not entry.is_dir(follow_symlinks=False):
                    if (st.st_dev, st.st_ino) in seen:
                        continue
                    seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
                if stop_past is not None and total > stop_past:
                    return total
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
    return total


def hurry_this_thread() -> None:
    """This thread ahead of busy ones (nice -10: allowed as root, else left as it is): a writer
    as fast as the disk (or memory) adds tens of MiB in each slice of CPU a watch waits for."""
    with contextlib.suppress(OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), _NICE)


class DiskWatch:
    """Watches ``roots`` while one command runs; calls ``kill`` once when they hold more than
    ``limit`` bytes beyond ``base`` (what they held when the sandbox opened)."""

    def __init__(
        self, roots: Sequence[str], limit: int, kill: Callable[[], object], base: int = 0
    ) -> None:
        self.roots, self.limit, self.kill, self.base = list(roots), limit, kill, base
        self.tripped: int | None = None
        """The bytes written past ``base`` when it killed the command (None: it did not)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="diskwatch", daemon=True)

    def start(self) -> DiskWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (returns once the thread is done, a kill in progress included)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @property
    def reason(self) -> str | None:
        """``quota_reason`` once it killed the command, else None."""
        return None if self.tripped is None else quota_reason(self.limit)

    def note(self) -> str:
        """The line the command's output ends with when it was killed."""
        return (
            f"agentload: killed: {human_bytes(self.tripped or 0)} written into the workspace, "
            f"past the sandbox's disk quota of {human_bytes(self.limit)}\n"
        )

    def noted(self, output: bytes) -> bytes:
        """``output`` ending with ``note()`` on a line of its own."""
        cut = b"\n" if output and not output.endswith(b"\n") else b""
        return output + cut + self.note().encode()

    def _run(self) -> None:
        hurry_this_thread()
        period = PERIOD_S
        while not self._stop.wait(period):
            t0 = time.thread_time()
            used = tree_bytes(self.roots, self.base + self.limit) - self.base
            if used > self.limit:
                self.tripped = used
                self.kill()
                return
            # The walk's own CPU time, not the wall time: on a busy machine (or with the
            # interpreter lock held elsewhere) a walk of a few files may take long to run, and
            # counting that wait as walking stretched the period to seconds.
            walked = time.thread_time() - t0
            period = FAST_PERIOD_S if used > self.limit // 2 else PERIOD_S
            period = max(period, walked * (1 - _WALK_SHARE) / _WALK_SHARE)
