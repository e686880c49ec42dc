"""How a failed request is classified: each way it can fail to its error kind and text.

A failure of the HTTP client (httpx's exceptions, an OS socket error), an answer that is not
HTTP 200, and an error an endpoint reports inside a stream each become an ``ErrorKind``
(``errorkinds``) or ``http_<status>``; a prompt refused as too long is ``context_overflow``
whichever way it came back.
"""

from __future__ import annotations

import httpx

from agentload.errortext import is_context_overflow
from agentload.measure.errorkinds import ErrorKind, http_kind

__all__ = ["answer_failure", "reported_failure", "transport_failure"]


def transport_failure(exc: httpx.HTTPError | OSError) -> tuple[ErrorKind, str]:
    """The kind and text of a request the HTTP client could not complete."""
    if isinstance(exc, httpx.TimeoutException):
        return ErrorKind.TIMEOUT, f"{type(exc).__name__}"
    if isinstance(exc, httpx.ConnectError):
        return ErrorKind.CONNECT, f"{type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        return ErrorKind.RESET, f"{type(exc).__name__}: {exc}"
    if isinstance(exc, httpx.HTTPError):
        return ErrorKind.CLIENT_ERROR, f"{type(exc).__name__}: {exc}"
    return ErrorKind.CONNECT, f"{type(exc).__name__}: {exc}"


def answer_failure(status: int, text: bytes) -> str:
    """The kind of an answer with HTTP ``status`` (not 200) and body ``text``."""
    if status in (400, 413, 422) and is_context_overflow(text):
        return ErrorKind.CONTEXT_OVERFLOW
    return http_kind(status)


def reported_failure(text: bytes) -> ErrorKind:
    """The kind of an error the endpoint reported in a stream (its JSON or text)."""
    return ErrorKind.CONTEXT_OVERFLOW if is_context_overflow(text) else ErrorKind.STREAM_ERROR
