"""A command's leftovers never outlive it: the marker each command carries and the sweep.

Every sandboxed command starts with ``AGENTLOAD_EXEC=<id>`` in its environment, a random id of
its own, which every process it starts inherits, daemons that ``setsid`` out of its process group
included. When the command returns (or times out), the sweep kills, with SIGKILL:

* its process group (the fast path against a fork bomb: one signal reaches the whole group);
* every process whose ``/proc/<pid>/environ`` carries its marker;

and repeats until two scans in a row find no live process with the marker (at most ``ROUNDS``
rounds, and on the host at most ``BUDGET_S``), since a fork bomb forks while it is being killed.
The two scans are 20 ms apart when the command left processes (at once when it left none): a
process in the middle of ``execve`` shows an empty environment for a moment, and one clean scan
let a ``setsid sleep`` through about once in 150 runs under CPU load. Concurrent
commands in one sandbox have different ids, so one command's sweep never touches another's
processes. What it cannot reach: a process that rewrites its own environment and leaves the
process group (the Docker sandbox's caps and removal still bound it).

The Docker sandbox runs ``SWEEP_SH`` inside the container (shell built-ins only, so it works while
the pids cap is exhausted); the local sandbox calls :func:`sweep` on the host, where only
processes that carry the marker are signalled, each through a pidfd opened before the marker is
checked again, so a recycled pid is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid

__all__ = ["BUDGET_S", "MARKER", "ROUNDS", "SETTLE_ROUNDS", "SWEEP_SH", "new_exec_id", "sweep"]

MARKER = "AGENTLOAD_EXEC"
ROUNDS = 50
SETTLE_ROUNDS = 200
BUDGET_S = 2.0

# ``sweep ID PGID``: kill -9 the group PGID (when given) and every process whose environment
# carries MARKER=ID, until two scans in a row find none alive (20 ms apart if it killed any). Built-ins only (kill, read, case, test): no
# fork, so it works while the pids cap is exhausted. dash's ``read`` drops the NUL separators of
# /proc/PID/environ, so the marker is matched as a substring; every id has the same length, so a
# prefix of another id cannot match. dash's ``kill`` takes no ``--``: ``kill -9 -- -PG`` is an
# error there ("Illegal number"), so the group is signalled as ``kill -9 -PG``.
SWEEP_SH = f"""
sweep() {{
  r=0; clean=0; dirty=
  while [ $r -lt {ROUNDS} ]; do
    r=$((r + 1)); live=
    [ -n "$2" ] && kill -9 "-$2"
    for e in /proc/[0-9]*/environ; do
      p=${{e#/proc/}}; p=${{p%/environ}}
      [ "$p" = "$$" ] && continue
      while IFS= read -r l || [ -n "$l" ]; do
        case $l in *"{MARKER}=$1"*) kill -9 "$p" && live=1; break ;; esac
      done < "$e"
    done
    if [ -z "$live" ]; then
      clean=$((clean + 1)); [ $clean -ge 2 ] && return 0
      # it left processes: a moment for an exec in flight (at the pids cap the fork fails: no
      # matter); it left none: the second scan at once
      [ -n "$dirty" ] && sleep 0.02
    else
      clean=0; dirty=1
    fi
  done
  return 1
}} 2>/dev/null
# ``settle PGID``: wait until no process of group PGID is left, dying or a zombie, since both still
# hold a pid of the pids cap until pid 1 reaps them: without it the next command of a sandbox
# whose cap a fork bomb filled could not fork. At most {SETTLE_ROUNDS} scans of /proc/PID/stat
# (its group is field 5, after the ``(comm)`` that may hold spaces), each followed by a short
# ``sleep`` that yields the CPU to the dying (its fork may fail while the cap is full: no matter).
settle() {{
  g=$1; n=0
  while [ $n -lt {SETTLE_ROUNDS} ]; do
    n=$((n + 1)); busy=
    for s in /proc/[0-9]*/stat; do
      IFS= read -r l < "$s" || continue
      set -- ${{l##*) }}
      [ "${{3:-}}" = "$g" ] && {{ busy=1; break; }}
    done
    [ -z "$busy" ] && return 0
    sleep 0.01
  done
  return 1
}} 2>/dev/null
"""


def new_exec_id() -> str:
    """A fresh marker value (32 hex digits: every id has the same length)."""
    return uuid.uuid4().hex


def _environ(pid: str) -> bytes:
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            return fh.read()
    except OSError:  # gone, a kernel thread, or not ours to read
        return b""


def _marked(needle: bytes) -> list[str]:
    """Pids whose environment has the entry ``needle`` (zombies have none: they are skipped)."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    return [p for p in pids if needle in b"\0" + _environ(p)]


def _kill_marked(pid: str, needle: bytes) -> None:
    """SIGKILL ``pid`` only if it still carries the marker once a pidfd pins the process."""
    try:
        fd = os.pidfd_open(int(pid))
    except OSError:  # gone already
        return
    try:
        if needle in b"\0" + _environ(pid):
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
    finally:
        os.close(fd)


def sweep(exec_id: str, pgid: int | None = None) -> int:
    """Kill the process group ``pgid`` and every process carrying ``exec_id`` (on this host).

    Returns the number of rounds that found a marked process still alive (0: nothing was left).
    The caller keeps the group leader unreaped until this returns, so ``pgid`` cannot have been
    recycled.
    """
    needle = f"\0{MARKER}={exec_id}\0".encode()
    deadline = time.monotonic() + BUDGET_S
    clean = dirty = 0
    for _ in range(ROUNDS):
        if pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        live = _marked(needle)
        if time.monotonic() > deadline:
            return dirty + bool(live)
        if not live:
            clean += 1
            if clean == 2:  # two clean scans in a row (the module docstring says why)
                return dirty
            if dirty:  # it left processes: a moment for an exec in flight
                time.sleep(0.02)
            continue
        clean = 0
        dirty += 1
        for pid in live:
            _kill_marked(pid, needle)
    return dirty
