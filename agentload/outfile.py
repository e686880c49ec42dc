"""Writing an output file, the one way every command does it.

* ``check_output(out, inputs, option=..., force=...)``, before anything is opened: ``out`` may not
  be one of the inputs (the same file, however named) or an existing file in an input
  directory, a directory, or anything but a regular file; an existing ``out`` is replaced only
  when asked (``--force``).
* ``atomic_output(...)``: the same checks, then a new temporary file beside ``out`` (same
  directory, so the rename is atomic; same last suffix, so a ``.zst`` is still compressed) that
  the caller writes; renamed over ``out`` only when the block ends normally, removed otherwise.
  A failed or interrupted command leaves ``out`` as it was, never half written, never gone.

* ``output_dir(folder, option=..., need=...)``: an output directory, created if missing and
  tried for writing (a file made, written and removed in it) before any work; a disk with less
  than ``need`` bytes free is refused there too (``free_bytes``). A directory it made for a
  check that failed is removed again: a refused command leaves nothing behind.
* ``new_files(folder, option=...)``: a block that writes new files into ``folder`` (listed as
  it goes); a failure removes them all, and ``folder`` if the block's ``output_dir`` made it.
* ``write_errors(path, option=...)``: a block that writes into ``path`` (a file or a directory
  checked before); an ``OSError`` there (a full disk: ENOSPC, EFBIG, EDQUOT ...) is one line.
* ``write_document(doc, out, name)``: a pydantic document (results.json, eval.json) as indented
  JSON into ``out/name``, written beside and renamed (the file beside removed if the write
  fails), its credentials masked.

Every problem is a ``ConfigError`` that names the option and the path (long paths clipped, so
the reason is always shown).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from agentload.errors import ConfigError
from agentload.errortext import clip
from agentload.masking import scrub_bytes

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = [
    "atomic_output",
    "cannot_write",
    "check_output",
    "free_bytes",
    "human_bytes",
    "new_files",
    "output_dir",
    "write_document",
    "write_errors",
]


def _name(option: str, out: Path) -> str:
    """``OPTION PATH`` with a long path clipped, so the reason after it is always shown."""
    return f"{option} {clip(str(out), 200)}"


def cannot_write(option: str, out: Path, exc: OSError) -> ConfigError:
    """The one line for ``out`` that cannot be written: ``OPTION PATH: cannot write there
    (reason)``."""
    return ConfigError(f"{_name(option, out)}: cannot write there ({exc.strerror or exc})")


@contextlib.contextmanager
def write_errors(out: Path, *, option: str = "-o/--out") -> Iterator[None]:
    """Run a block that writes ``out`` (or files in it); its ``OSError`` becomes one
    ``ConfigError`` naming ``option`` and ``out``."""
    try:
        yield
    except OSError as exc:
        raise cannot_write(option, out, exc) from None


MIN_FREE = 1 << 20
"""The free space ``output_dir`` asks of a disk by default: less is a full disk."""
_PROBE = b"\0" * 4096
"""What the write test writes: a page, which a full disk (tmpfs, ext4 ...) refuses."""


def free_bytes(folder: Path) -> int:
    """The bytes an unprivileged writer may still put on ``folder``'s disk (``statvfs``)."""
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def human_bytes(n: float) -> str:
    """``12.3 MiB``: a size as people read it."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError(n)


def output_dir(folder: Path, *, option: str = "--out", need: int = MIN_FREE) -> Path:
    """``folder`` created (with its parents) and tried for writing, so a bad output place is
    one line before any work; ``ConfigError`` when it is not a directory, cannot be written, or
    its disk has less than ``need`` bytes free (then a directory made here is removed again)."""
    st = _stat(folder, option)
    if st is not None and not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{_name(option, folder)}: exists and is not a directory")
    made = _made_by_mkdir(folder)
    try:
        with write_errors(folder, option=option):
            folder.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=folder) as probe:
                probe.write(_PROBE)
                probe.flush()
                os.fsync(probe.fileno())
            free = free_bytes(folder)
        if free < need:
            raise ConfigError(
                f"{_name(option, folder)}: the disk is full ({human_bytes(free)} free, "
                f"{human_bytes(need)} needed)"
            )
    except BaseException:
        _remove_empty(made)
        raise
    return folder


def _made_by_mkdir(folder: Path) -> list[Path]:
    """The directories ``folder.mkdir(parents=True)`` would make, deepest first."""
    missing: list[Path] = []
    d = folder
    while d != d.parent:
        try:
            d.stat()
        except FileNotFoundError:
            missing.append(d)
            d = d.parent
            continue
        except OSError:  # cannot be looked at (a name too long ...): nothing of it is ours
            pass
        break
    return missing


def _remove_empty(dirs: Iterable[Path]) -> None:
    """Remove each of ``dirs`` (deepest first) that is empty; nothing else."""
    for d in dirs:
        with contextlib.suppress(OSError):
            d.rmdir()


@dataclass
class NewFiles:
    """The files a ``new_files`` block wrote (``add`` each before writing it)."""

    folder: Path
    paths: list[Path] = field(default_factory=list)

    def add(self, path: Path) -> Path:
        self.paths.append(path)
        return path


@contextlib.contextmanager
def new_files(folder: Path, *, option: str = "--out") -> Iterator[NewFiles]:
    """``folder`` prepared (``output_dir``) for a block that writes new files into it; if the
    block fails, the files it added are removed, and ``folder`` if this made it; an ``OSError``
    there is one ``ConfigError`` line naming ``option`` and ``folder``."""
    made = _made_by_mkdir(folder)
    output_dir(folder, option=option)
    files = NewFiles(folder)
    try:
        with write_errors(folder, option=option):
            yield files
    except BaseException:
        for path in files.paths:
            with contextlib.suppress(OSError):
                path.unlink()
        _remove_empty(made)
        raise


def _stat(path: Path, option: str) -> os.stat_result | None:
    """``path``'s stat, None when it does not exist; one line when it cannot be looked at."""
    try:
        return path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise cannot_write(option, path, exc) from None


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _within(path: Path, folder: Path) -> bool:
    """Whether ``path`` lies in ``folder`` (an input directory, whose files are read)."""
    try:
        return folder.is_dir() and path.resolve().is_relative_to(folder.resolve())
    except (OSError, RuntimeError):  # a symlink loop
        return False


