"""Import: mooncake (stub; replaced by its implementation)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["import_mooncake"]


def import_mooncake(files: list[Path], out: Path) -> str:
    """Import ``files`` into the trace ``out``; returns the summary line."""
    raise NotImplementedError
