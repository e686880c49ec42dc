"""The local sandbox: a subprocess in the workspace, used only when no Docker daemon answers.

Same interface and timeouts as the Docker sandbox, weaker isolation: each command runs in its own
session (process group) with a clean environment (nothing of the user's, API keys included),
``RLIMIT_AS`` = the memory cap, no core files and files of at most 1 GiB. There is **no network
isolation and no pids cap** (``RLIMIT_NPROC`` counts every process of the user, not the sandbox's),
which is why ``auto`` announces the fallback with a warning line.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
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
from agentload.scenarios.models import SandboxSpec

__all__ = ["LocalSandbox"]

_FSIZE = 1 << 30


def _path_env() -> str:
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
        self._tmp = tempfile.mkdtemp(prefix="agentload-sandbox-")
        self._env = {**base_env(self._tmp), "PATH": _path_env()}
        self._procs: dict[int, subprocess.Popen[bytes]] = {}
        self._lock = threading.RLock()
        self._closed = False
        lifecycle.register(self._key, self.close)

    def __enter__(self) -> LocalSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _limits(self) -> None:  # runs in the child between fork and exec
        resource.setrlimit(resource.RLIMIT_AS, (self._memory, self._memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (_FSIZE, _FSIZE))

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecResult:
        """Run ``argv`` in the workspace; killed (whole process group) after ``timeout_s``."""
        check_command(self.id, self._closed, argv)
        start = time.perf_counter_ns()
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=self.workdir,
                env={**self._env, **(env or {})},
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
        with self._lock:
            self._procs[proc.pid] = proc
        cap = Capture(self._capture_bytes)
        assert proc.stdout is not None
        try:
            finished = _pump(proc.stdout.fileno(), cap, start + int(timeout_s * 1e9))
            if not finished:
                _killpg(proc.pid)
                _pump(proc.stdout.fileno(), cap, time.perf_counter_ns() + 1_000_000_000)
            try:
                code: int | None = proc.wait(timeout=2.0)
            except subprocess.TimeoutExpired:
                _killpg(proc.pid)
                code = None
        finally:
            proc.stdout.close()
            with self._lock:
                self._procs.pop(proc.pid, None)
        end = time.perf_counter_ns()
        if code is not None and code < 0:
            code = 128 - code  # killed by a signal: report it the way a shell (and Docker) does
        return ExecResult(code, cap.output(), not finished, start, end, cap.dropped)

    def close(self) -> None:
        """Kill every command still running and remove the private temp directory."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            procs = list(self._procs.values())
        lifecycle.unregister(self._key)
        for proc in procs:
            _killpg(proc.pid)
        shutil.rmtree(self._tmp, ignore_errors=True)


def _killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _pump(fd: int, cap: Capture, deadline_ns: int) -> bool:
    """Read ``fd`` into ``cap`` until EOF (True) or the deadline (False)."""
    return pump(fd, lambda: os.read(fd, 65536), cap.feed, deadline_ns)
