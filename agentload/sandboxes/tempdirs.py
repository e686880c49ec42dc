"""Temporary directories that name their owner, so ``sandbox cleanup`` can tell a crashed run's
leftovers from a live run's.

``owned_tempdir(prefix)`` makes ``<tempdir>/<prefix><pid>-<start>-<host>-<random>``: the creating
process's pid and its start time (clock ticks since boot, field 22 of ``/proc/<pid>/stat``), so a
pid that was recycled by another process does not pass for the owner, and 6 hex digits of its host
name, so a directory made in another host or container that shares the temp dir is never judged
by this machine's processes. ``generate``'s workspaces
(``agentload-ws-``) and the local sandbox's private ``HOME`` (``agentload-sandbox-``) are made
this way; a normal end, an exception, Ctrl-C or SIGTERM removes them, and a ``kill -9`` leaves
them for :func:`cleanup_dirs`, which removes those whose owner is gone and keeps the others.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from agentload.hashing import content_id

__all__ = [
    "PREFIXES",
    "SANDBOX_HOMES",
    "WORKSPACES",
    "DirsReport",
    "cleanup_dirs",
    "owned_tempdir",
    "owner_of",
    "pid_alive",
]

WORKSPACES = "agentload-ws-"
SANDBOX_HOMES = "agentload-sandbox-"
PREFIXES = (WORKSPACES, SANDBOX_HOMES)
_OWNED = re.compile(r"^(?:agentload-ws-|agentload-sandbox-)(\d+)-(\d+)-([0-9a-f]{6})-")


def _start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": field 3 onwards
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def _host() -> str:
    return content_id(socket.gethostname())[:6]


def owned_tempdir(prefix: str) -> Path:
    """A new private directory in the temp dir whose name says which process made it."""
    pid = os.getpid()
    owner = f"{pid}-{_start_ticks(pid) or 0}-{_host()}"
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner}-"))


def owner_of(path: Path) -> tuple[int, int] | None:
    """``(pid, start ticks)`` from the name of a directory owned by a process of this host;
    None for any other name."""
    m = _OWNED.match(path.name)
    if m is None or m.group(3) != _host():
        return None
    return int(m.group(1)), int(m.group(2))


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _alive(pid: int, start: int) -> bool:
    ticks = _start_ticks(pid)
    if ticks is not None:
        return start == 0 or ticks == start
    return pid_alive(pid)  # no /proc entry: ask the kernel directly


@dataclass
class DirsReport:
    """What ``cleanup_dirs`` did with each directory of ours in the temp dir."""

    removed: list[Path] = field(default_factory=list)
    kept_live: list[Path] = field(default_factory=list)
    """Their owner is running."""
    kept_unknown: list[Path] = field(default_factory=list)
    """No owner of this host in the name (made by an agentload before owners were recorded, or
    on another host or container), or not removable: left for a person to judge."""


def cleanup_dirs(tmp: Path | None = None) -> DirsReport:
    """Remove the ``agentload-ws-*`` and ``agentload-sandbox-*`` directories in ``tmp`` (default:
    the temp dir) whose owning process is gone; never one whose owner runs."""
    base = Path(tmp) if tmp is not None else Path(tempfile.gettempdir())
    report = DirsReport()
    try:
        entries = sorted(base.iterdir())
    except OSError:
        return report
    for path in entries:
        if not path.name.startswith(PREFIXES) or path.is_symlink() or not path.is_dir():
            continue
        owner = owner_of(path)
        if owner is None:
            report.kept_unknown.append(path)
        elif _alive(*owner):
            report.kept_live.append(path)
        else:
            try:
                shutil.rmtree(path)
            except OSError:
                report.kept_unknown.append(path)
                continue
            report.removed.append(path)
    return report
