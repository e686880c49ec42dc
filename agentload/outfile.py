"""Writing an output file, the one way every command does it.

* ``check_output(out, inputs, option=..., force=...)``, before anything is opened: ``out`` may not
  be one of the inputs (the same file, however named), a directory, or anything but a regular
  file; an existing ``out`` is replaced only when asked (``--force``).
* ``atomic_output(...)``: the same checks, then a new temporary file beside ``out`` (same
  directory, so the rename is atomic; same last suffix, so a ``.zst`` is still compressed) that
  the caller writes; renamed over ``out`` only when the block ends normally, removed otherwise.
  A failed or interrupted command leaves ``out`` as it was, never half written, never gone.

Every problem is a ``ConfigError`` that names the option and the path.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

from agentload.errors import ConfigError
from agentload.errortext import clip

__all__ = ["atomic_output", "check_output"]


def _name(option: str, out: Path) -> str:
    """``OPTION PATH`` with a long path clipped, so the reason after it is always shown."""
    return f"{option} {clip(str(out), 200)}"


def _same(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def check_output(
    out: Path, inputs: Iterable[Path] = (), *, option: str = "-o/--out", force: bool = False
) -> None:
    """Refuse ``out`` up front (see the module docstring); nothing is opened or created."""
    try:
        st = out.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ConfigError(
            f"{_name(option, out)}: cannot write there ({exc.strerror or exc})"
        ) from None
    for src in inputs:
        if _same(out, src):
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
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        raise ConfigError(
            f"{_name(option, out)}: cannot write there ({exc.strerror or exc})"
        ) from None
    os.close(fd)
    try:
        yield tmp
        os.replace(tmp, out)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
