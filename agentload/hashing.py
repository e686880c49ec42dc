"""Canonical JSON and content hashes shared by the trace, the simulator and replay."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

__all__ = ["canonical_json", "content_id", "sha256_hex"]

_OPTS = orjson.OPT_SORT_KEYS


def canonical_json(obj: Any) -> bytes:
    """JSON with sorted keys and no whitespace: the same object always gives the same bytes."""
    return orjson.dumps(obj, option=_OPTS)


def content_id(obj: Any) -> str:
    """Content address of a JSON value: blake2b-128 over its canonical JSON, as 32 hex chars."""
    return hashlib.blake2b(canonical_json(obj), digest_size=16).hexdigest()


def sha256_hex(data: bytes) -> str:
    """sha256 of raw bytes, hex."""
    return hashlib.sha256(data).hexdigest()
