"""Inside the confined local sandbox: the namespaces, the mounts, the loopback, then the command.
Standard library only, run by path with a scrubbed environment (never ``-m agentload``):

    python -I -S confine_inside.py SPEC_JSON        # SPEC: see ``agentload.sandboxes.confine``
    python -I -S confine_inside.py --probe          # exit 0 when the kernel allows it all

It ``unshare``s a mount, a network and a pid namespace (and a user namespace mapping only its own
uid when it is not root), makes every mount read-only, puts fresh private tmpfs over ``/tmp``,
``/var/tmp`` and ``/dev/shm`` and empty read-only ones over ``/run`` and ``/var/run`` (and the
Docker socket of ``DOCKER_HOST``), puts ``/dev/null`` over every other Unix socket bound on the
host when it starts (the host's ``/proc/net/unix``, read before the network namespace changes;
abstract sockets belong to a network namespace and are out of reach anyway), binds the
writable folders (workspace, private home) back at their paths and the read-only ones (an
installed agent) too, brings ``lo`` up and listens on
``127.0.0.1:PORT`` for each port it is given. It hands those listeners to the host over the
control socket (the host pipes each connection to the real port), then forks the namespace's
first process, which mounts a ``/proc`` of its own and runs the command (as ``nobody`` when root).
That first process exits with the command's own process, and the kernel then kills every process
left in the namespace. Exit status: the command's, shell style (128 + N for signal N).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import stat
import struct
import sys
from typing import Any

CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 16384, 1 << 18, 1 << 21, 1 << 24
_KEPT = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}
_NOBODY = 65534
_MAX_SOCKETS = 4096
"""The most host sockets masked (a host with more is refused, not half masked)."""
_libc = ctypes.CDLL(None, use_errno=True)


class Refused(Exception):
    """The kernel refused a step: the message says which."""


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise Refused(f"{what}: {os.strerror(err)}")


def mount(src: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    enc = [None if s is None else s.encode() for s in (src, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def unshare(root: bool) -> None:
    """New mount, network and pid namespaces (and a user namespace when not root)."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWPID | (0 if root else CLONE_NEWUSER)
    _check(_libc.unshare(ctypes.c_int(flags)), "unshare")
    if not root:  # only our own uid exists in it: caps for the setup, none after exec
        for name, text in (
            ("setgroups", "deny"),
            ("uid_map", f"{uid} {uid} 1"),
            ("gid_map", f"{gid} {gid} 1"),
        ):
            with open(f"/proc/self/{name}", "w") as fh:
                fh.write(text)
    mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing of ours reaches the host's mounts


def _unescape(path: str) -> str:
    """A mount point as ``/proc/self/mountinfo`` writes it (a space is ``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), path)


def read_only_everywhere() -> None:
    """Remount every mount read-only, keeping its other flags."""
    with open("/proc/self/mountinfo") as fh:
        rows = [line.split() for line in fh]
    failed = []
    for row in rows:
        target, opts = _unescape(row[4]), row[5].split(",")
        flags = MS_BIND | MS_REMOUNT | MS_RDONLY
        flags |= sum(bit for name, bit in _KEPT.items() if name in opts)
        try:
            mount(None, target, None, flags)
        except Refused as exc:
            if ctypes.get_errno() not in (errno.ENOENT, errno.EACCES) and "ro" not in opts:
                failed.append(str(exc))
    if failed:
        raise Refused("cannot make every mount read-only: " + "; ".join(failed[:3]))


def _mkdirs(path: str) -> None:
    os.makedirs(path, mode=0o755, exist_ok=True)


def host_sockets() -> list[str]:
    """The paths of the Unix sockets bound on the host (this network namespace's)."""
    with open("/proc/net/unix", "rb") as fh:
        rows = fh.read(64 << 20).decode(errors="surrogateescape").splitlines()[1:]
    fields = (row.split(None, 7) for row in rows)  # the path is the 8th, spaces and all
    paths = list(dict.fromkeys(f[7] for f in fields if len(f) == 8 and f[7].startswith("/")))
    if len(paths) > _MAX_SOCKETS:
        raise Refused(f"{len(paths)} Unix sockets on the host: over {_MAX_SOCKETS} to mask")
    return paths


def mask_sockets(paths: list[str]) -> None:
    """``/dev/null`` over each path that is still a socket here (one under a masked folder is
    gone already)."""
    for path in paths:
        try:
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                continue
        except OSError:  # gone, or under a folder we may not search
            continue
        mount("/dev/null", path, None, MS_BIND)


def mask(spec: dict[str, Any]) -> None:
    """Private tmpfs over the shared scratch folders, empty read-only ones over the sockets'
    folders."""
    size = f"size={int(spec['tmpfs_bytes'])},mode=1777"
    for path in spec["scratch"]:
        if os.path.isdir(path) and not os.path.islink(path):
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, size)
    for path in spec["hidden"]:
        if os.path.islink(path) or not os.path.exists(path):
            continue
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV | MS_RDONLY, "size=4k,mode=755")
        else:
            mount("/dev/null", path, None, MS_BIND)  # a socket file: now /dev/null, no socket


