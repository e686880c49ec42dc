"""Reading an input file that is not a trace, bounded: a regular file of at most a known size.

``read_bytes(path, limit=..., label=...)`` opens without blocking (a FIFO named as a scenario or
an ``!include`` never hangs), refuses anything but a regular file (``/dev/zero`` never fills
memory), and reads at most ``limit`` bytes. Every problem is one ``ConfigError`` (or the
``error`` class the caller names) that starts with ``label``. Traces have their own bounded
reader (``trace.reader``).

``read_document(path, name, what)`` reads a JSON document (results.json, eval.json) through it:
the file, or the file ``name`` in a directory; every problem one ``ResultsFormatError``.
"""

from __future__ import annotations

import os
import stat
from enum import Enum
from pathlib import Path
from typing import Any

import orjson
import yaml

from agentload.errors import AgentloadError, ConfigError, ResultsFormatError

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_TEXT_BYTES",
    "MAX_YAML_NODES",
    "BoundedLoader",
    "Unreadable",
    "Why",
    "check_yaml_nodes",
    "load_bounded",
    "open_fd",
    "read_bytes",
    "read_document",
    "read_fd",
    "regular_fd",
    "safe_load",
    "why_unreadable",
]

MAX_TEXT_BYTES = 16 * 1024 * 1024
"""The largest scenario, profile or included text file read (16 MiB)."""
MAX_DOCUMENT_BYTES = 1024 * 1024 * 1024
"""The largest JSON document read whole: a results file, a Weka conversation (1 GiB)."""
MAX_YAML_NODES = 200_000
"""The most YAML nodes a scenario, a profile or an override may hold once its aliases are
expanded."""


def check_yaml_nodes(
    node: yaml.Node | None, label: str, error: type[AgentloadError] = ConfigError
) -> None:
    """``error`` when ``node`` expands past ``MAX_YAML_NODES``: aliases are references, so a
    342-byte "billion laughs" document composes at once and then explodes in whatever walks it
    as a tree (a merge, a validation)."""
    stack = [node] if node is not None else []
    seen = 0
    while stack:
        n = stack.pop()
        seen += 1
        if seen > MAX_YAML_NODES:
            raise error(
                f"{label}: more than {MAX_YAML_NODES:,} YAML nodes once its aliases are expanded"
            )
        if isinstance(n, yaml.SequenceNode):
            stack.extend(n.value)
        elif isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                stack.append(k)
                stack.append(v)


class BoundedLoader(yaml.SafeLoader):
    """A safe loader that stops composing past ``MAX_YAML_NODES`` nodes: the limit holds while
    the document is parsed, not after (a 12 MB list of 3M items composed to 2 GB first).
    Subclass it to add constructors (a scenario's ``!include``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.composed = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        self.composed += 1
        if self.composed > MAX_YAML_NODES:
            raise _TooMany
        return super().compose_node(parent, index)


class _TooMany(Exception):
    pass


def load_bounded(
    text: str,
    label: str,
    error: type[AgentloadError] = ConfigError,
    loader: type[BoundedLoader] = BoundedLoader,
) -> tuple[yaml.Node | None, Any]:
    """The node tree and the value of the YAML document ``text``, parsed once: ``error`` past
    ``MAX_YAML_NODES`` while it is composed and once its aliases are expanded
    (``check_yaml_nodes``), before anything is built from it; a value no Python type holds
    (an integer of 5,000 digits) is ``error`` too. YAML errors propagate."""
    parser = loader(text)
    try:
        node = parser.get_single_node()
        check_yaml_nodes(node, label, error)
        return node, parser.construct_document(node) if node is not None else None
    except _TooMany:
        raise error(f"{label}: more than {MAX_YAML_NODES:,} YAML nodes") from None
    except ValueError as exc:  # int("9" * 5000): past Python's digit limit
        why = str(exc).split(";")[0][:160]
        raise error(f"{label}: a value cannot be read ({why})") from None
    finally:
        parser.dispose()


def safe_load(text: str, label: str, error: type[AgentloadError] = ConfigError) -> Any:
    """``yaml.safe_load(text)`` within bounds (``load_bounded``)."""
    return load_bounded(text, label, error)[1]


def why_unreadable(path: Path) -> str:
    """Why ``path``, neither a regular file nor a directory, is no input: it does not exist,
    or it is a FIFO, a device or a socket (never opened: a FIFO would hang the reader,
    ``/dev/zero`` fill memory)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return "no such file or directory"
    if stat.S_ISFIFO(mode):
        kind = "a FIFO"
    elif stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        kind = "a device"
    elif stat.S_ISSOCK(mode):
        kind = "a socket"
    else:
        kind = "nor a directory"
    return f"not a regular file ({kind})"


def read_bytes(
    path: Path,
    *,
    limit: int = MAX_TEXT_BYTES,
    label: str,
    error: type[AgentloadError] = ConfigError,
) -> bytes:
    """The bytes of the regular file ``path`` (see the module docstring)."""
    try:
        fd = open_fd(path)
    except OSError as exc:
        raise error(f"{label}: cannot read: {exc.strerror or exc}") from None
    try:
        return read_fd(fd, limit)
    except Unreadable as exc:
        if exc.why is Why.TOO_BIG:
            raise error(f"{label}: more than the {limit:,} bytes read") from None
        raise error(f"{label}: cannot read: {exc.why.value}") from None


def read_document(path: str | os.PathLike[str], name: str, what: str) -> tuple[Path, Any]:
    """The file (``path``, or ``path/name`` for a directory) and its JSON; one-line
    ``ResultsFormatError`` naming the file when it cannot be read (``what``: "results", ...)."""
    p = Path(path)
    if p.is_dir():
        p = p / name
    if not p.exists():
        raise ResultsFormatError(f"{p}: no such {what} file")
    raw = read_bytes(p, limit=MAX_DOCUMENT_BYTES, label=str(p), error=ResultsFormatError)
    try:
        return p, orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ResultsFormatError(f"{p}: not JSON ({exc})") from None


class Why(Enum):
    """Why an open file is not read."""

    DIRECTORY = "is a directory"
    NOT_REGULAR = "not a regular file"
    TOO_BIG = "too big"


class Unreadable(Exception):
    """``read_fd`` did not read the file: ``why``."""

    def __init__(self, why: Why) -> None:
        super().__init__(why.value)
        self.why = why


def open_fd(path: str | os.PathLike[str]) -> int:
    """``path`` opened for reading without blocking (a FIFO never hangs the opener);
    ``OSError`` when it cannot be opened."""
    return os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)


def regular_fd(fd: int, limit: int | None = None) -> os.stat_result:
    """The stat of the open file ``fd`` when it is a regular file (of at most ``limit`` bytes);
    else ``fd`` is closed and ``Unreadable`` raised."""
    try:  # checked before fdopen, which refuses a directory with its own error
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise Unreadable(Why.DIRECTORY)
        if not stat.S_ISREG(st.st_mode):
            raise Unreadable(Why.NOT_REGULAR)
        if limit is not None and st.st_size > limit:
            raise Unreadable(Why.TOO_BIG)
    except BaseException:
        os.close(fd)
        raise
    return st


def read_fd(fd: int, limit: int) -> bytes:
    """The bytes of the open file ``fd`` (closed after), a regular file of at most ``limit``
    bytes; ``Unreadable`` otherwise. The one bounded read that every host-side reader of a
    file it does not trust uses (``read_bytes``; ``tools.wsfs``)."""
    regular_fd(fd, limit)
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise Unreadable(Why.TOO_BIG)
    return data
