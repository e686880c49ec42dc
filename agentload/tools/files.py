"""The file tools' logic: ``read_file``'s checks and output (``check_file``, ``decode``,
``lines_of``: the toolbox reads the bytes with a command in the sandbox, as a sandboxed
harness does), and ``list_files`` and ``edit_file``,
served from the workspace on the host (it is the sandbox's bind mount, so both see the same
files). Every host-side access goes through ``wsfs``: a command in the sandbox that swaps a
directory for a symlink mid-call cannot make the host read or write outside the workspace."""

from __future__ import annotations

from pathlib import Path

from agentload.tools import wsfs
from agentload.tools.result import ToolError
from agentload.tools.text import workspace_path

__all__ = [
    "LIST_CAP",
    "READ_MAX_BYTES",
    "check_file",
    "decode",
    "edit_file",
    "lines_of",
    "list_files",
]

LIST_CAP = 2000
READ_MAX_BYTES = 4 * 1024 * 1024
_SKIP_DIRS = (".git", "__pycache__")


def check_file(root: Path, shown: str) -> None:
    """ToolError unless ``shown`` is a readable-sized regular file of the workspace."""
    kind, size = wsfs.kind_of(root, shown)
    if kind is wsfs.Kind.MISSING:
        raise ToolError(f"{shown}: no such file")
    if kind is wsfs.Kind.DIR:
        raise ToolError(f"{shown}: is a directory (use list_files)")
    if kind is not wsfs.Kind.FILE:
        raise ToolError(f"{shown}: not a regular file")
    if size > READ_MAX_BYTES:
        raise ToolError(f"{shown}: larger than {READ_MAX_BYTES // 1024 // 1024} MiB")


def decode(data: bytes, shown: str, errors: str = "replace") -> str:
    """A file's bytes as text; ToolError for a binary file."""
    if b"\0" in data[:8192]:
        raise ToolError(f"{shown}: binary file")
    return data.decode("utf-8", errors=errors)


def lines_of(text: str, shown: str, start_line: int | None, end_line: int | None) -> str:
    """``# path (lines a-b of N)`` then the text of those lines (1-based, inclusive)."""
    lines = text.splitlines(keepends=True)
    n = len(lines)
    a = 1 if start_line is None else start_line
    b = n if end_line is None else min(end_line, n)
    if a < 1 or (end_line is not None and end_line < a):
        raise ToolError(f"bad line range {a}-{end_line}: lines are 1-based and start <= end")
    if n and a > n:
        raise ToolError(f"{shown} has {n} lines; start_line {a} is past the end")
    body = "".join(lines[a - 1 : b])
    if body and not body.endswith("\n"):
        body += "\n"
    return f"# {shown} (lines {a if n else 0}-{b} of {n})\n{body}"


def list_files(root: Path, path: str | None) -> str:
    """Every file under ``path`` (relative to the workspace root), one per line, sorted."""
    shown = workspace_path(root, path)
    names = wsfs.list_tree(root, shown, _SKIP_DIRS)
    out = sorted(_printable(n) for n in names if not n.endswith(".pyc"))
    if not out:
        return f"(no files under {shown})\n"
    more = len(out) - LIST_CAP
    text = "\n".join(out[:LIST_CAP]) + "\n"
    if more > 0:
        text += f"[... {more} more files; list a subdirectory]\n"
    return text


def _printable(name: str) -> str:
    """A file name as text: bytes that are not UTF-8 (``os`` gives them as lone surrogates, which
    no tool output may carry) shown as U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def edit_file(root: Path, path: str, old: str, new: str) -> str:
    """Replace the one exact occurrence of ``old`` by ``new``; refuses none or several."""
    shown = workspace_path(root, path)
    if ".git" in Path(shown).parts:
        raise ToolError(f"{shown}: the repository's .git directory is not editable")
    if not old:
        raise ToolError("`old` is empty: give the exact text to replace")
    # bytes that are not UTF-8 survive the edit
    text = decode(wsfs.read_bytes(root, shown, READ_MAX_BYTES), shown, "surrogateescape")
    count = text.count(old)
    if count == 0:
        raise ToolError(f"{shown}: `old` text not found (it must match exactly, whitespace too)")
    if count > 1:
        raise ToolError(f"{shown}: `old` text occurs {count} times; include more context")
    at = text.index(old)
    first = text.count("\n", 0, at) + 1
    updated = text.replace(old, new, 1)
    wsfs.replace_bytes(root, shown, updated.encode("utf-8", "surrogateescape"))
    old_n, new_n = old.count("\n") + 1, new.count("\n") + 1
    return (
        f"edited {shown}: replaced lines {first}-{first + old_n - 1} "
        f"({old_n} line{'s' if old_n != 1 else ''} -> {new_n} line{'s' if new_n != 1 else ''})\n"
    )