def bind_back(fds: dict[str, int], writable: list[str]) -> None:
    """Bind each folder (opened before the masks) back at its own path."""
    for path, fd in fds.items():
        if not os.path.isdir(path):
            _mkdirs(path)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV
        mount(None, path, None, flags if path in writable else flags | MS_RDONLY)
        os.close(fd)


def loopback(ports: list[int]) -> list[socket.socket]:
    """``lo`` up in the new network namespace and a listener on each ``127.0.0.1:PORT``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), 0x8913, req))[1]  # SIOCGIFFLAGS
        fcntl.ioctl(s.fileno(), 0x8914, struct.pack("16sH14x", b"lo", flags | 1))  # SIOCSIFFLAGS
    out = []
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", port))
        sock.listen(64)
        out.append(sock)
    return out


def setup(spec: dict[str, Any]) -> list[socket.socket]:
    """Everything but ``/proc`` and the command (see the module docstring)."""
    root = os.geteuid() == 0
    sockets = host_sockets()  # the host's: read before the new network namespace
    unshare(root)
    keep = [*spec["writable"], *spec["readable"]]
    fds = {p: os.open(p, os.O_PATH | os.O_DIRECTORY) for p in keep if os.path.isdir(p)}
    read_only_everywhere()
    mask(spec)
    mask_sockets(sockets)
    bind_back(fds, spec["writable"])
    return loopback(spec["ports"])


def _status(code: int) -> int:
    return 128 + os.WTERMSIG(code) if os.WIFSIGNALED(code) else os.WEXITSTATUS(code)


def first_process(spec: dict[str, Any]) -> int:
    """Pid 1 of the new namespace: its ``/proc``, the command, its exit status."""
    _libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: dies with the host-side process
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    pid = os.fork()
    if pid == 0:
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(_NOBODY)
                os.setuid(_NOBODY)
            os.chdir(spec["cwd"])
            exe = shutil.which(spec["argv"][0]) or spec["argv"][0]
            if "/" not in exe:  # what a shell says: not found, not a folder it may not read
                raise FileNotFoundError(errno.ENOENT, "command not found")
            os.execv(exe, spec["argv"])
        except OSError as exc:
            os.write(2, f"{spec['argv'][0]}: {exc.strerror}\n".encode())
            os._exit(127 if isinstance(exc, FileNotFoundError) else 126)
    while True:  # reap orphans until the command's own process exits
        got, code = os.wait()
        if got == pid:
            return _status(code)


def main(argv: list[str]) -> int:
    if argv == ["--probe"]:
        try:
            unshare(os.geteuid() == 0)
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=4k")
        except (Refused, OSError) as exc:
            print(exc)
            return 1
        return 0
    spec = json.loads(argv[0])
    ctl = socket.socket(fileno=int(spec["ctl"]))
    try:
        listeners = setup(spec)
        pid = os.fork()
    except (Refused, OSError) as exc:
        ctl.sendall(f"error {exc}".encode())
        return 125
    if pid == 0:
        ctl.close()
        for sock in listeners:
            sock.close()
        os._exit(first_process(spec))
    socket.send_fds(ctl, [f"ok {pid}".encode()], [s.fileno() for s in listeners])
    ctl.close()
    for sock in listeners:
        sock.close()
    _, code = os.waitpid(pid, 0)
    return _status(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
