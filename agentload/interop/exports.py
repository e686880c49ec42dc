"""``agentload trace export``: dispatch to the format's exporter (``formats.EXPORTS``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentload.interop.formats import export_format

__all__ = ["export_trace"]


def export_trace(
    fmt: str,
    traces: Sequence[Path],
    out: Path | None,
    *,
    content: bool = False,
    otlp_endpoint: str | None = None,
    force: bool = False,
) -> list[str]:
    """Export ``traces`` as ``fmt`` to ``out`` (or, for otel, to ``otlp_endpoint``); returns
    the summary lines."""
    chosen = export_format(fmt)
    assert out is not None or chosen.out_optional
    return chosen.write(traces, out, force=force, content=content, endpoint=otlp_endpoint)
