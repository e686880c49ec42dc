"""``agentload trace export``: dispatch to the format's exporter."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

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
    if fmt == "weka":
        from agentload.interop.weka_out import export_weka

        assert out is not None
        return export_weka(traces, out)
    if fmt == "mooncake":
        from agentload.interop.mooncake_out import export_mooncake

        assert out is not None
        return export_mooncake(traces, out, force=force)
    if fmt == "otel":
        from agentload.interop.otel import export_otel

        return export_otel(traces, out, content=content, endpoint=otlp_endpoint, force=force)
    raise AssertionError(fmt)
