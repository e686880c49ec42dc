"""``agentload trace import``: dispatch to the format's importer."""

from __future__ import annotations

from pathlib import Path

from agentload.outfile import check_output

__all__ = ["import_trace"]


def import_trace(fmt: str, files: list[Path], out: Path, *, force: bool = False) -> str:
    """Import ``files`` of ``fmt`` into the trace ``out``; returns the summary line. ``out``
    is refused up front when it is one of ``files`` or exists (without ``force``)."""
    check_output(out, files, force=force)
    if fmt == "weka":
        from agentload.interop.weka import import_weka

        return import_weka(files, out)
    if fmt == "tracelab":
        from agentload.interop.tracelab import import_tracelab

        return import_tracelab(files, out)
    if fmt == "mooncake":
        from agentload.interop.mooncake import import_mooncake

        return import_mooncake(files, out)
    raise AssertionError(fmt)
