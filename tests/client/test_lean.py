"""The lean HTTP/1.1 connection (``agentload.client.lean``) against a raw-socket server on
127.0.0.1: it reuses a kept-alive connection, retries once only a reused one the server closed,
reads every body framing, refuses a malformed answer, and never writes a header it would not
read back; an answer's body read by its task (``aread``) or pumped from the socket's callback
(``pump``: how a chat stream is read) alike."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from agentload.client.lean import LeanConnection, LeanError
from agentload.client.netback import AsyncioBackend
from agentload.measure.errorkinds import ErrorKind
from agentload.replay.waker import Waker

OK = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"


@dataclass
class Raw:
    """Answers the n-th request with ``answers[n]`` (then closes, with ``close_after``)."""

    answers: list[bytes]
    close_after: set[int] = field(default_factory=set)
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                n = len(self.requests)
                self.requests.append(head + body)
                writer.write(self.answers[min(n, len(self.answers) - 1)])
                await writer.drain()
                if n in self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def served(raw: Raw) -> AsyncIterator[LeanConnection]:
    server = await asyncio.start_server(raw.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = LeanConnection(
        f"http://127.0.0.1:{port}/v1", {"x-fixed": "1"}, AsyncioBackend(), 5.0, 4.0
    )
    try:
        yield conn
    finally:
        await conn.close()
        server.close()
        await server.wait_closed()


READS = ["aread", "pump"]


async def _get(
    conn: LeanConnection, headers: dict[str, str] | None = None, how: str = "aread"
) -> tuple[int, bytes]:
    stamps: list[int] = []
    answer = await conn.request(
        "POST", "/v1/chat/completions?x=1", b"{}", headers, lambda: stamps.append(1)
    )
    assert stamps  # called as the bytes went out (again on a retry)
    if how == "aread":
        return answer.status_code, await answer.aread()
    parts: list[bytes] = []
    try:
        await answer.pump(lambda data, _rx: parts.append(data))
    finally:
        await answer.aclose()
    return answer.status_code, b"".join(parts)


@pytest.mark.parametrize("how", READS)
def test_a_kept_alive_connection_carries_the_next_request(how: str) -> None:
    raw = Raw([OK])

    async def go() -> None:
        async with served(raw) as conn:
            assert await _get(conn, how=how) == (200, b"ok")
            assert await _get(conn, {"x-session": "s1"}, how) == (200, b"ok")

    asyncio.run(go())
    assert raw.connections == 1
    first = raw.requests[0]
    assert first.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nhost: 127.0.0.1:")
    assert b"\r\nx-fixed: 1\r\n" in first and b"\r\ncontent-length: 2\r\n" in first
    assert b"x-session: s1" in raw.requests[1]


@pytest.mark.parametrize("how", READS)
def test_a_head_read_before_is_framed_afresh_and_by_the_request_it_answers(how: str) -> None:
    """A head known by its bytes (``lean._KNOWN``) gives each answer a framing of its own,
    and the answer to a HEAD request, with the very bytes of a GET's head, no body."""
    head = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"
    raw = Raw([head + b"ok", head + b"ok", head, head + b"ok"])

    async def go() -> list[tuple[int, bytes]]:
        async with served(raw) as conn:
            got = [await _get(conn, how=how), await _get(conn, how=how)]
            answer = await conn.request("HEAD", "/v1/models", b"", None, lambda: None)
            got.append((answer.status_code, await answer.aread()))
            got.append(await _get(conn, how=how))
            return got

    assert asyncio.run(go()) == [(200, b"ok"), (200, b"ok"), (200, b""), (200, b"ok")]
    assert raw.connections == 1  # every answer read to its end: the connection carried all


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nok",
    ],
    ids=["connection-close", "http-1.0"],
)
@pytest.mark.parametrize("how", READS)
def test_an_answer_that_ends_the_connection_is_not_reused(answer: bytes, how: str) -> None:
    raw = Raw([answer], close_after={0, 1})

    async def go() -> None:
        async with served(raw) as conn:
            assert await _get(conn, how=how) == (200, b"ok")
            assert await _get(conn, how=how) == (200, b"ok")

    asyncio.run(go())
    assert raw.connections == 2