def check_output(
    out: Path, inputs: Iterable[Path] = (), *, option: str = "-o/--out", force: bool = False
) -> None:
    """Refuse ``out`` up front (see the module docstring); nothing is opened or created."""
    st = _stat(out, option)
    if st is None:
        return
    for src in inputs:
        if _same(out, src) or _within(out, src):
            raise ConfigError(
                f"{_name(option, out)}: is an input of this command; write to another file"
            )
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"{_name(option, out)}: is a directory (name the file to write)")
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(f"{_name(option, out)}: not a regular file")
    if not force:
        raise ConfigError(f"{_name(option, out)}: exists; add --force to replace it")


@contextlib.contextmanager
def atomic_output(
    out: Path, inputs: Iterable[Path] = (), *, option: str = "-o/--out", force: bool = False
) -> Iterator[Path]:
    """The temporary path to write; ``out`` is replaced by it when the block ends normally."""
    check_output(out, inputs, option=option, force=force)
    suffix = "".join(out.suffixes[-1:])
    tmp = out.with_name(f".{out.name[:80]}.{secrets.token_hex(4)}.partial{suffix}")
    with write_errors(out, option=option):
        out.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666))
    try:
        try:
            yield tmp
            os.replace(tmp, out)
        except OSError as exc:
            if exc.filename not in (None, str(tmp)):
                raise  # not a write of ``out``: an input's own error
            raise cannot_write(option, out, exc) from None
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_document(doc: BaseModel, out: Path, name: str) -> Path:
    """Write ``doc`` as indented JSON to ``out/name`` (atomically: a reader never sees half a
    file; any credential in it masked: ``agentload.masking``); returns its path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    tmp = path.with_suffix(".json.tmp")
    data = doc.model_dump(mode="json", by_alias=True)
    try:
        tmp.write_bytes(scrub_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2)))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return path
