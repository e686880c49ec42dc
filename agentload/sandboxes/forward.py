"""Inside a Docker sandbox: the agent's one way out (stdlib only; run by the sandbox's Python).

    python3 forward.py PORT SOCKET -- AGENT ARGV...

Listens on ``127.0.0.1:PORT`` in the container (which has no network but its loopback), pipes
every connection to the recording proxy's Unix socket ``SOCKET`` (a host path mounted into the
container), starts the agent, and exits with the agent's exit code (128 + N when a signal N
ended it). SIGTERM and SIGINT are passed on to the agent. Bytes are piped as they come, both
ways; the proxy on the other end parses every request strictly.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from types import FrameType


class Pair:
    """One agent connection and its proxy connection, piped both ways and closed when both
    directions ended (then ``on_end`` is called). Also the confined local sandbox's bridge
    (``sandboxes.confine``) on the host."""

    def __init__(
        self,
        agent: socket.socket,
        proxy: socket.socket,
        on_end: Callable[[Pair], None] | None = None,
    ) -> None:
        self.agent, self.proxy = agent, proxy
        self.on_end = on_end
        self._left = 2
        self._lock = threading.Lock()

    def cut(self) -> None:
        """Shut both connections down now (the pipes then end and close them)."""
        for sock in (self.agent, self.proxy):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def start(self) -> None:
        for src, dst in ((self.agent, self.proxy), (self.proxy, self.agent)):
            threading.Thread(target=self._pipe, args=(src, dst), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if last:
            self.agent.close()
            self.proxy.close()
            if self.on_end is not None:
                self.on_end(self)


def _serve(listener: socket.socket, path: str) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        proxy = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            proxy.connect(path)
        except OSError as exc:
            print(f"agentload forward: cannot reach the proxy at {path}: {exc}", file=sys.stderr)
            conn.close()
            proxy.close()
            continue
        Pair(conn, proxy).start()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--" or not argv[0].isdigit():
        print("usage: forward.py PORT SOCKET -- ARGV...", file=sys.stderr)
        return 2
    port, path, command = int(argv[0]), argv[1], argv[3:]
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    threading.Thread(target=_serve, args=(listener, path), daemon=True).start()
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"agentload forward: cannot start {command[0]}: {exc}", file=sys.stderr)
        return 127

    def pass_on(signum: int, frame: FrameType | None) -> None:
        with contextlib.suppress(OSError):
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGINT, pass_on)
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
