"""Text helpers: head+tail truncation, workspace paths, deterministic test output."""

from __future__ import annotations

import os
import re
from pathlib import Path

from agentload.tools.result import ToolError

__all__ = ["PATH_MAX", "WORKSPACE", "normalise_test_output", "truncate_head_tail", "workspace_path"]

WORKSPACE = "/workspace"
PATH_MAX = 4096

_RAN = re.compile(r"^(Ran \d+ tests?) in \d+(?:\.\d+)?s$", re.MULTILINE)
_PYTEST_SUMMARY = re.compile(r"^(=+ .*?) in \d+(?:\.\d+)?s(?: \([0-9:]+\))? (=+)$", re.MULTILINE)
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def truncate_head_tail(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_chars``: the head and the tail, on line boundaries, with a
    marker saying how much of the middle was left out. Returns (text, truncated)."""
    if len(text) <= max_chars:
        return text, False
    budget = max(0, max_chars - 64)  # room for the marker
    head = text[: budget // 2]
    tail = text[len(text) - (budget - len(head)) :]
    if "\n" in head:
        head = head[: head.rfind("\n") + 1]
    if "\n" in tail:
        tail = tail[tail.find("\n") + 1 :]
    omitted = len(text) - len(head) - len(tail)
    marker = f"[... {omitted} characters omitted ...]\n"
    if not head.endswith("\n"):
        marker = "\n" + marker
    return head + marker + tail, True


def normalise_test_output(text: str, workdir: str) -> str:
    """Test output made comparable across runs and sandboxes: the sandbox's workspace path shown as
    ``/workspace``, run times dropped (``Ran 12 tests``), object addresses as ``0x0``."""
    if workdir != WORKSPACE:
        text = text.replace(workdir.rstrip("/") + "/", WORKSPACE + "/")
    text = _RAN.sub(r"\1", text)
    text = _PYTEST_SUMMARY.sub(r"\1 \2", text)
    return _ADDRESS.sub("0x0", text)


def workspace_path(root: Path, path: str | None) -> str:
    """``path`` as the agent means it, relative to the workspace root (``.`` for the root);
    ``ToolError`` when it leaves the workspace by ``..`` or an absolute path. Lexical only:
    symlinks are followed, and kept inside, where the file is touched (``tools.wsfs``)."""
    p = (path or "").strip()
    if len(p) > PATH_MAX or "\0" in p:  # the toolbox refuses NUL already; os.path would raise
        raise ToolError(f"path is not usable: longer than {PATH_MAX} characters or contains NUL")
    if p in ("", ".", WORKSPACE, WORKSPACE + "/"):
        return "."
    if p.startswith(WORKSPACE + "/"):
        p = p[len(WORKSPACE) + 1 :]
    elif os.path.isabs(p):
        for prefix in (str(root).rstrip("/"), os.path.realpath(root).rstrip("/")):
            if p == prefix or p.startswith(prefix + "/"):
                p = p[len(prefix) :].lstrip("/") or "."
                break
        else:
            raise ToolError(f"{path}: outside the workspace (paths are relative to its root)")
    shown = os.path.normpath(p)
    if shown == ".." or shown.startswith("../"):
        raise ToolError(f"{path}: outside the workspace (symlinks and .. included)")
    return shown
