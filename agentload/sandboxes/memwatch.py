"""The local sandbox's memory limit: the resident memory of a command's processes, watched.

``RLIMIT_AS`` caps address space, not memory: V8 (Node) and Bun reserve tens of GiB of address
space they never touch (a WebAssembly memory alone reserves its guard region), so an agent built
on them died at start under a 2 GiB ``RLIMIT_AS`` (``WebAssembly.instantiate(): Out of memory``)
while using a few hundred MiB. The local sandbox limits what is **resident** instead, as Docker's
cgroup does: a thread per command sums, every ``PERIOD_S`` (``FAST_PERIOD_S`` once past half the
limit), the resident anonymous and shared-memory pages (``RssAnon`` + ``RssShmem`` of
``/proc/PID/status``) of every process of the command, and when the sum passes the limit it
kills them all (``reap.sweep``) and the command's result says why (``MemoryWatch.note``).

A process is the command's when it carries the command's marker in its environment (daemons that
``setsid`` included), is in the command's session (one that cleared its environment) or, for a
confined command (``confine``), lives in its pid namespace. Each pid
is classified once, when first seen; one whose environment reads empty (caught in ``execve``, or a
kernel thread, a zombie, another user's) is looked at once more before it counts as not ours.

What it does not do: stop an allocation between two looks (a process that writes memory faster
than the period lets it overshoot by what it writes in one period, tens of MiB for a tight
loop), count a page shared between two processes once (a forked child's copy-on-write pages count
in both: the limit errs on the strict side), or count files written to a tmpfs. (cgroups would
do all three, but the cgroup v2 memory controller is rarely delegated to an unprivileged user,
and the sandbox must work without root.)
"""

from __future__ import annotations

import os
import threading

from agentload.sandboxes.diskwatch import hurry_this_thread
from agentload.sandboxes.reap import MARKER, sweep

__all__ = ["FAST_PERIOD_S", "PERIOD_S", "MemoryWatch", "resident_bytes"]

PERIOD_S = 0.05
FAST_PERIOD_S = 0.01
_PAGE_FIELDS = (b"RssAnon:", b"RssShmem:")


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:  # gone, or not ours to read
        return b""


def _session_of(pid: str) -> int | None:
    """The session id of ``pid`` (field 6 of ``/proc/PID/stat``, after the ``(comm)`` that may
    hold spaces), or None when it is gone."""
    stat = _read(f"/proc/{pid}/stat")
    fields = stat[stat.rfind(b")") + 2 :].split()
    return int(fields[3]) if len(fields) > 3 else None


def resident_bytes(pid: int | str) -> int:
    """The resident anonymous and shared-memory bytes of ``pid`` (0 when it is gone)."""
    total = 0
    for line in _read(f"/proc/{pid}/status").splitlines():
        if line.startswith(_PAGE_FIELDS):
            total += int(line.split()[1]) * 1024  # "RssAnon:    1234 kB"
    return total


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB"


class MemoryWatch:
    """Watches the command marked ``exec_id`` whose session leader is ``leader``; kills all its
    processes when their resident memory passes ``limit`` bytes. The caller keeps ``leader``
    unreaped until ``stop()`` returned (``reap.sweep``'s rule)."""

    def __init__(self, exec_id: str, leader: int, limit: int, pidns: str | None = None) -> None:
        self.exec_id, self.leader, self.limit, self.pidns = exec_id, leader, limit, pidns
        self.needle = f"\0{MARKER}={exec_id}\0".encode()
        self.peak = 0
        self.tripped: int | None = None
        """The resident bytes seen when it killed the command (None: it did not)."""
        self._known: dict[str, bool | None] = {}
        """pid → whether it is the command's (None: its environment read empty once)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"memwatch-{leader}", daemon=True)

    def start(self) -> MemoryWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop watching (returns once the thread is done, a kill in progress included)."""
        self._stop.set()
        self._thread.join()

    def note(self) -> str:
        """The line the command's output ends with when it was killed."""
        return (
            f"agentload: killed: the command's processes held {_mib(self.tripped or 0)} "
            f"resident, past the sandbox's memory limit of {_mib(self.limit)}\n"
        )

    def _run(self) -> None:
        hurry_this_thread()
        period = PERIOD_S
        while not self._stop.wait(period):
            used = sum(resident_bytes(pid) for pid in self._members())
            self.peak = max(self.peak, used)
            if used > self.limit:
                self.tripped = used
                sweep(self.exec_id, self.leader)
                return
            period = FAST_PERIOD_S if used > self.limit // 2 else PERIOD_S

    def _in_pidns(self, pid: str) -> bool:
        """Whether ``pid`` lives in the confined command's pid namespace (if it has one)."""
        if self.pidns is None:
            return False
        try:
            return os.readlink(f"/proc/{pid}/ns/pid") == self.pidns
        except OSError:
            return False

    def _members(self) -> list[str]:
        """The command's live processes (each pid classified when first seen)."""
        try:
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return []
        known = {p: self._known[p] for p in pids if p in self._known}
        for pid in pids:
            if known.get(pid) is not None:
                continue
            if _session_of(pid) == self.leader or self._in_pidns(pid):
                known[pid] = True
                continue
            environ = _read(f"/proc/{pid}/environ")
            if environ:
                known[pid] = self.needle in b"\0" + environ
            else:  # empty a second time: not one of ours
                known[pid] = False if pid in known else None
        self._known = known
        return [p for p, mine in known.items() if mine]