def test_a_reused_connection_the_server_closed_is_retried_once_on_a_new_one() -> None:
    raw = Raw([OK], close_after={0})  # answers, then closes silently: an idle timeout

    async def go() -> None:
        async with served(raw) as conn:
            assert await _get(conn) == (200, b"ok")
            await asyncio.sleep(0.05)
            assert await _get(conn) == (200, b"ok")

    asyncio.run(go())
    assert raw.connections == 2
    assert len(raw.requests) == 2


def test_a_fresh_connection_that_fails_is_not_retried() -> None:
    raw = Raw([b""], close_after={0})  # reads the request, closes without a byte

    async def go() -> LeanError:
        async with served(raw) as conn:
            with pytest.raises(LeanError) as err:
                await _get(conn)
            return err.value

    err = asyncio.run(go())
    assert err.kind == ErrorKind.RESET
    assert raw.connections == 1 and len(raw.requests) == 1


@pytest.mark.parametrize(
    ("answer", "body"),
    [
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n3\r\n!!!\r\n0\r\n\r\n",
            b"ok!!!",
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok", b"ok"),
        (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", b"until the end"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
    ids=["chunked", "100-continue", "to-close", "204"],
)
@pytest.mark.parametrize("how", READS)
def test_every_body_framing_is_read(answer: bytes, body: bytes, how: str) -> None:
    raw = Raw([answer], close_after={0})

    async def go() -> tuple[int, bytes]:
        async with served(raw) as conn:
            return await _get(conn, how=how)

    assert asyncio.run(go())[1] == body


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\nok",
        b"HTTP/1.1 2000 OK\r\ncontent-length: 2\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\nx: y\r\n\r\nok",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
        b"HTTP/1.1 200 OK\r\n bad: fold\r\ncontent-length: 2\r\n\r\nok",
    ],
    ids=["cl-and-te", "status", "bare-lf", "chunk-size", "short-body", "obs-fold"],
)
@pytest.mark.parametrize("how", READS)
def test_a_malformed_answer_is_a_reset_and_closes_the_connection(answer: bytes, how: str) -> None:
    raw = Raw([answer], close_after={0})

    async def go() -> tuple[LeanError, bool]:
        async with served(raw) as conn:
            with pytest.raises(LeanError) as err:
                await _get(conn, how=how)
            return err.value, conn.open

    err, still_open = asyncio.run(go())
    assert err.kind == ErrorKind.RESET
    assert "RemoteProtocolError" in str(err) or "ReadError" in str(err)
    assert not still_open


@pytest.mark.parametrize(
    "headers",
    [{"x-session": "a\r\nx-injected: 1"}, {"bad name": "v"}, {"x-nul": "a\x00b"}],
    ids=["crlf-value", "space-in-name", "nul"],
)
def test_a_header_that_cannot_be_written_sends_nothing(headers: dict[str, str]) -> None:
    raw = Raw([OK])

    async def go() -> LeanError:
        async with served(raw) as conn:
            with pytest.raises(LeanError) as err:
                await _get(conn, headers)
            return err.value

    err = asyncio.run(go())
    assert err.kind == ErrorKind.CLIENT_ERROR
    assert raw.requests == []


def test_a_partly_read_answer_closes_its_connection() -> None:
    big = b"x" * 300_000
    raw = Raw([b"HTTP/1.1 500 Oops\r\ncontent-length: %d\r\n\r\n%s" % (len(big), big)])

    async def go() -> tuple[int, bool]:
        async with served(raw) as conn:
            answer = await conn.request("POST", "/v1/x", b"{}", None, lambda: None)
            got = await answer.aread(1000)
            return len(got), conn.open

    size, still_open = asyncio.run(go())
    assert 1000 <= size < len(big)
    assert not still_open


def test_a_request_cancelled_before_its_answer_leaves_its_connection_closed() -> None:
    raw = Raw([b"", OK])  # the first request gets no answer at all (a black hole)

    async def go() -> bool:
        async with served(raw) as conn:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await _get(conn)
            was_open = conn.open
            assert await _get(conn) == (200, b"ok")
            return was_open

    assert asyncio.run(go()) is False
    assert raw.connections == 2  # the second request went on a new connection


