"""The confined local sandbox's host side: start a command inside namespaces, bridge its way out.

``start`` runs ``confine_inside.py`` (by path, standard library only) with the command's own
environment; that script builds the namespaces (see its docstring) and hands back, over a Unix
socketpair, a listening socket on ``127.0.0.1:PORT`` **inside** the sandbox's network namespace
for each allowed port. A ``Bridge`` accepts on those and pipes each connection to the real
``127.0.0.1:PORT`` on the host (``forward.Pair``, as Docker's way out does in its container;
at most ``MAX_CONNECTIONS`` at a time, all cut when the command ends): the recording proxy's
listener is the only thing a confined command can reach.

``unavailable()`` says why the kernel refuses the namespaces here (None when it allows them):
``generate --agent`` with ``--sandbox local`` refuses to run unconfined.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentload.errors import SandboxError
from agentload.sandboxes.forward import Pair

__all__ = ["MAX_CONNECTIONS", "Bridge", "Confined", "start", "unavailable"]

_INSIDE = str(Path(__file__).with_name("confine_inside.py"))
SCRATCH = ("/tmp", "/var/tmp", "/dev/shm")
"""Shared scratch folders: a fresh private tmpfs over each (the host's are out of reach)."""
HIDDEN = ("/run", "/var/run")
"""Where daemons keep their sockets (Docker's included): an empty read-only tmpfs over each."""
MAX_CONNECTIONS = 64
_HANDSHAKE_S = 30.0


def _python() -> list[str]:
    return [sys.executable, "-I", "-S", _INSIDE]


@functools.cache
def unavailable() -> str | None:
    """Why the kernel refuses the confinement here (None: it allows it). Asked once."""
    try:
        done = subprocess.run(
            [*_python(), "--probe"], capture_output=True, text=True, env={}, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    return None if done.returncode == 0 else (done.stdout.strip() or f"exit {done.returncode}")


def hidden_paths() -> list[str]:
    """``HIDDEN`` and the Unix socket ``DOCKER_HOST`` names, if any."""
    docker = os.environ.get("DOCKER_HOST", "")
    return [*HIDDEN, *([docker[len("unix://") :]] if docker.startswith("unix://") else [])]


@dataclass
class Bridge:
    """Pipes each connection accepted on ``listeners[i]`` (inside the sandbox) to the host's
    ``127.0.0.1:ports[i]``."""

    listeners: list[socket.socket]
    ports: Sequence[int]
    _pairs: set[Pair] = field(default_factory=set)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False

    def start(self) -> Bridge:
        for sock, port in zip(self.listeners, self.ports, strict=True):
            t = threading.Thread(target=self._accept, args=(sock, port), daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def _accept(self, listener: socket.socket, port: int) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed
                return
            with self._lock:
                full = self._closed or len(self._pairs) >= MAX_CONNECTIONS
            if full:
                conn.close()
                continue
            try:
                up = socket.create_connection(("127.0.0.1", port), timeout=10)
            except OSError:
                conn.close()
                continue
            up.settimeout(None)
            pair = Pair(conn, up, self._ended)
            with self._lock:
                closed = self._closed  # (``close`` may have taken its list since the check)
                if not closed:
                    self._pairs.add(pair)
            if closed:
                conn.close()
                up.close()
                continue
            pair.start()

    def _ended(self, pair: Pair) -> None:
        with self._lock:
            self._pairs.discard(pair)

    def close(self) -> None:
        """Stop accepting and cut every connection."""
        with self._lock:
            self._closed = True
            pairs = list(self._pairs)
        for sock in self.listeners:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for pair in pairs:
            pair.cut()
        for t in self._threads:
            t.join(timeout=5)


@dataclass
class Confined:
    """A command started in the namespaces: its host-side process and its bridge."""

    proc: subprocess.Popen[bytes]
    bridge: Bridge
    pidns: str | None
    """``/proc/PID/ns/pid`` of its processes (what the memory watch counts)."""


def start(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    writable: Sequence[str],
    readable: Sequence[str],
    ports: Sequence[int],
    tmpfs_bytes: int,
    preexec: Callable[[], None],
) -> Confined:
    """``argv`` confined (see the module docstring); ``SandboxError`` when it cannot be."""
    host, inside = socket.socketpair()
    spec = {
        "argv": list(argv),
        "cwd": cwd,
        "writable": list(writable),
        "readable": [p for p in readable if p not in writable],
        "ports": list(ports),
        "tmpfs_bytes": tmpfs_bytes,
        "scratch": list(SCRATCH),
        "hidden": hidden_paths(),
        "ctl": inside.fileno(),
    }
    try:
        proc = subprocess.Popen(
            [*_python(), json.dumps(spec)],
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec,
            pass_fds=(inside.fileno(),),
        )
    finally:
        inside.close()
    try:
        return _handshake(host, proc, ports)
    finally:
        host.close()


def _handshake(
    host: socket.socket, proc: subprocess.Popen[bytes], ports: Sequence[int]
) -> Confined:
    """The inside's answer: ``ok PID`` and the listeners, or ``error WHY``."""
    host.settimeout(_HANDSHAKE_S)
    try:
        msg, fds, _, _ = socket.recv_fds(host, 4096, max(1, len(ports)))
    except OSError as exc:
        msg, fds = f"error no answer ({exc})".encode(), []
    listeners = [socket.socket(fileno=fd) for fd in fds]
    word, _, rest = msg.decode(errors="replace").partition(" ")
    if word != "ok" or len(listeners) != len(ports):
        for sock in listeners:
            sock.close()
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, 9)
        output = proc.communicate()[0].decode(errors="replace").strip()
        why = rest if word == "error" else (output[-300:] or "it exited before confining")
        raise SandboxError(f"cannot confine the command: {why}")
    try:
        pidns: str | None = os.readlink(f"/proc/{int(rest)}/ns/pid")
    except (OSError, ValueError):
        pidns = None
    return Confined(proc, Bridge(listeners, ports).start(), pidns)
