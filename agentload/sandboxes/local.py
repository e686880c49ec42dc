"""The local sandbox: a subprocess in the workspace, used only when no Docker daemon answers.

Same interface and timeouts as the Docker sandbox, weaker isolation: each command runs in its own
session (process group) with a clean environment (nothing of the user's, API keys included), no
core files and files of at most 1 GiB. The memory cap is on what the command's processes hold
**resident** (``memwatch``: past it they are killed, exit 137, and the output's last line says
so), not on their address space: ``RLIMIT_AS`` killed Node and Bun agents, which reserve far more
than they use. There is **no network isolation and no pids cap** (``RLIMIT_NPROC`` counts every
process of the user, not the sandbox's), which is why ``auto`` announces the fallback with a
warning line.

**Nothing a command started outlives it.** ``exec`` returns when the command's own process exits
(or times out), not when the last holder of its output lets go; before it returns, ``reap.sweep``
kills the command's process group and every process that carries the command's marker in its
environment, daemons that ``setsid`` included. Only those processes are ever signalled: the marker
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
from agentload.sandboxes.memwatch import MemoryWatch
from agentload.sandboxes.reap import MARKER, new_exec_id, sweep
from agentload.sandboxes.tempdirs import SANDBOX_HOMES, owned_tempdir
from agentload.scenarios.models import SandboxSpec

__all__ = ["LocalSandbox", "path_env"]

_FSIZE = 1 << 30


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
    ) -> None:
        root = Path(workspace).resolve()
        if not root.is_dir():
            raise SandboxError(f"workspace {root} is not a directory")
        self.workspace = root
        self.workdir = str(root)
        self.session_id = session_id
        self.id = f"local-{session_id}"
        self._key = f"{self.id}-{uuid.uuid4().hex[:8]}"
        self._memory = settings.memory_bytes()
        self._capture_bytes = capture_bytes
        self._tmp = str(owned_tempdir(SANDBOX_HOMES))  # a kill -9 leaves it to `sandbox cleanup`
        self.home = self._tmp
        """The commands' private ``HOME`` (and ``TMPDIR``)."""
        self._env = {**base_env(self._tmp), "PATH": path_env()}
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
        start = time.perf_counter_ns()
        proc = self._spawn(argv, env, marker, start)
        if isinstance(proc, ExecResult):
            return proc
        with self._lock:
            self._procs[proc.pid] = marker
        cap = Capture(self._capture_bytes)
        assert proc.stdout is not None
        out = proc.stdout.fileno()
        pidfd = -1
        watch = MemoryWatch(marker, proc.pid, self._memory).start()
        try:
            pidfd = os.pidfd_open(proc.pid)  # readable once the command's own process exited
            finished = _pump(out, cap, start + int(timeout_s * 1e9), until=pidfd)
            watch.stop()
            # the leader is not reaped yet, so its process group id cannot have been recycled
            sweep(marker, proc.pid)
            _pump(out, cap, time.perf_counter_ns() + 1_000_000_000)  # what is left in the pipe
            try:
                code: int | None = proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:  # unkillable (uninterruptible sleep): give up on it
                code = None
        except OSError as exc:  # no pidfd (out of file descriptors): the command cannot run
            watch.stop()
            sweep(marker, proc.pid)
            proc.wait()
            raise SandboxError(f"sandbox {self.id}: cannot watch the command: {exc}") from None
        finally:
            watch.stop()  # (already stopped, but for an exception on the way)
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
        return ExecResult(code, output, not finished, start, end, cap.dropped)

    def _spawn(
        self, argv: Sequence[str], env: Mapping[str, str] | None, marker: str, start: int
    ) -> subprocess.Popen[bytes] | ExecResult:
        """The command started in its own session, marked; a shell's answer when it cannot
        start."""
        try:
            return subprocess.Popen(
                list(argv),
                cwd=self.workdir,
                env={**self._env, **(env or {}), MARKER: marker},
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
            return ExecResult(missing, msg, False, start, end)

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
