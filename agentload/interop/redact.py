"""``agentload trace redact`` (stub; replaced by its implementation)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["redact_trace"]


def redact_trace(trace: Path, out: Path, salt: bytes) -> str:
    """Write ``trace`` redacted to ``out``; returns the summary line."""
    raise NotImplementedError
