"""The host's file access to a workspace, immune to symlink and rename races.

A sandboxed command shares the workspace with the host (a bind mount) and may rename any
directory in it, or put a symlink in its place, at any moment: also while the host is between
resolving a path and using it. So nothing here uses a path twice. A path is walked one component
at a time from a file descriptor of the workspace root, each directory opened with
``O_NOFOLLOW`` relative to the one before; a symlink met on the way is read and followed by
hand, and only while it stays inside the workspace (``/workspace/...`` and relative targets; at
most 40 of them); ``..`` never climbs above the root. Reads open the last component with
``O_NOFOLLOW`` from its directory's descriptor, writes create a temporary file there and rename
it over the name within that same directory, and listings walk descriptors (``os.fwalk``). A
component swapped after it was checked makes the call fail (``ELOOP``), never reach outside.

The directory descriptors stay inside the workspace's mount: a directory cannot be renamed
across mounts, so a descriptor the walk opened names a directory of the workspace for as long
as it is held.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from enum import Enum
from pathlib import Path

from agentload.infile import Unreadable, Why, read_fd
from agentload.tools.result import ToolError
from agentload.tools.text import WORKSPACE

__all__ = ["MAX_LINKS", "Kind", "kind_of", "list_tree", "read_bytes", "replace_bytes"]

MAX_LINKS = 40
"""Symlinks followed while resolving one path (as the kernel's own limit)."""
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO never blocks


class Kind(Enum):
    """What a workspace path names."""

    MISSING = "missing"
    FILE = "file"
    DIR = "dir"
    OTHER = "other"


def _parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p not in ("", ".")]


def _inside(target: str, roots: tuple[str, ...]) -> str | None:
    """An absolute symlink target as a path under the workspace root, or None."""
    for r in roots:
        r = r.rstrip("/")
        if target == r or target.startswith(r + "/"):
            return target[len(r) :]
    return None


def _changed(shown: str) -> ToolError:
    return ToolError(f"{shown}: changed while it was being read (a symlink or a rename); try again")


def _outside(shown: str) -> ToolError:
    """The error for a path that leads out of the workspace."""
    return ToolError(f"{shown}: outside the workspace (symlinks and .. included)")


class _Walk:
    """A workspace path walked one component at a time: the open directories from the root
    down (``stack``), the components still to walk (``todo``) and the symlinks followed."""

    def __init__(self, root: Path, shown: str) -> None:
        self.root = root
        self.shown = shown
        self.stack = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]  # trusted
        self.todo = _parts(shown)
        self.links = 0

    def close(self) -> None:
        """Close every directory descriptor the walk holds."""
        for fd in self.stack:
            os.close(fd)

    def run(self) -> tuple[int, str]:
        """Walk to the end: the descriptor of the directory holding the last component, and
        that component's name (``""`` when the path ends on a directory)."""
        while self.todo:
            name = self.todo.pop(0)
            if name == "..":
                self._up()
                continue
            st = self._lstat(name)
            if st is None:  # a missing last component: the caller says what that means
                return self.stack[-1], name
            if stat.S_ISLNK(st.st_mode):
                self._follow(name)
                continue
            if not self.todo:
                return self.stack[-1], name
            self._enter(name, st)
        # The path ended on a directory (the root, "..", a link to a directory): itself ("").
        return self.stack[-1], ""

    def _up(self) -> None:
        """Step up to the parent directory (``..``), never above the root."""
        if len(self.stack) == 1:
            raise _outside(self.shown)
        os.close(self.stack.pop())

    def _lstat(self, name: str) -> os.stat_result | None:
        """``name``'s own status in the current directory; None when it is the last component
        and missing."""
        try:
            return os.stat(name, dir_fd=self.stack[-1], follow_symlinks=False)
        except FileNotFoundError:
            if self.todo:
                raise ToolError(f"{self.shown}: no such file or directory") from None
            return None
        except NotADirectoryError:
            raise ToolError(f"{self.shown}: not a directory on the way") from None

    def _follow(self, name: str) -> None:
        """Put the symlink ``name``'s target in front of the components still to walk (an
        absolute one restarts from the root); ToolError when it leaves the workspace."""
        self.links += 1
        if self.links > MAX_LINKS:
            raise ToolError(f"{self.shown}: more than {MAX_LINKS} symlinks")
        try:
            target = os.readlink(name, dir_fd=self.stack[-1])
        except OSError:  # no longer a symlink
            raise _changed(self.shown) from None
        if target.startswith("/"):  # the sandbox's /workspace, or the host's own path
            root = self.root
            inner = _inside(target, (WORKSPACE, str(root), os.path.realpath(root)))
            if inner is None:
                raise _outside(self.shown)
            while len(self.stack) > 1:
                os.close(self.stack.pop())
            target = inner
        self.todo[:0] = _parts(target)

    def _enter(self, name: str, st: os.stat_result) -> None:
        """Open the directory ``name`` (``st`` its status) and walk on from it."""
        if not stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{self.shown}: not a directory on the way")
        try:
            self.stack.append(os.open(name, _DIR, dir_fd=self.stack[-1]))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                raise _changed(self.shown) from None
            raise


