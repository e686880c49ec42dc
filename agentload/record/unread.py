"""A request the proxy forwards but records as no call: which ones it must say it did not read
(``unread_call``), and the event that says so (``unread_event``: an ``Embedding`` or an
``UnreadRequest``)."""

from __future__ import annotations

from agentload.errortext import clip
from agentload.trace.events import Embedding, EventPayload, UnreadRequest
from agentload.wire import UNRECORDED, Api, Unrecorded, counts_tokens

__all__ = ["unread_call", "unread_event"]

_WITH_BODY = (b"POST", b"PUT", b"PATCH")


def unread_call(method: bytes, path: str) -> bool:
    """Whether a request the proxy does not read as a call is one it must say it did not read:
    one with a body (a ``GET`` of the models, a health check, carry none) that does not ask
    about a call (``/v1/messages/count_tokens``, Gemini's ``:countTokens``)."""
    return method in _WITH_BODY and not counts_tokens(path)


def unread_event(
    method: str,
    path: str,
    known: Unrecorded | None,
    status: int | None,
    sizes: tuple[int, int],
    api: Api | None = None,
    why: str | None = None,
) -> EventPayload:
    """The event of a request recorded as no call: an ``Embedding`` for an embeddings request,
    else an ``UnreadRequest`` that says why (``known``: the known API it speaks, if any; ``why``:
    why a request of ``api`` was not recorded); ``sizes``: the request's and the answer's bytes."""
    path = clip(path, 200)
    if known == "embeddings":
        return Embedding(
            method=method, path=path, status=status, request_bytes=sizes[0], answer_bytes=sizes[1]
        )
    why = why or (UNRECORDED[known] if known else "not a path of an API agentload records")
    return UnreadRequest(
        api=api,
        request_kind=known,
        path=path,
        method=method,
        status=status,
        request_bytes=sizes[0],
        answer_bytes=sizes[1],
        error=clip(f"{method} {path}: {why}", 240),
    )