def test_a_scheduled_request_is_written_by_its_gate_at_its_due_time() -> None:
    """``due``: the waker writes the request at its time (never before), stamped as it goes;
    the request's task only reads the answer."""
    raw = Raw([OK])
    got: list[int] = []

    async def go() -> tuple[int, int]:
        waker = Waker()
        async with served(raw) as conn:
            await _get(conn)  # connected and kept alive
            due = time.perf_counter_ns() + 20_000_000
            answer = await conn.request(
                "POST",
                "/v1/x",
                b"{}",
                None,
                lambda: got.append(time.perf_counter_ns()),
                (waker, due),
            )
            assert await answer.aread() == b"ok"
        await waker.aclose()
        return due, len(raw.requests)

    due, requests = asyncio.run(go())
    assert requests == 2 and raw.connections == 1
    assert len(got) == 1 and got[0] >= due


def test_a_scheduled_request_cancelled_before_its_time_sends_nothing_and_keeps_the_connection() -> (
    None
):
    raw = Raw([OK])

    async def go() -> tuple[bool, bool]:
        waker = Waker()
        async with served(raw) as conn:
            await _get(conn)
            due = (waker, time.perf_counter_ns() + 5_000_000_000)
            task = asyncio.create_task(
                conn.request("POST", "/v1/x", b"{}", None, lambda: None, due)
            )
            await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            kept = conn.open and not conn.answering
            assert await _get(conn) == (200, b"ok")  # the same connection carries the next
        await waker.aclose()
        return kept, task.cancelled()

    kept, cancelled = asyncio.run(go())
    assert kept and cancelled
    assert raw.connections == 1 and len(raw.requests) == 2


def test_a_request_cancelled_mid_pump_leaves_its_connection_closed() -> None:
    stalled = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n"
    raw = Raw([stalled, OK])  # the first answer stops mid-body and never ends

    async def go() -> tuple[bool, list[bytes]]:
        async with served(raw) as conn:
            got: list[bytes] = []
            answer = await conn.request("POST", "/v1/x", b"{}", None, lambda: None)
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await answer.pump(lambda data, _rx: got.append(data))
            await answer.aclose()
            was_open = conn.open
            assert await _get(conn, how="pump") == (200, b"ok")
            return was_open, got

    assert asyncio.run(go()) == (False, [b"abc"])
    assert raw.connections == 2  # the second request went on a new connection


def test_a_failing_sink_ends_the_pump_with_its_error_and_closes_an_unfinished_answer() -> None:
    raw = Raw([b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n"])

    def sink(data: bytes, _rx: int) -> None:
        raise ValueError("a reader's bug")

    async def go() -> bool:
        async with served(raw) as conn:
            answer = await conn.request("POST", "/v1/x", b"{}", None, lambda: None)
            with pytest.raises(ValueError, match="a reader's bug"):
                async with asyncio.timeout(5):
                    await answer.pump(sink)
            return conn.open

    assert asyncio.run(go()) is False


@pytest.mark.parametrize("fail", [False, True], ids=["reads", "sink-fails"])
def test_a_body_that_arrives_after_the_pump_started_is_fed_from_the_socket(fail: bool) -> None:
    head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"

    handled: list[asyncio.Task[None]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        handled.append(asyncio.current_task())  # type: ignore[arg-type]
        try:
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(2)
            writer.write(head)
            for part in (b"3\r\nabc\r\n", b"2\r\nde\r\n", b"0\r\n\r\n"):
                await writer.drain()
                await asyncio.sleep(0.05)  # each part in a read of its own, the pump waiting
                writer.write(part)
            await writer.drain()
            await reader.read()  # until the client closes
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def go() -> tuple[list[bytes], bool]:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = LeanConnection(f"http://127.0.0.1:{port}/v1", {}, AsyncioBackend(), 5.0, 4.0)
        got: list[bytes] = []

        def sink(data: bytes, _rx: int) -> None:
            got.append(data)
            if fail:
                raise ValueError("a reader's bug")

        try:
            answer = await conn.request("POST", "/v1/x", b"{}", None, lambda: None)
            async with asyncio.timeout(5):
                if fail:
                    with pytest.raises(ValueError, match="a reader's bug"):
                        await answer.pump(sink)
                else:
                    await answer.pump(sink)
            return got, conn.open
        finally:
            await conn.close()
            await asyncio.gather(*handled)
            server.close()
            await server.wait_closed()

    got, still_open = asyncio.run(go())
    assert got == ([b"abc"] if fail else [b"abc", b"de"])
    assert still_open is not fail  # read to its end: kept for the next request