@contextlib.contextmanager
def _parent(root: Path, shown: str) -> Iterator[tuple[int, str]]:
    """The descriptor of the directory that holds ``shown``'s last component (relative to the
    workspace root), and that component's name (``""`` for the root itself). Symlinks on the
    way and at the end are followed inside the workspace; ToolError if one leaves it."""
    walk = _Walk(root, shown)
    try:
        yield walk.run()
    finally:
        walk.close()


def kind_of(root: Path, shown: str) -> tuple[Kind, int]:
    """What ``shown`` names inside the workspace, and its size."""
    with _parent(root, shown) as (dfd, name):
        try:
            st = os.stat(name or ".", dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            return Kind.MISSING, 0
    if stat.S_ISREG(st.st_mode):
        return Kind.FILE, st.st_size
    if stat.S_ISDIR(st.st_mode):
        return Kind.DIR, 0
    return Kind.OTHER, 0


def read_bytes(root: Path, shown: str, max_bytes: int) -> bytes:
    """A regular file's bytes; ToolError when it is missing, not a regular file, or larger than
    ``max_bytes``."""
    with _parent(root, shown) as (dfd, name):
        try:
            fd = os.open(name or ".", _FILE, dir_fd=dfd)
        except FileNotFoundError:
            raise ToolError(f"{shown}: no such file") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _changed(shown) from None
            raise ToolError(f"{shown}: cannot open ({exc.strerror})") from None
        try:
            return read_fd(fd, max_bytes)
        except Unreadable as exc:
            if exc.why is Why.DIRECTORY:
                raise ToolError(f"{shown}: is a directory (use list_files)") from None
            if exc.why is Why.TOO_BIG:
                raise ToolError(f"{shown}: larger than {max_bytes // 1024 // 1024} MiB") from None
            raise ToolError(f"{shown}: not a regular file") from None


def replace_bytes(root: Path, shown: str, data: bytes) -> None:
    """Replace the regular file ``shown`` with ``data``, keeping its mode: a temporary file in
    its directory (by descriptor), renamed over it within that directory."""
    with _parent(root, shown) as (dfd, name):
        if not name:
            raise ToolError(f"{shown}: is a directory")
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            raise ToolError(f"{shown}: no such file") from None
        if not stat.S_ISREG(st.st_mode):
            raise (
                _changed(shown)
                if stat.S_ISLNK(st.st_mode)
                else ToolError(f"{shown}: not a regular file")
            )
        tmp = f".{name[:100]}.{secrets.token_hex(6)}.tmp"
        fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=dfd,
        )
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                os.fchmod(fh.fileno(), stat.S_IMODE(st.st_mode))
            os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dfd)
            raise


def list_tree(root: Path, shown: str, skip_dirs: tuple[str, ...]) -> list[str]:
    """Every file under the directory ``shown`` as a path relative to the workspace root
    (symlinks are listed, not followed); ``[shown]`` for a file. Unsorted."""
    with _parent(root, shown) as (dfd, name):
        try:
            fd = os.open(name or ".", _DIR, dir_fd=dfd)
        except FileNotFoundError:
            raise ToolError(f"{shown}: no such directory") from None
        except NotADirectoryError:
            return [shown]
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise _changed(shown) from None
            raise
    base = "" if shown in ("", ".") else shown.rstrip("/") + "/"
    out: list[str] = []
    try:
        for dirpath, dirnames, filenames, _ in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
            dirnames[:] = [d for d in dirnames if d not in skip_dirs]
            rel = "" if dirpath == "." else dirpath[2:] + "/"
            out.extend(base + rel + f for f in filenames)
    finally:
        os.close(fd)
    return out
