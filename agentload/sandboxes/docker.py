"""The Docker sandbox: one long-lived container per session, commands run with ``exec``.

* A shell that reaps orphans (``_REAPER``) keeps the container up as pid 1; every tool command is
  an ``exec`` in ``/workspace`` (the session's workspace, bind-mounted read-write).
* No network (``network_mode="none"``), memory (no swap), CPU and pids caps, a read-only root
  filesystem with a tmpfs ``/tmp`` (at most the disk quota), all capabilities dropped,
  ``no-new-privileges``, and a non-root user (the workspace owner, or ``nobody`` when root owns
  it). The bind-mounted workspace has no quota of its own: the host watches what a command writes
  there (``diskwatch``) and kills the command past the disk quota.
* Every exec is bounded twice: inside, ``timeout -k 2 T`` (SIGTERM at T, SIGKILL 2 s later); on the
  host, the output stream is read with a deadline of T + 4 s, after which the command's processes
  are swept from a second exec and the result says ``timed_out``. A hung command can never block
  the caller longer than that.
* **Nothing a command started outlives it.** A wrapper shell runs the command with a marker of
  its own in the environment, waits for it, then kills its process group and every process that
  carries its marker, daemons that ``setsid`` included (``reap.SWEEP_SH``: shell built-ins only, so
  it works while the pids cap is exhausted), and only then exits. So when ``exec`` returns the
  sandbox is as the command found it: a fork bomb that returned, a background ``sleep`` or a
  ``nohup`` daemon cannot starve the next command of pids or hold its output open. Concurrent
  commands carry different markers and never kill each other's processes. Pid 1 reaps the killed
  orphans, so they give their pids back at once.
* Labelled ``agentload.session=ID`` (plus the creating pid and host), removed by ``close()``, on
  SIGTERM/SIGHUP and at exit (``lifecycle``); ``agentload sandbox cleanup`` removes leftovers.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from docker.errors import APIError, DockerException, NotFound

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
from agentload.sandboxes.diskwatch import DiskWatch, tree_bytes
from agentload.sandboxes.image import ImageInfo
from agentload.sandboxes.reap import MARKER, SWEEP_SH, new_exec_id
from agentload.sandboxes.reap import sweep as host_sweep
from agentload.scenarios.models import SandboxSpec

__all__ = [
    "HOST_LABEL",
    "PID_LABEL",
    "SESSION_LABEL",
    "DockerSandbox",
]

SESSION_LABEL = "agentload.session"
PID_LABEL = "agentload.pid"
HOST_LABEL = "agentload.host"
_KILL_GRACE_S = 2.0
_HOST_GRACE_S = 2.0
# argv: marker id, timeout, command... The command runs in its own process group (``timeout``
# makes one) with the marker exported; when it ends, its leftovers are swept, then the wrapper
# exits with the command's status.
_WRAP = f"""{SWEEP_SH}id=$1; t=$2; shift 2
{MARKER}=$id; export {MARKER}
timeout -k {int(_KILL_GRACE_S)} "$t" "$@" &
pg=$!
wait "$pg"; rc=$?
unset {MARKER}
sweep "$id" "$pg"
settle "$pg"
exit "$rc"
"""
# Without ``timeout`` there is no process group of the command's own: the marker alone finds its
# processes. It runs in the foreground so that SIGINT is not ignored in it (an ``&`` list ignores
# SIGINT; ``timeout`` resets that).
_WRAP_NO_TIMEOUT = f"""{SWEEP_SH}id=$1; shift 2
{MARKER}=$id; export {MARKER}
(exec "$@"); rc=$?
unset {MARKER}
sweep "$id" ""
exit "$rc"
"""
_SWEEP_ONLY = SWEEP_SH + 'sweep "$1" ""'
# pid 1: keeps the container up and reaps the orphans a sweep kills (a shell's ``wait`` reaps any
# child, not only its own jobs), so their pids come back at once.
_REAPER = "while :; do sleep 86400 & wait; done"


def _user_for(workspace: Path) -> str:
    st = workspace.stat()
    return "65534:65534" if st.st_uid == 0 else f"{st.st_uid}:{st.st_gid}"


def _confinement(
    image: ImageInfo,
    workspace: Path,
    workdir: str,
    settings: SandboxSpec,
    mounts: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The container's confinement: no network, memory/CPU/pids caps, a read-only root with a
    tmpfs ``/tmp``, the workspace (and the image's and the caller's read-only ``mounts``, host
    path → path inside) bound, no capabilities, a non-root user."""
    volumes = {m: {"bind": m, "mode": "ro"} for m in image.mounts}
    for host, inside in (mounts or {}).items():
        volumes[host] = {"bind": inside, "mode": "ro"}
    volumes[str(workspace)] = {"bind": workdir, "mode": "rw"}
    memory = settings.memory_bytes()
    tmp = min(memory // 2, 1 << 30, settings.disk_bytes())
    return {
        "network_mode": "none",
        "mem_limit": memory,
        "memswap_limit": memory,
        "nano_cpus": int(settings.cpus * 1e9),
        "pids_limit": settings.pids,
        "tmpfs": {"/tmp": f"rw,exec,nosuid,nodev,size={tmp},mode=1777"},
        "volumes": volumes,
        "working_dir": workdir,
        "user": _user_for(workspace),
        "environment": base_env("/tmp"),
        "read_only": True,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "stop_signal": "SIGKILL",
    }


class DockerSandbox:
    """A session's container. Satisfies ``agentload.protocols.Sandbox``."""

    kind = "docker"
    workdir = "/workspace"
    home = "/tmp"
    """The commands' ``HOME`` (a tmpfs)."""

    def __init__(
        self,
        client: Any,
        image: ImageInfo,
        workspace: Path,
        settings: SandboxSpec,
        session_id: str,
        *,
        capture_bytes: int = DEFAULT_CAPTURE_BYTES,
        owns_client: bool = False,
        mounts: Mapping[str, str] | None = None,
    ) -> None:
        self._client = client
        self._mounts = dict(mounts or {})
        self._owns_client = owns_client
        self._capture_bytes = capture_bytes
        self._closed = False
        self._close_lock = threading.RLock()
        self.session_id = session_id
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise SandboxError(f"workspace {self.workspace} is not a directory")
        self._disk = settings.disk_bytes()
        self._disk_base = tree_bytes([str(self.workspace)])
        labels = {
            SESSION_LABEL: session_id,
            PID_LABEL: str(os.getpid()),
            HOST_LABEL: socket.gethostname(),
        }
        self._container = self._start(image, settings, labels)
        self.id: str = self._container.id[:12]
        lifecycle.register(self._container.id, self.close)
        self.has_timeout = self._probe_timeout(image)

    def _start(self, image: ImageInfo, settings: SandboxSpec, labels: dict[str, str]) -> Any:
        """Run the locked-down container (pid 1 the reaper); ``SandboxError`` when it fails,
        with nothing left behind (and the client closed when the sandbox owns it)."""
        try:
            return self._client.containers.run(
                image.tag,
                ["sh", "-c", _REAPER],
                detach=True,
                labels=labels,
                **_confinement(image, self.workspace, self.workdir, settings, self._mounts),
            )
        except DockerException as exc:
            _remove_created(self._client, labels)  # created but not started: do not leave it behind
            if self._owns_client:
                self._client.close()
            reason = str(exc).splitlines()[0][:300]
            raise SandboxError(f"cannot start a container from {image.tag}: {reason}") from None

    def _probe_timeout(self, image: ImageInfo) -> bool:
        """Whether the container has ``timeout``; closes it and raises ``SandboxError`` when it
        cannot exec or has no usable ``sh``."""
        try:
            probe = self._container.exec_run(["sh", "-c", "command -v timeout"])
        except DockerException as exc:
            self.close()
            raise SandboxError(f"container {self.id} ({image.tag}) cannot exec: {exc}") from None
        if probe.exit_code not in (0, 1):
            self.close()
            out = probe.output.decode(errors="replace").strip()[:200]
            raise SandboxError(f"container {self.id} ({image.tag}) has no usable sh: {out}")
        return bool(probe.exit_code == 0)

    def __enter__(self) -> DockerSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def exec(
        self, argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None
    ) -> ExecResult:
        """Run ``argv`` in ``/workspace``; returns when it ends or ``timeout_s`` (+ grace) passes,
        and in either case only once every process it started is dead."""
        check_command(self.id, self._closed, argv)
        marker = new_exec_id()
        script = _WRAP if self.has_timeout else _WRAP_NO_TIMEOUT
        cmd = ["sh", "-c", script, "sh", marker, f"{timeout_s:g}", *argv]
        api = self._client.api
        start = time.perf_counter_ns()
        try:
            exec_id = api.exec_create(
                self._container.id,
                cmd,
                stdout=True,
                stderr=True,
                environment=dict(env or {}),
                workdir=self.workdir,
            )["Id"]
            sock = api.exec_start(exec_id, socket=True)
        except NotFound:
            raise SandboxError(f"sandbox {self.id} is gone (closed or removed)") from None
        except DockerException as exc:
            raise SandboxError(f"sandbox {self.id}: exec failed: {exc}") from None
        cap = Capture(self._capture_bytes)
        host_deadline = start + int((timeout_s + _KILL_GRACE_S + _HOST_GRACE_S) * 1e9)
        kill = functools.partial(self._kill_now, marker)
        disk = DiskWatch([str(self.workspace)], self._disk, kill, self._disk_base).start()
        try:
            finished = _pump(sock, cap, host_deadline)
            if not finished:
                self._sweep(marker)
                _pump(sock, cap, time.perf_counter_ns() + 1_000_000_000)
        finally:
            disk.stop()
            _close_stream(sock)
        end = time.perf_counter_ns()
        exit_code = self._exit_code(exec_id)
        output = cap.output()
        if disk.tripped is not None:
            exit_code, output = 137, disk.noted(output)
        elapsed_s = (end - start) / 1e9
        timed_out = not finished or (
            self.has_timeout and exit_code in (124, 137) and elapsed_s >= timeout_s * 0.98
        )
        return ExecResult(
            exit_code=exit_code,
            output=output,
            timed_out=timed_out,
            start_ns=start,
            end_ns=end,
            dropped_bytes=cap.dropped,
            over_limit=disk.reason,
        )

    def _exit_code(self, exec_id: str) -> int | None:
        for _ in range(50):  # the exit code lands a moment after the stream closes
            try:
                info = self._client.api.exec_inspect(exec_id)
            except DockerException:
                return None
            if not info.get("Running"):
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.01)
        return None

    def _kill_now(self, marker: str) -> None:
        """Kill the command marked ``marker`` at once: from this host where the container's
        processes are visible here (no exec to wait for: a fast writer goes on writing while
        one is created), then from a second exec."""
        host_sweep(marker)
        self._sweep(marker)

    def _sweep(self, marker: str) -> None:
        """Kill, from a second exec, every process of the command that carries ``marker``."""
        with contextlib.suppress(DockerException):
            self._container.exec_run(["sh", "-c", _SWEEP_ONLY, "sh", marker])

    def close(self) -> None:
        """Remove the container (idempotent; safe from another thread or a signal handler)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        lifecycle.unregister(self._container.id)
        try:
            self._container.remove(force=True)
        except NotFound:
            pass
        except (APIError, DockerException, OSError) as exc:
            print(
                f"agentload: warning: could not remove container {self.id}: {exc} "
                "(`agentload sandbox cleanup` removes it)",
                file=sys.stderr,
            )
        if self._owns_client:
            with contextlib.suppress(Exception):
                self._client.close()


def _remove_created(client: Any, labels: dict[str, str]) -> None:
    filters = {"label": [f"{k}={v}" for k, v in labels.items()]}
    with contextlib.suppress(DockerException):
        for c in client.containers.list(all=True, filters=filters):
            with contextlib.suppress(DockerException):
                c.remove(force=True)


def _close_stream(sock: Any) -> None:
    """Close the exec stream: the socket file, the socket under it, and the HTTP response."""
    for obj in (sock, getattr(sock, "_sock", None), getattr(sock, "_response", None)):
        if obj is not None:
            with contextlib.suppress(Exception):
                obj.close()


def _pump(sock: Any, cap: Capture, deadline_ns: int) -> bool:
    """Read Docker's multiplexed exec stream into ``cap`` until EOF (True) or the deadline."""
    buf = bytearray()

    def read() -> bytes:
        return bytes(sock.read(65536) if hasattr(sock, "read") else sock.recv(65536))

    def demux(data: bytes) -> None:  # frames: 8-byte header (stream, size) + payload
        buf.extend(data)
        while len(buf) >= 8:
            size = int.from_bytes(buf[4:8], "big")
            if len(buf) < 8 + size:
                break
            cap.feed(bytes(buf[8 : 8 + size]))
            del buf[: 8 + size]

    return pump(sock, read, demux, deadline_ns)
