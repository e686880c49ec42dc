"""The kinds of a failed request: ``error_kind`` of a request record (and of results.json).

``ErrorKind`` holds the fixed kinds; ``http_kind`` names the one that carries a status
(``http_<status>``). The values are the strings results.json has always held, so a file
written before this module and one written after read the same. Nothing here imports
anything, so whatever reads results.json can use it too.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ErrorKind", "http_kind"]


class ErrorKind(StrEnum):
    """A fixed kind of request failure (a ``str``: its value is what results.json holds)."""

    TIMEOUT = "timeout"
    """No complete answer within ``--timeout`` (or a network step of httpx timed out)."""
    CONNECT = "connect"
    """No connection to the endpoint (refused, unreachable, an OS-level socket error)."""
    RESET = "reset"
    """The connection broke while the request or its answer was on it."""
    TRUNCATED = "truncated"
    """The stream ended before its last event (no ``[DONE]``, no finish reason)."""
    STREAM_ERROR = "stream_error"
    """An event that does not parse, or one that reports an error."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The endpoint refused the prompt as longer than its context."""
    INVALID_USAGE = "invalid_usage"
    """A usage report whose counts are not token counts."""
    CLIENT_ERROR = "client_error"
    """Any other failure of the HTTP client."""
    WORKER_LOST = "worker_lost"
    """replay --ray: the Ray worker that had the request in flight was lost."""
    ENDPOINT_ERROR = "endpoint_error"
    """generate's live benchmark: the agent's call failed for good after its retries."""


def http_kind(status: int) -> str:
    """The kind of a request answered with HTTP ``status`` (not 200): ``http_<status>``."""
    return f"http_{status}"
