"""How a failed request is classified: each way it can fail to its error kind, and what that
means for a retry.

A failure of the HTTP client (httpx's exceptions, an OS socket error), an answer that is not
HTTP 200, and an error an endpoint reports inside a stream each become an ``ErrorKind``
(``measure.errorkinds``) or ``http_<status>``; a prompt refused as too long is
``context_overflow`` whichever way it came back. Replay counts the kind; ``generate``'s agents
ask :func:`verdict` whether to send the request again (``Verdict``), and wait what the
server's ``Retry-After`` asks (:func:`retry_after_s`).
"""

from __future__ import annotations

import datetime
import email.utils
from enum import StrEnum

import httpx
import orjson

from agentload.client.lean import LeanError
from agentload.errortext import is_context_overflow, is_request_error
from agentload.measure.errorkinds import ErrorKind, http_kind

__all__ = [
    "TRANSIENT_STATUS",
    "Verdict",
    "answer_failure",
    "answer_text",
    "reported_failure",
    "retry_after_s",
    "transport_failure",
    "verdict",
]

TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 502, 503, 504})
"""Statuses that say "not now": the same request may well succeed later."""


class Verdict(StrEnum):
    """What a failed attempt means for the next one (``SessionEnd.cause`` holds the value)."""

    TRANSIENT = "transient"
    """Send it again after a wait."""
    CONTEXT_OVERFLOW = "context_overflow"
    """The prompt does not fit the model's context: it never will."""
    BAD_REQUEST = "bad_request"
    """A 4xx other than "not now": the endpoint would refuse it again."""
    REQUEST_ERROR = "request_error"
    """A server error whose text says the request itself is malformed."""
    REPEATED = "repeated"
    """A plain server error that came back with the same text as the attempt before."""


def transport_failure(exc: httpx.HTTPError | LeanError | OSError) -> tuple[ErrorKind, str]:
    """The kind and text of a request the HTTP client could not complete."""
    if isinstance(exc, LeanError):
        return exc.kind, str(exc)
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
    """The kind of an answer with HTTP ``status`` (not 200) and body ``text``: a refusal
    whose text says the prompt is too long is ``context_overflow`` (at any status but a
    "not now" one: a rate limit's "too many tokens" is not a full context)."""
    if status >= 400 and status not in TRANSIENT_STATUS and is_context_overflow(text):
        return ErrorKind.CONTEXT_OVERFLOW
    return http_kind(status)


def reported_failure(text: bytes) -> ErrorKind:
    """The kind of an error the endpoint reported in a stream (its JSON or text)."""
    return ErrorKind.CONTEXT_OVERFLOW if is_context_overflow(text) else ErrorKind.STREAM_ERROR


def answer_text(status: int, body: bytes) -> str:
    """One line of an error answer: ``HTTP 503: <the error's message>`` (OpenAI's and
    Anthropic's ``{"error": {"message"}}``), else the body as text."""
    msg: object = None
    try:
        obj = orjson.loads(body)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        msg = err.get("message") if isinstance(err, dict) else err
    if not msg:
        msg = body.decode("utf-8", "replace").strip() or "no text"
    return f"HTTP {status}: {msg}"


def verdict(kind: str, status: int | None, text: str, last: str | None) -> Verdict:
    """What a failed attempt of ``kind`` (with its HTTP ``status`` and error ``text``; ``last``:
    the previous attempt's text, if it failed too) means for the next:

    * ``context_overflow`` (however it came back): ``CONTEXT_OVERFLOW``;
    * 408, 409, 425, 429, 502, 503, 504, no connection, a timeout, a stream cut or garbled:
      ``TRANSIENT``;
    * any other 4xx (400, 401, 403, 404, 422 ...): ``BAD_REQUEST``;
    * another 5xx (a plain 500), or an error reported in the stream: ``TRANSIENT``, unless its
      text says the request itself is malformed (``REQUEST_ERROR``, as llama.cpp's "Failed to
      parse tool call arguments as JSON") or a 5xx came back with the same text as the
      attempt before (``REPEATED``).
    """
    if kind == ErrorKind.CONTEXT_OVERFLOW:
        return Verdict.CONTEXT_OVERFLOW
    if status is not None and kind == http_kind(status):
        if status in TRANSIENT_STATUS:
            return Verdict.TRANSIENT
        if status < 500:
            return Verdict.BAD_REQUEST
        if is_request_error(text):
            return Verdict.REQUEST_ERROR
        return Verdict.REPEATED if text == last else Verdict.TRANSIENT
    if kind == ErrorKind.STREAM_ERROR and is_request_error(text):
        return Verdict.REQUEST_ERROR
    return Verdict.TRANSIENT


def retry_after_s(value: str | None) -> float | None:
    """The wait a ``Retry-After`` header asks for (seconds, or an HTTP date), in seconds."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.UTC)
    return max(0.0, (when - datetime.datetime.now(datetime.UTC)).total_seconds())
