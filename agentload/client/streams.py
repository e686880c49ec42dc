"""Reading an answer into an ``Outcome``: its status, every content event's time, its usage.

A chat answer is read by ``chatsse.ChatReader`` (Server-Sent Events, with fast paths for runs of
plain text deltas), fed one network read at a time by the answer's ``pump`` (a lean connection
feeds it from its socket's callback); a Responses or Messages answer by ``agentload.wire``'s
reader for that API. A *content event* is a chunk whose delta has non-empty ``content``,
``reasoning_content`` or ``tool_calls`` (of a native stream: an event that carries output:
text, a tool name or arguments); each gets the time of the network read that brought it: a
``clock()`` reading, or the kernel's receive time of that read when the connection has one
(``netback``) and it lies between the send and the reading. A usage report whose counts are
not token counts fails the request as ``invalid_usage``; a stream that ends early is
``truncated``. Asked for the answer itself (an agent's call), any API's stream is read whole
by ``wire``'s reader for it, the one reassembler of streamed text and tool calls, and every
event's time is kept too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

from agentload.client.chatsse import ChatReader, fold_usage
from agentload.client.failures import answer_failure, reported_failure
from agentload.client.netback import SocketStream
from agentload.client.outcome import Outcome
from agentload.errors import WireError
from agentload.errortext import clip
from agentload.measure.errorkinds import ErrorKind
from agentload.wire import WireReply, stream_reader

__all__ = ["MAX_ERROR_BODY", "Answer", "ChunkHook", "read_answer", "stamped"]

MAX_ERROR_BODY = 65536
"""How much of an error answer's body is kept (``Outcome.body``)."""

ChunkHook = Callable[[int], None]
"""Gets the count of content events read so far, after each one."""


class Answer(Protocol):
    """An answer's status and headers, its body still to read (``lean.LeanAnswer`` on plain
    HTTP, ``pool.HttpxAnswer`` over httpx)."""

    status_code: int
    network_stream: object
    """The connection it came on (``netback.SocketStream``: kernel receive times)."""

    def header(self, name: str) -> str | None: ...

    def aiter_raw(self) -> AsyncIterator[bytes]: ...

    async def pump(self, feed: Callable[[bytes, int], None]) -> None:
        """The body to its end, one network read at a time: ``feed(data, rx_ns)``, with the
        kernel's receive time of that read (0 when unknown)."""

    async def aread(self, limit: int | None = None) -> bytes: ...

    async def aclose(self) -> None: ...


async def read_answer(
    resp: Answer,
    out: Outcome,
    api: str,
    clock: Callable[[], int],
    reply: ChunkHook | bool = False,
) -> None:
    """Read the answer to a request in ``api`` into ``out``: a failure when it is not HTTP
    200, else its stream (with ``reply``: the answer itself too, a callable getting the count
    of content events so far after each)."""
    out.status = resp.status_code
    if resp.status_code != 200:
        body = (await resp.aread(MAX_ERROR_BODY))[:MAX_ERROR_BODY]
        out.body = body
        out.retry_after = resp.header("retry-after")
        out.error_kind = answer_failure(resp.status_code, body)
        out.error = clip(body[:2000].decode("utf-8", "replace"))
    elif api == "chat" and reply is False:
        reader = ChatReader(out, clock)
        await resp.pump(reader.feed)
        reader.finish()
    else:
        await _read_wire(resp, out, api, clock, reply)


def stamped(resp: Answer) -> SocketStream | None:
    """The connection of ``resp`` when it has kernel receive times, else None."""
    rx = resp.network_stream
    return rx if type(rx) is SocketStream and rx.stamped else None


async def _read_wire(
    resp: Answer,
    out: Outcome,
    api: str,
    clock: Callable[[], int],
    reply: ChunkHook | bool = False,
) -> None:
    """A stream of any API read by ``agentload.wire``'s reader for it: one time per event
    that carries output (text, a tool name or arguments) in ``chunk_ns``; with ``reply``,
    the answer in ``out.reply`` and one time per event in ``event_ns`` too (a callable
    ``reply`` gets the count of content events after each). The stream is left at its first
    malformed event (``stream_error``)."""
    content = out.chunk_ns
    events: list[int] | None = [] if reply is not False else None
    on_chunk = reply if callable(reply) else None
    rx = stamped(resp)
    send = out.send_ns
    reader = stream_reader(api)  # type: ignore[arg-type]
    async for raw in resp.aiter_raw():
        now = clock()
        if rx is not None and send < rx.rx_ns < now:
            now = rx.rx_ns
        seen = reader.events
        try:
            n = reader.feed(raw)
        except WireError as exc:
            out.error_kind, out.error = ErrorKind.STREAM_ERROR, str(exc)
            break
        if events is not None:
            events.extend([now] * (reader.events - seen))
        for _ in range(n):
            content.append(now)
            if on_chunk is not None:
                on_chunk(len(content))
    got = reader.reply()
    if events is not None:
        out.reply, out.event_ns = got, events
    _finish(out, got, ended=reader.done or (api == "chat" and got.finish_reason is not None))


def _finish(out: Outcome, reply: WireReply, ended: bool) -> None:
    """Fold a native or whole reply's usage, finish and error into ``out``; a stream that
    did not reach its end is ``truncated``."""
    fold_usage(reply.usage or {}, out)
    out.finish_reason = reply.finish_reason
    if reply.error and out.error_kind is None:
        out.error_kind = reported_failure(reply.error.encode())
        out.error = clip(reply.error)
    if out.chunk_ns:
        out.first_ns = out.chunk_ns[0]
    if out.error_kind is None and not ended:
        out.error_kind, out.error = ErrorKind.TRUNCATED, "stream ended before its last event"
