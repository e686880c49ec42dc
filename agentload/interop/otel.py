"""Export: OpenTelemetry GenAI spans (stub; replaced by its implementation)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["export_otel"]


def export_otel(
    traces: Sequence[Path], out: Path | None, *, content: bool, endpoint: str | None
) -> list[str]:
    """Export ``traces`` as OTLP JSON to ``out``, or over OTLP/HTTP to ``endpoint``."""
    raise NotImplementedError
