"""``agentload record``'s memory under a hostile agent, measured on the real process (its peak
resident set, and its recorder process's, from ``/proc``) in front of a raw-socket upstream:

* an agent that pipelines 200 MB of requests on one connection without reading the answers,
  while the upstream answers slowly: the proxy reads ahead a bounded amount
  (``relay.MAX_PIPELINED``) and every answered call is in the trace;
* a 256 MiB request body: the upstream gets every byte, the proxy holds at most
  ``exchange.MAX_HELD_BODY`` of it, and the call is counted as not recorded on the stop line and
  in the trace.

Before, the first buffered all 200 MB (then copied it per request) and the second peaked at
1.3 GB; the proxy is killed as soon as it passes the bound, so a regression fails fast.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from agentload.record import exchange
from agentload.record import upstream as upstream_mod
from agentload.record.exchange import MAX_HELD_BODY
from agentload.record.server import RecordOptions, RecordServer
from agentload.trace.trace import load_trace

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("proxy_memory")]

_URL = re.compile(r"agentload record on http://127\.0\.0\.1:(\d+)")
_MIB = 1 << 20
_ANSWER = orjson.dumps({
    "id": "c1", "object": "chat.completion", "created": 1, "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "ok"}}],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
})  # fmt: skip
_REQUEST = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


# -- a raw-socket upstream ------------------------------------------------------------------
class _Upstream:
    """Reads each request (``Content-Length`` or chunked body, counted, not kept, its chunked
    framing checked), waits ``delay_s``, answers a small chat completion; ``bodies``: each
    request's body size; ``errors``: what a connection failed on (bad framing, a reset).
    ``slow_after``: past that many bytes of a body it reads 8 KiB a millisecond, so that the
    proxy's writes to it back up (its transport pauses) up to the body's end.
    ``early``: answers a 413 right after the first head instead, then reads to the end."""

    def __init__(
        self, delay_s: float, *, early: bool = False, slow_after: int | None = None
    ) -> None:
        self.delay_s, self.early, self.slow_after = delay_s, early, slow_after
        self.bodies: list[int] = []
        self.errors: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                self._requests(_Reader(conn, self.slow_after))
            except (OSError, ValueError) as exc:
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _requests(self, r: _Reader) -> None:
        conn = r.conn
        while True:
            head = r.until(b"\r\n\r\n")
            if head is None:
                return
            if self.early:
                conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\n"
                             b"connection: close\r\n\r\n")  # fmt: skip
                conn.shutdown(socket.SHUT_WR)
                while conn.recv(1 << 20):
                    pass
                return
            r.body = 0
            m = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            n = r.skip(int(m.group(1))) if m is not None else _read_chunked(r)
            self.bodies.append(n)
            time.sleep(self.delay_s)
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(_ANSWER), _ANSWER))  # fmt: skip

    def close(self) -> None:
        self.sock.close()


class _Reader:
    """A connection's bytes: lines and counted runs, read slowly past ``slow_after``."""

    def __init__(self, conn: socket.socket, slow_after: int | None) -> None:
        self.conn, self.slow_after = conn, slow_after
        self.buf = b""
        self.body = 0  # bytes of the current body read so far

    def _recv(self, n: int) -> bytes:
        if self.slow_after is not None and self.body >= self.slow_after:
            time.sleep(0.001)
            n = min(n, 8 << 10)
        data = self.conn.recv(n)
        self.body += len(data)
        return data

    def until(self, end: bytes) -> bytes | None:
        """The bytes up to ``end`` (dropped), or None at the connection's end."""
        while end not in self.buf:
            if len(self.buf) > 1 << 16:
                raise ValueError(f"no {end!r} in {self.buf[:40]!r}...")
            data = self._recv(1 << 16)
            if not data:
                return None
            self.buf += data
        line, _, self.buf = self.buf.partition(end)
        return line

    def skip(self, n: int) -> int:
        """Read ``n`` bytes without keeping them; how many came before the end."""
        got = min(n, len(self.buf))
        self.buf = self.buf[got:]
        while got < n:
            data = self._recv(min(1 << 20, n - got))
            if not data:
                break
            got += len(data)
        return got


def _read_chunked(r: _Reader) -> int:
    """A chunked body's payload size, its framing checked: a bad size line or a chunk not
    ended by CRLF is a ValueError, an early end an OSError."""
    total = 0
    while True:
        line = r.until(b"\r\n")
        if line is None:
            raise ConnectionError(f"the body ended after {total} bytes, not at its last chunk")
        size = int(line, 16)
        if size == 0:
            if r.until(b"\r\n") != b"":
                raise ValueError("trailers after the last chunk")
            return total
        if r.skip(size) != size:
            raise ConnectionError(f"the body ended inside a chunk after {total} bytes")
        total += size
        if r.until(b"\r\n") != b"":
            raise ValueError(f"chunk of {size} bytes not ended by CRLF after {total} bytes")


