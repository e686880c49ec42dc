"""Export: weka_out (stub; replaced by its implementation)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["export_weka"]


def export_weka(traces: Sequence[Path], out: Path) -> list[str]:
    """Export ``traces`` to ``out``; returns the summary lines."""
    raise NotImplementedError
