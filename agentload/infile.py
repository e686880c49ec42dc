"""Reading an input file that is not a trace, bounded: a regular file of at most a known size.

``read_bytes(path, limit=..., label=...)`` opens without blocking (a FIFO named as a scenario or
an ``!include`` never hangs), refuses anything but a regular file (``/dev/zero`` never fills
memory), and reads at most ``limit`` bytes. Every problem is one ``ConfigError`` (or the
``error`` class the caller names) that starts with ``label``. Traces have their own bounded
reader (``recorder.reader``).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import yaml

from agentload.errors import AgentloadError, ConfigError

__all__ = [
    "MAX_DOCUMENT_BYTES",
    "MAX_TEXT_BYTES",
    "MAX_YAML_NODES",
    "check_yaml_nodes",
    "read_bytes",
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


def read_bytes(
    path: Path,
    *,
    limit: int = MAX_TEXT_BYTES,
    label: str,
    error: type[AgentloadError] = ConfigError,
) -> bytes:
    """The bytes of the regular file ``path`` (see the module docstring)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"{label}: cannot read: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{label}: cannot read: is a directory")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{label}: cannot read: not a regular file")
        if st.st_size > limit:
            raise error(f"{label}: {st.st_size:,} bytes, more than the {limit:,} read")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise error(f"{label}: more than the {limit:,} bytes read")
    return data