# -- the proxy as a user runs it, with its memory watched ------------------------------------
def _rss_kib(pid: int, field: str) -> int:
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                stat = (d / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    kids.append(int(d.name))
    return kids


class _Watch:
    """Samples the proxy's and its recorder's resident set every 20 ms; kills the proxy's
    group once either passes ``kill_mib`` (the test then fails at once)."""

    def __init__(self, proc: subprocess.Popen[bytes], kill_mib: int) -> None:
        self.proc, self.kill_mib = proc, kill_mib
        self.peak = {"proxy": 0, "recorder": 0}
        self.killed = False
        self._stop = threading.Event()
        self._kids: list[int] = []
        threading.Thread(target=self._run, daemon=True).start()

    def sample(self) -> None:
        pid = self.proc.pid
        if not self._kids:
            self._kids = _children(pid)
        for who, pids, field in (("proxy", [pid], "VmHWM"), ("recorder", self._kids, "VmHWM")):
            for p in pids:
                self.peak[who] = max(self.peak[who], _rss_kib(p, field) // 1024)

    def _run(self) -> None:
        while not self._stop.wait(0.02) and self.proc.poll() is None:
            self.sample()
            if max(self.peak.values()) > self.kill_mib:
                self.killed = True
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                return

    def stop(self) -> None:
        self._stop.set()


@contextmanager
def _record(upstream: _Upstream, out: Path, kill_mib: int) -> Iterator[tuple[int, _Watch]]:
    cmd = [sys.executable, "-m", "agentload", "record", "--listen", "127.0.0.1:0", "-o", str(out)]
    cmd += ["--upstream", f"http://127.0.0.1:{upstream.port}"]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        assert proc.stderr is not None
        m = _URL.search(proc.stderr.readline().decode())
        assert m, "no start line"
        watch = _Watch(proc, kill_mib)
        yield int(m.group(1)), watch
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        upstream.close()


def _stop(proc_watch: _Watch) -> str:
    """Ctrl-C: the stop line (stderr) once the trace is closed."""
    proc = proc_watch.proc
    proc_watch.sample()
    proc_watch.stop()
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()
    return err.decode()


def _post(body_len: int) -> bytes:
    return (b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            b"content-length: %d\r\n\r\n" % body_len)  # fmt: skip


def _answers(sock: socket.socket, n: int, deadline: float) -> int:
    """Read ``n`` whole answers (or until the connection ends or the deadline)."""
    buf, got = b"", 0
    sock.settimeout(1.0)
    while got < n and time.monotonic() < deadline:
        try:
            data = sock.recv(1 << 16)
        except TimeoutError:
            continue
        if not data:
            break
        buf += data
        while (end := buf.find(b"\r\n\r\n")) >= 0:
            m = re.search(rb"(?i)content-length: *(\d+)", buf[:end])
            size = int(m.group(1)) if m else 0
            if len(buf) < end + 4 + size:
                break
            buf = buf[end + 4 + size :]
            got += 1
    return got


# -- the probes ------------------------------------------------------------------------------
def test_pipelined_requests_are_read_ahead_a_bounded_amount(tmp_path: Path) -> None:
    n, pad = 200, 1 * _MIB  # 200 MB of pipelined requests, 1 MiB each
    body = _REQUEST + b" " * (pad - len(_REQUEST))  # JSON the recorder reads at once
    upstream = _Upstream(delay_s=0.01)
    with _record(upstream, tmp_path, kill_mib=400) as (port, watch):
        sock = socket.create_connection(("127.0.0.1", port))

        def write() -> None:
            with contextlib.suppress(OSError):
                for _ in range(n):
                    sock.sendall(_post(len(body)) + body)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        time.sleep(1.0)  # the agent writes on, reading nothing
        got = _answers(sock, n, time.monotonic() + 50)
        writer.join(10)
        sock.close()
        assert not watch.killed, f"the proxy passed {watch.kill_mib} MiB: {watch.peak}"
        assert got == n, f"{got} of {n} answers"
        err = _stop(watch)
    assert watch.peak["proxy"] < 300, watch.peak
    assert watch.peak["recorder"] < 300, watch.peak
    assert upstream.errors == [] and upstream.bodies == [len(body)] * n
    assert f"recorded {n} calls" in err, err
    (trace,) = tmp_path.glob("*.agentload.jsonl.zst")
    assert len(load_trace(trace).calls) == n


def _send_large(port: int, head: bytes, blocks: Iterable[bytes]) -> int:
    """Send ``head``, then each of ``blocks`` until the proxy stops taking them (it may close
    the connection early), and count the answers that come within 50 s."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(head)
    with contextlib.suppress(OSError):
        for block in blocks:
            sock.sendall(block)
    got = _answers(sock, 1, time.monotonic() + 50)
    sock.close()
    return got


def test_a_256_mib_body_is_streamed_upstream_and_counted_as_not_recorded(tmp_path: Path) -> None:
    size = 256 * _MIB
    bound = 2 * (MAX_HELD_BODY // _MIB) + 200
    upstream = _Upstream(delay_s=0.0, slow_after=size - 8 * _MIB)
    with _record(upstream, tmp_path, kill_mib=bound + 100) as (port, watch):
        rest = size - len(_REQUEST)
        block = b" " * _MIB
        blocks = (block[: min(_MIB, rest - i)] for i in range(0, rest, _MIB))
        got = _send_large(port, _post(size) + _REQUEST, blocks)
        assert not watch.killed, f"the proxy passed {watch.kill_mib} MiB: {watch.peak}"
        assert got == 1
        err = _stop(watch)
    assert upstream.errors == [] and upstream.bodies == [size], (upstream.errors, err)
    assert watch.peak["proxy"] < bound, watch.peak
    assert "recorded 0 calls" in err and "1 requests not recorded" in err, err
    assert f"over {MAX_HELD_BODY >> 20} MiB: forwarded, not recorded" in err, err
    (trace,) = tmp_path.glob("*.agentload.jsonl.zst")
    text = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "validate", str(trace)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert text.returncode == 0, text.stderr


def test_a_large_chunked_body_goes_upstream_in_chunks_of_the_proxys_own(tmp_path: Path) -> None:
    size = MAX_HELD_BODY + 8 * _MIB
    upstream = _Upstream(delay_s=0.0, slow_after=MAX_HELD_BODY)
    with _record(upstream, tmp_path, kill_mib=2 * (MAX_HELD_BODY // _MIB) + 300) as (port, watch):
        head = _post(0).replace(b"content-length: 0", b"transfer-encoding: chunked")
        block = b"%x\r\n%s\r\n" % (_MIB, b" " * _MIB)
        got = _send_large(port, head, [*itertools.repeat(block, size // _MIB), b"0\r\n\r\n"])
        assert not watch.killed, f"the proxy passed {watch.kill_mib} MiB: {watch.peak}"
        assert got == 1
        err = _stop(watch)
    assert upstream.errors == [] and upstream.bodies == [size], (upstream.errors, err)
    assert "recorded 0 calls" in err and "1 requests not recorded" in err, err


def test_an_upstream_that_answers_before_a_large_body_ends_closes_the_agent(
    tmp_path: Path,
) -> None:
    upstream = _Upstream(delay_s=0.0, early=True)
    with _record(upstream, tmp_path, kill_mib=2 * (MAX_HELD_BODY // _MIB) + 300) as (port, watch):
        sock = socket.create_connection(("127.0.0.1", port))
        size = 2 * MAX_HELD_BODY

        def write() -> None:
            with contextlib.suppress(OSError):
                sock.sendall(_post(size))
                for _ in range(size // _MIB):
                    sock.sendall(b" " * _MIB)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        sock.settimeout(30)
        answer = b""
        with contextlib.suppress(OSError):
            while data := sock.recv(1 << 16):  # until the proxy closes the connection
                answer += data
        writer.join(30)
        sock.close()
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert answer.count(b"HTTP/1.1") == 1 and b"\r\nconnection: close\r\n" in answer
        err = _stop(watch)
    assert "1 requests not recorded" in err, err


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
def test_a_streamed_body_keeps_its_framing_when_the_upstream_backs_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, framing: str
) -> None:
    """The proxy in this process, its body bound lowered to 256 KiB and its upstream writes
    pausing past 4 KiB (a slow upstream, every write backs up): the body's last read, written
    as the agent's body ends, pauses the upstream connection mid-chunk. Before, that pause
    wrote the body's end inside the last chunk (``0\\r\\n\\r\\n`` before its data's CRLF), and
    the upstream failed on the framing, now and then, in CI."""
    monkeypatch.setattr(exchange, "MAX_HELD_BODY", 256 << 10)
    made = upstream_mod.UpstreamConn.connection_made

    def small_buffers(self: upstream_mod.UpstreamConn, transport: object) -> None:
        made(self, transport)  # type: ignore[arg-type]
        sock = self.transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        self.transport.set_write_buffer_limits(high=4096)

    monkeypatch.setattr(upstream_mod.UpstreamConn, "connection_made", small_buffers)
    size, piece = 4 * _MIB, 200 << 10
    upstream = _Upstream(delay_s=0.0, slow_after=0)
    opts = RecordOptions(upstream=f"http://127.0.0.1:{upstream.port}", out=tmp_path, port=0)
    with RecordServer(opts) as rs:
        if framing == "chunked":
            head = _post(0).replace(b"content-length: 0", b"transfer-encoding: chunked")
            blocks = [b"%x\r\n%s\r\n" % (piece, b" " * piece)] * (size // piece)
            blocks[-1] += b"0\r\n\r\n"  # the last data and the body's end in one read
            sent = len(blocks) * piece
        else:
            head, sent = _post(size), size
            blocks = [b" " * _MIB] * (size // _MIB)
        got = _send_large(rs.port, head, blocks)
    upstream.close()
    assert upstream.errors == [] and upstream.bodies == [sent], upstream.errors
    assert got == 1
