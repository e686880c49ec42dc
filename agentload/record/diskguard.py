"""The recording proxy's guard against a full disk: a recorded call goes upstream only while
its trace can take it.

``DiskGuard.refusal()`` is asked before each recorded call is forwarded (``exchange``): the
trace's disk must keep more than ``reserve`` bytes free (``statvfs``: room for what the recorder
writes of the calls already in flight), and the recorder process must not be holding lines that
a write refused (``RecorderProcess.disk_error``). Otherwise the call is not forwarded: the agent
gets a 507 Insufficient Storage in its API's error shape, so no call is answered that the trace
cannot hold. The first refusal is said at once (``warn``, one line naming the disk), the count
at the end (``record.cli.stop_line``). Space freed again lets calls through again.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agentload.outfile import free_bytes, human_bytes

__all__ = ["DiskGuard", "disk_of"]


def disk_of(folder: Path) -> str:
    """``FOLDER (on MOUNTPOINT)``: the folder and the mount point of its disk."""
    mount = folder.resolve()
    while not os.path.ismount(mount) and mount != mount.parent:
        mount = mount.parent
    return f"{folder} (on {mount})" if mount != folder.resolve() else str(folder)


@dataclass
class DiskGuard:
    """Whether the next recorded call may go upstream (see the module docstring)."""

    folder: Path
    """The trace's directory."""
    reserve: int
    """The free bytes below which the disk counts as full."""
    recorder_error: Callable[[], str | None] = lambda: None
    """Why the recorder's last write failed, while it holds lines (None: writes go through)."""
    warn: Callable[[str], None] | None = None
    """Told the first refusal's line."""
    refused: int = 0
    """Calls refused so far."""
    first: str | None = None
    """Why the first one was."""

    def full(self) -> str | None:
        """Why the disk cannot take another call now (None: it can)."""
        why = self.recorder_error()
        if why is not None:
            return f"full: a trace write failed: {why}"
        try:
            free = free_bytes(self.folder)
        except OSError as exc:
            return f"not readable: {exc.strerror or exc}"
        if free < self.reserve:
            return f"nearly full: {human_bytes(free)} free, {human_bytes(self.reserve)} kept in reserve"
        return None

    def refusal(self) -> str | None:
        """None when the call may go; else the message its agent gets (the call is counted)."""
        why = self.full()
        if why is None:
            return None
        self.refused += 1
        disk = disk_of(self.folder)
        if self.first is None:
            self.first = why
            if self.warn is not None:
                self.warn(
                    f"agentload record: the disk of {disk} is {why}: new calls are "
                    "refused with 507 until space is freed; every call answered is in the trace"
                )
        return (
            f"agentload record: the disk of the trace, {disk}, is {why}; this call was "
            "not forwarded, so that every answered call is recorded"
        )
