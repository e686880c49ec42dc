"""The local sandbox: a subprocess in the workspace, used when no Docker daemon answers or when
asked for (``docs/sandboxes.md`` has a table of what each sandbox promises).

Same interface and timeouts as the Docker sandbox. Each command runs in its own session (process
group) with a clean environment (nothing of the user's, API keys included), no core files and
files of at most 1 GiB. The memory cap is on what the command's processes hold **resident**
(``memwatch``: past it they are killed, exit 137, and the output's last line says so), not on
their address space: ``RLIMIT_AS`` killed Node and Bun agents, which reserve far more than they
use. There is no pids cap (``RLIMIT_NPROC`` counts every process of the user). The disk quota
is on what the commands write into the workspace and the private ``HOME`` (``diskwatch``: past it
the command is killed, exit 137, and its result's ``over_limit`` says why); a confined command's
private tmpfs are each sized at most the quota (and the memory cap).

Two modes:

* **confined** (``egress`` given: ``generate --agent``): every command runs in its own mount,
  network and pid namespaces (``confine``): the host's files read-only but for the workspace and
  the private ``HOME``, private ``/tmp``, ``/var/tmp`` and ``/dev/shm``, ``/run`` and the Docker
  socket masked, only ``lo`` up with the proxy's ``127.0.0.1:PORT`` bridged in, ``nobody`` when
  agentload runs as root; when the command's own process exits the kernel kills every process
  left in its pid namespace. Where the kernel refuses the namespaces, opening one is
  ``SandboxError``.
* **unconfined** (our own tools): a plain subprocess with **no network or file isolation**, which
  is why ``auto`` announces the fallback with a warning line.

**Nothing a command started outlives it.** ``exec`` returns when the command's own process exits
(or times out), not when the last holder of its output lets go; before it returns, ``reap.sweep``
kills the command's process group and every process that carries the command's marker in its
environment, daemons that ``setsid`` included (confined: the pid namespace's end has killed them
all already). Only those processes are ever signalled: the marker
is a random id of this one command, checked again through a pidfd just before the kill, and the
group leader stays unreaped until the sweep is done so its group id cannot be recycled. Concurrent
commands have different markers and never kill each other's processes. (Linux: it reads ``/proc``
and uses pidfds.)
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentload.errors import SandboxError
from agentload.protocols import ExecResult
from agentload.sandboxes import lifecycle
from agentload.sandboxes.capture import (
    DEFAULT_CAPTURE_BYTES,
    Capture,
    base_env,
    check_command,
    pump,
)
from agentload.sandboxes.confine import Bridge, start, unavailable
from agentload.sandboxes.diskwatch import DiskWatch, tree_bytes
from agentload.sandboxes.memwatch import MemoryWatch
from agentload.sandboxes.reap import MARKER, new_exec_id, sweep
from agentload.sandboxes.tempdirs import SANDBOX_HOMES, owned_tempdir
from agentload.scenarios.models import SandboxSpec

__all__ = ["LocalSandbox", "path_env"]

_FSIZE = 1 << 30
_NOBODY = 65534


def path_env() -> str:
    """The local sandbox's ``PATH``: the interpreter's folders and the system's, not the user's."""
    dirs = [str(Path(sys.base_prefix) / "bin"), str(Path(sys.executable).parent)]
    dirs += ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(dirs))


class LocalSandbox:
    """Commands as local subprocesses. Satisfies ``agentload.protocols.Sandbox``."""

    kind = "local"

    def __init__(
        self,
        workspace: Path,
        settings: SandboxSpec,
        session_id: str,
        *,
        capture_bytes: int = DEFAULT_CAPTURE_BYTES,
        egress: Sequence[int] | None = None,
        mounts: Mapping[str, str] | None = None,
    ) -> None:
        """``egress``: confine every command (see the module docstring), the host's
        ``127.0.0.1:PORT`` of each port reachable inside at the same address; None: unconfined.
        ``mounts``: host folders a confined command sees read-only (those mounted at their own
        path; the rest of the host stays visible too, but ``/tmp``, ``/var/tmp`` are masked)."""
        root = Path(workspace).resolve()
        if not root.is_dir():
            raise SandboxError(f"workspace {root} is not a directory")
        why = None if egress is None else unavailable()
        if why is not None:
            raise SandboxError(
                f"the local sandbox cannot confine a command here ({why}): "
                "use --sandbox docker (start Docker: scripts/docker-up.sh) or run as root"
            )
        self.egress = None if egress is None else tuple(egress)
        """Confined: the loopback ports bridged in (read at each ``exec``); None: unconfined."""
        self._readable = [s for s, d in (mounts or {}).items() if s == d and Path(s).is_dir()]
        self.workspace = root
        self.workdir = str(root)
        self.session_id = session_id
        self.id = f"local-{session_id}"
        self._key = f"{self.id}-{uuid.uuid4().hex[:8]}"
        self._memory = settings.memory_bytes()
        self._disk = settings.disk_bytes()
        self._capture_bytes = capture_bytes
        self._tmp = str(owned_tempdir(SANDBOX_HOMES))  # a kill -9 leaves it to `sandbox cleanup`
        self.home = self._tmp
        if self.egress is not None and os.geteuid() == 0:  # the confined command runs as nobody
            os.chown(self._tmp, _NOBODY, _NOBODY)
        """The commands' private ``HOME`` (and ``TMPDIR``)."""
        self._env = {**base_env(self._tmp), "PATH": path_env()}
        self._disk_base = tree_bytes([self.workdir, self._tmp])
        """What the watched folders held at the start (the scenario's files: not counted)."""
        self._procs: dict[int, str] = {}  # pid of each running command -> its marker
        self._lock = threading.RLock()
        self._closed = False
        lifecycle.register(self._key, self.close)

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _limits() -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (_FSIZE, _FSIZE))

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecResult:
        """Run ``argv`` in the workspace; killed after ``timeout_s``. Returns once the command's
        process has exited and every process it started is dead."""
        check_command(self.id, self._closed, argv)
        marker = new_exec_id()
        t0 = time.perf_counter_ns()
        spawned = self._spawn(argv, env, marker, t0)
        if isinstance(spawned, ExecResult):
            return spawned
        proc, bridge, pidns = spawned
        with self._lock:
            self._procs[proc.pid] = marker
        cap = Capture(self._capture_bytes)
        assert proc.stdout is not None
        out = proc.stdout.fileno()
        pidfd = -1
        watch = MemoryWatch(marker, proc.pid, self._memory, pidns).start()
        roots = [self.workdir, self._tmp]
        disk = DiskWatch(roots, self._disk, lambda: sweep(marker, proc.pid), self._disk_base)
        disk.start()
        try:
            pidfd = os.pidfd_open(proc.pid)  # readable once the command's own process exited
            finished = _pump(out, cap, t0 + int(timeout_s * 1e9), until=pidfd)
            watch.stop()
            disk.stop()
            # the leader is not reaped yet, so its process group id cannot have been recycled
            sweep(marker, proc.pid)
            _pump(out, cap, time.perf_counter_ns() + 1_000_000_000)  # what is left in the pipe
            try:
                code: int | None = proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:  # unkillable (uninterruptible sleep): give up on it
                code = None
        except OSError as exc:  # no pidfd (out of file descriptors): the command cannot run
            watch.stop()
            disk.stop()
            sweep(marker, proc.pid)
            proc.wait()
            raise SandboxError(f"sandbox {self.id}: cannot watch the command: {exc}") from None
        finally:
            watch.stop()  # (already stopped, but for an exception on the way)
            disk.stop()
            if bridge is not None:
                bridge.close()
            if pidfd >= 0:
                os.close(pidfd)
            proc.stdout.close()
            with self._lock:
                self._procs.pop(proc.pid, None)
        end = time.perf_counter_ns()
        if code is not None and code < 0:
            code = 128 - code  # killed by a signal: report it the way a shell (and Docker) does
        output = cap.output()
        if watch.tripped is not None:
            output += watch.note().encode()
        if disk.tripped is not None:
            output = disk.noted(output)
            code = 137
        return ExecResult(code, output, not finished, t0, end, cap.dropped, disk.reason)

    def _spawn(
        self, argv: Sequence[str], env: Mapping[str, str] | None, marker: str, t0: int
    ) -> tuple[subprocess.Popen[bytes], Bridge | None, str | None] | ExecResult:
        """The command started in its own session, marked (confined, with its bridge and pid
        namespace, when ``egress`` is set); a shell's answer when it cannot start."""
        full_env = {**self._env, **(env or {}), MARKER: marker}
        if self.egress is not None:
            tmpfs = min(self._memory, self._disk)  # each private tmpfs: within both caps
            try:
                c = start(
                    argv,
                    cwd=self.workdir,
                    env=full_env,
                    writable=[self.workdir, self._tmp],
                    readable=self._readable,
                    ports=self.egress,
                    tmpfs_bytes=tmpfs,
                    preexec=self._limits,
                )
            except SandboxError as exc:
                raise SandboxError(f"sandbox {self.id}: {exc}") from None
            return c.proc, c.bridge, c.pidns
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=self.workdir,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=self._limits,  # only setrlimit: safe with threads
            )
        except OSError as exc:  # command not found / not executable: what a shell would say
            end = time.perf_counter_ns()
            msg = f"{argv[0]}: {exc.strerror}\n".encode()
            missing = 127 if isinstance(exc, FileNotFoundError) else 126
            return ExecResult(missing, msg, False, t0, end)
        return proc, None, None

    def close(self) -> None:
        """Kill every command still running and remove the private temp directory."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = list(self._procs.items())
        lifecycle.unregister(self._key)
        for _pid, marker in running:  # the marker alone: the exec thread may reap the leader now
            sweep(marker)
        shutil.rmtree(self._tmp, ignore_errors=True)


def _pump(fd: int, cap: Capture, deadline_ns: int, until: int | None = None) -> bool:
    """Read ``fd`` into ``cap`` until EOF, or the exit of ``until``'s process (True), or the
    deadline (False)."""
    return pump(fd, lambda: os.read(fd, 65536), cap.feed, deadline_ns, until)
