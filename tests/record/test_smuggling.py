"""No request smuggling through ``agentload record`` (issue 28, class 1): the relay parses every
head strictly (RFC 9112 §2.2, §5, §6.3, §7.1) and never forwards what it did not parse.

Before the strict parser, ``x-a: 1\\nTransfer-Encoding: chunked`` reached the upstream verbatim
(header lines were split only on CRLF), and a second request hidden in a body reached another
client's answer. Each head below is refused with one 400 and never reaches the upstream; each
answer below whose framing two readers could read two ways is a 502; bytes an upstream sends
past its answer's end never reach the agent.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentload.client.http1 import Body, HeadError, body_for, split_head
from agentload.trace.trace import load_trace

sys.path.insert(0, str(Path(__file__).parent))  # the raw upstream of test_relay

from test_relay import _ANSWER, _CHAT, _json_answer, _raw_exchange, _upstream

_BODY = orjson.dumps(_CHAT)
_POST = b"POST /v1/chat/completions HTTP/1.1\r\n"
_SIZED = b"content-length: %d\r\n\r\n%s" % (len(_BODY), _BODY)

# (what it tries, the head's lines after the request line, the words of the 400)
_BAD_REQUESTS = [
    (
        "bare LF hides a header",
        b"host: x\r\nx-a: 1\nTransfer-Encoding: chunked\r\n",
        b"control byte",
    ),
    ("bare CR in a value", b"host: x\r\nx-a: 1\rTransfer-Encoding: chunked\r\n", b"control byte"),
    ("NUL in a value", b"host: x\r\nx-a: a\x00b\r\n", b"control byte"),
    ("obs-fold", b"host: x\r\nx-a: 1\r\n transfer-encoding: chunked\r\n", b"obs-fold"),
    ("space before the colon", b"host: x\r\ntransfer-encoding : chunked\r\n", b"bad header line"),
    ("both lengths", b"host: x\r\ntransfer-encoding: chunked\r\n", b"both content-length"),
    ("a length that is not digits", b"host: x\r\ncontent-length: +5\r\n", b"bad content-length"),
    ("two lengths that differ", b"host: x\r\ncontent-length: 1\r\n", b"bad content-length"),
    ("two hosts", b"host: x\r\nhost: y\r\n", b"more than one host"),
    (
        "a coding other than chunked",
        b"host: x\r\ntransfer-encoding: gzip\r\n",
        b"transfer-encoding",
    ),
]


@pytest.mark.parametrize(
    ("case", "lines", "words"), _BAD_REQUESTS, ids=[c[0] for c in _BAD_REQUESTS]
)
def test_a_smuggling_head_is_refused_and_never_forwarded(
    record_proxy: Callable[..., Any], case: str, lines: bytes, words: bytes
) -> None:
    for up in _upstream(lambda n, head, b: _json_answer()):
        proxy = record_proxy(up.url)
        # A pipelined second request rides behind the first, as a smuggler's would.
        second = _POST + b"host: x\r\nconnection: close\r\n" + _SIZED
        out = _raw_exchange(proxy.url, _POST + lines + _SIZED + second)
        assert out.startswith(b"HTTP/1.1 400 "), (case, out[:200])
        assert words in out, (case, out)
        assert out.count(b"HTTP/1.1") == 1  # one answer, then the connection is closed
        assert up.requests == []  # nothing of it went upstream
        # The proxy still serves the next agent.
        ok = _raw_exchange(proxy.url, second)
        assert ok.startswith(b"HTTP/1.1 200 OK") and ok.endswith(_ANSWER)
        assert len(up.requests) == 1 and up.requests[0][1] == _BODY
        assert len(load_trace(proxy.stop()).calls) == 1


@pytest.mark.parametrize(
    "line",
    [
        b"POST /v1/chat/completions HTTP/1.1 x",  # a fourth part
        b"POST /v1/chat/completions\x00 HTTP/1.1",  # NUL in the target
        b"POST /v1/chat/\xc3\xa9 HTTP/1.1",  # non-ASCII target
        b"POST /v1/chat/completions HTTP/2.0",
        b"PO(ST /v1/chat/completions HTTP/1.1",  # a method that is not a token
        b"POST  /v1/chat/completions HTTP/1.1",  # two spaces
    ],
)
def test_a_bad_request_line_is_an_error(line: bytes) -> None:
    with pytest.raises(HeadError, match="bad request line"):
        split_head(line + b"\r\nhost: x\r\n\r\n", request=True)


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (b"transfer-encoding: gzip\r\n", "request transfer-encoding"),
        (b"transfer-encoding: chunked, chunked\r\n", "request transfer-encoding"),
        (b"content-length: 0x5\r\n", "bad content-length"),
        (b"content-length: 5_0\r\n", "bad content-length"),
        (b"content-length: 5, 6\r\n", "bad content-length"),
    ],
)
def test_ambiguous_request_framing_is_an_error(lines: bytes, needle: str) -> None:
    got = split_head(_POST + b"host: x\r\n" + lines + b"\r\n", request=True)
    assert got is not None
    with pytest.raises(HeadError, match=needle):
        body_for(got[0], request=True)
    old = split_head(b"POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n", request=True)
    assert old is not None
    with pytest.raises(HeadError, match="request transfer-encoding"):
        body_for(old[0], request=True)  # HTTP/1.0 has no chunked requests


def test_a_head_of_bare_lfs_is_refused_before_it_ends() -> None:
    with pytest.raises(HeadError, match="bare LF"):
        split_head(b"GET / HTTP/1.1\nHost: x\n\n", request=True)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"0x5\r\nhello\r\n0\r\n\r\n", "bad chunk size"),
        (b"+5\r\nhello\r\n0\r\n\r\n", "bad chunk size"),
        (b"5 5\r\nhello\r\n0\r\n\r\n", "bad chunk size"),
        (b"5;a=\x01\r\nhello\r\n0\r\n\r\n", "bad chunk extension"),
        (b"5\nhello\r\n0\r\n\r\n", "bad chunk size"),  # a bare LF
        (b"5\r\nhello\n\r\n0\r\n\r\n", "longer than its size"),
        (b"fffffffffffffffff\r\n", "bad chunk size"),  # 17 digits: no overflow games
        (b"0\r\nx-t: a\x00\r\n\r\n", "control byte"),  # a trailer is a field like any other
    ],
)
def test_a_bad_chunk_line_is_an_error(data: bytes, needle: str) -> None:
    with pytest.raises(HeadError, match=needle):
        Body(chunked=True).feed(data)


def test_what_real_agents_and_servers_send_still_reads() -> None:
    got = split_head(
        _POST + b"Host: x\r\nX-Tab:\ta\tb \r\nX-Obs: caf\xc3\xa9\r\ncontent-length: 3, 3\r\n\r\n",
        request=True,
    )
    assert got is not None
    head = got[0]
    assert head.get(b"x-tab") == b"a\tb" and head.get(b"x-obs") == b"caf\xc3\xa9"
    assert body_for(head, request=True).feed(b"abcd") == b"abc"  # equal lengths are one length
    answer = split_head(b"HTTP/1.1 200\r\ntransfer-encoding: gzip, chunked\r\n\r\n", request=False)
    assert answer is not None and answer[0].start == (b"HTTP/1.1", b"200", b"")
    assert body_for(answer[0], request=False).chunked
    assert Body(chunked=True).feed(b'5 ;name="v"\r\nhello\r\n0\r\n\r\n') == b"hello"


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ntransfer-encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 40\r\n\r\nhi",
        b"HTTP/1.1 200 OK\r\nx-a: 1\nx-b: 2\r\ncontent-length: 2\r\n\r\nhi",
        b"HTTP/1.1 2000 OK\r\ncontent-length: 2\r\n\r\nhi",
    ],
    ids=["both lengths", "lengths differ", "bare LF", "bad status"],
)
def test_an_ambiguous_answer_is_a_502(record_proxy: Callable[..., Any], answer: bytes) -> None:
    for up in _upstream(lambda n, head, b: answer):
        proxy = record_proxy(up.url)
        out = _raw_exchange(proxy.url, _POST + b"host: x\r\nconnection: close\r\n" + _SIZED)
        assert out.startswith(b"HTTP/1.1 502 "), out[:200]
        assert b"unreadable answer" in out
        calls = list(load_trace(proxy.stop()).calls.values())
        assert len(calls) == 1 and calls[0].error is not None


def test_bytes_past_an_answers_end_never_reach_the_agent(record_proxy: Callable[..., Any]) -> None:
    # An upstream that appends a second, unasked-for answer: a desync toward the agent.
    planted = b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\nplanted"
    for up in _upstream(lambda n, head, b: _json_answer() + planted):
        proxy = record_proxy(up.url)
        host, port = proxy.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(_POST + b"host: x\r\n" + _SIZED)  # kept alive
            out = b""
            while not out.endswith(_ANSWER):
                chunk = s.recv(65536)
                assert chunk, out
                out += chunk
            s.settimeout(0.5)
            try:
                more = s.recv(65536)
            except TimeoutError:
                more = b""
        assert b"planted" not in out + more
        assert len(load_trace(proxy.stop()).calls) == 1


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://127.0.0.1:1/v1\r\nX: 1", "visible ASCII only"),
        ("http://127.0.0.1:1/v1\x1b[2J", "visible ASCII only"),
        ("http://127.0.0.1:1/v 1", "visible ASCII only"),
        ("http://127.0.0.1:99999/v1", "port must be 1-65535"),
        ("ftp://127.0.0.1/v1", "expected an http(s)://"),
        ("http:///v1", "expected an http(s)://"),
    ],
)
def test_an_upstream_that_could_break_a_head_is_refused_up_front(
    tmp_path: Path, url: str, words: str
) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "agentload", "record", "--upstream", url, "-o", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], res.stderr
    assert "Traceback" not in res.stderr and "\r" not in res.stderr


def test_an_upstream_query_goes_with_every_request(record_proxy: Callable[..., Any]) -> None:
    # Azure-style `?api-version=`: it used to be dropped, and the path became /v1/v1/...
    for up in _upstream(lambda n, head, b: _json_answer()):
        proxy = record_proxy(up.url + "/v1?api-version=2024-10-21")
        for target in (b"/v1/chat/completions", b"/v1/chat/completions?x=1"):
            req = b"POST %s HTTP/1.1\r\nhost: x\r\nconnection: close\r\n" % target
            assert _raw_exchange(proxy.url, req + _SIZED).startswith(b"HTTP/1.1 200 OK")
        lines = [head.split(b"\r\n")[0] for head, _ in up.requests]
        assert lines == [
            b"POST /v1/chat/completions?api-version=2024-10-21 HTTP/1.1",
            b"POST /v1/chat/completions?x=1&api-version=2024-10-21 HTTP/1.1",
        ]
        assert len(load_trace(proxy.stop()).calls) == 2


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def test_a_slowloris_head_and_a_stalled_body_get_a_408(
    record_proxy: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentload.record import relay

    monkeypatch.setattr(relay, "HEAD_TIMEOUT_S", 1.0)
    monkeypatch.setattr(relay, "BODY_IDLE_S", 0.6)
    for up in _upstream(lambda n, head, b: _json_answer()):
        proxy = record_proxy(up.url)
        host, port = proxy.url.removeprefix("http://").split(":")
        # A head that trickles in a byte at a time, each well within any idle timeout.
        with socket.create_connection((host, int(port)), timeout=10) as s:
            started = time.monotonic()
            s.sendall(_POST)
            for byte in b"host: x\r\nx-slow: " + b"a" * 40:
                try:
                    s.sendall(bytes([byte]))
                except OSError:
                    break
                time.sleep(0.1)
                if time.monotonic() - started > 3:
                    break
            out = _read_all(s)
        assert out.startswith(b"HTTP/1.1 408 ") and b"request head not whole after 1 s" in out
        assert time.monotonic() - started < 3
        # A body that stops half way.
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(_POST + b"host: x\r\ncontent-length: %d\r\n\r\n" % len(_BODY) + _BODY[:10])
            out = _read_all(s)
        assert out.startswith(b"HTTP/1.1 408 ") and b"request body stalled" in out
        # A body that keeps coming, slower than a whole but never stalling, goes through.
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(
                _POST + b"host: x\r\nconnection: close\r\ncontent-length: %d\r\n\r\n" % len(_BODY)
            )
            for i in range(0, len(_BODY), len(_BODY) // 4 + 1):
                time.sleep(0.3)
                s.sendall(_BODY[i : i + len(_BODY) // 4 + 1])
            out = _read_all(s)
        assert out.startswith(b"HTTP/1.1 200 OK") and out.endswith(_ANSWER)
        assert len(up.requests) == 1
        assert len(load_trace(proxy.stop()).calls) == 1
