"""Latency that ``agentload record`` adds to a streamed chat call, against LiteLLM's proxy.

    .venv/bin/python benchmarks/record_overhead.py [--streams 100] [--rounds 4] [--tokens 32]
        [--itl-ms 20] [--skip-litellm] [--skip-record]

The upstream is a paced Chat Completions server of this script's own (``--serve-upstream``, raw
asyncio, its own process): a streamed answer's first chunk comes 10 ms after the request, then
one each ``--itl-ms``, and each chunk's content is stamped with the time it was written (the
first also with the time the request was read). The starts of a round are spread over
``--ramp-ms`` (200 ms: shorter than a stream, so all ``--streams`` are in flight at once —
``peak`` says how many were). Three paths carry the same load — ``--streams`` concurrent
streaming chat requests per round, ``max_tokens`` = ``--tokens`` — and the rounds are
interleaved (the order rotates each round) so that the machine's other work falls on each path
alike:

* ``direct``: the client talks to the upstream;
* ``record``: through ``agentload record --upstream URL --listen 127.0.0.1:PORT -o DIR``;
* ``litellm``: through LiteLLM's proxy (``litellm --config``, one ``openai/agentload-sim``
  model whose ``api_base`` is the upstream), installed by ``scripts/litellm.sh install`` in its
  own cached venv; telemetry, spend logs and the remote cost map are off, so it runs offline.

The client is a lean asyncio HTTP/1.1 client (one keep-alive connection per stream, on
``agentload.client.netback.SocketStream``): each SSE event that carries content is stamped with
the kernel's receive time of the bytes that completed it (``SO_TIMESTAMPNS``, in the
``time.perf_counter_ns`` domain; the client's own reading where the kernel gives none), so the
client's event-loop lag is not counted against a proxy. Per request: TTFT (request written →
first content event) and each gap between content events, end to end; and the hop alone, from
the upstream's stamps: the TTFT hop (request written → read upstream, plus first chunk written
→ received) and each chunk's hop (written → received), which a proxy lengthens and the
upstream's own jitter does not. Per path: p50/p99 of each, the share of gaps under 2 ms (events
that arrived bunched: buffering), and the CPU seconds its proxy used (its process tree's utime +
stime from /proc, over its own rounds only). Per proxy: the added latency (its p99 minus
direct's); for ``record``, whether the goal (``GOAL_MS`` at p99) is met and how many of the
calls it forwarded its trace holds. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from agentload.client.kstamps import KernelStamps
from agentload.client.netback import AsyncioBackend, SocketStream
from agentload.quantiles import percentile
from agentload.trace.trace import load_trace

ROOT = Path(__file__).resolve().parents[1]
MODEL = "agentload-sim"
TICK = os.sysconf("SC_CLK_TCK")
GOAL_MS = 1.0
"""Issue 12: the proxy adds at most this much at p99 to TTFT and to each inter-chunk gap."""


# ------------------------------------------------------------------ processes and CPU -----
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and every live descendant (seconds)."""
    stats: dict[int, tuple[int, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                rest = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        stats[int(entry)] = (int(rest[1]), (int(rest[11]) + int(rest[12])) / TICK)
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        total += stats.get(p, (0, 0.0))[1]
        todo.extend(c for c, (ppid, _) in stats.items() if ppid == p)
    return total


def machine_busy_s() -> float:
    """CPU seconds all cores spent busy since boot (/proc/stat: everything but idle and iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return (sum(v[:8]) - v[3] - v[4]) / TICK


def wait_ready(proc: subprocess.Popen[bytes], root: str, what: str, log: Path, s: float) -> None:
    """Until a one-token chat request through ``root`` answers 200 (or ``what`` fails)."""
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    deadline = time.monotonic() + s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"{what} exited {proc.returncode}: {' | '.join(tail)}")
        try:
            r = httpx.post(f"{root}/v1/chat/completions", json=body, timeout=5)
            if r.status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{what} did not answer within {s:.0f} s (log: {log})")


def start(
    cmd: list[str],
    root: str,
    what: str,
    log: Path,
    env: dict[str, str] | None = None,
    ready_s: float = 60,
) -> subprocess.Popen[bytes]:
    """``cmd`` in its own process, its output in ``log``, once it answers (else RuntimeError)."""
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        wait_ready(proc, root, what, log, ready_s)
    except RuntimeError:
        stop(proc)
        raise
    return proc


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_upstream(tmp: Path, itl_ms: float, streams: int) -> tuple[subprocess.Popen[bytes], str]:
    """The paced, stamped upstream (``--serve-upstream``, below) in its own process."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--serve-upstream", str(port),
           "--itl-ms", str(itl_ms)]  # fmt: skip
    return start(cmd, root, "paced upstream", tmp / "upstream.log"), root


class Paced(asyncio.Protocol):
    """The upstream: Chat Completions over raw asyncio, as lean as a Python server gets. A
    streamed answer's first content chunk comes ``OVERHEAD_S`` after the request, then one each
    ``itl`` seconds, each chunk's content stamped with the time it was written (``S<ns>``, the
    first also with the time the request was read, ``R<ns>``; ``time.perf_counter_ns``)."""

    OVERHEAD_S = 0.010

    def __init__(self, itl_s: float) -> None:
        self.itl_s = itl_s
        self.buf = b""
        self.transport: asyncio.Transport | None = None
        self.task: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        transport.get_extra_info("socket").setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter_ns()
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return
        length = 0
        for line in self.buf[:end].split(b"\r\n")[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v)
        if len(self.buf) < end + 4 + length:
            return
        body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
        self.task = asyncio.ensure_future(self.answer(orjson.loads(body), now))

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    async def answer(self, req: dict[str, Any], recv_ns: int) -> None:
        base = {"id": "chatcmpl-paced", "created": 0, "model": req.get("model", MODEL)}
        n = int(req.get("max_tokens") or 16)
        if not req.get("stream"):
            body = orjson.dumps({**base, "object": "chat.completion", "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"},
                 "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})  # fmt: skip
            self._write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(body), body))  # fmt: skip
            return
        self._write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n")  # fmt: skip
        chunk = {**base, "object": "chat.completion.chunk"}

        def event(obj: dict[str, Any]) -> bytes:
            data = b"data: " + orjson.dumps(obj) + b"\n\n"
            return b"%x\r\n%s\r\n" % (len(data), data)

        t0 = time.perf_counter() + self.OVERHEAD_S
        for k in range(n):
            delay = t0 + k * self.itl_s - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            stamp = f" R{recv_ns}" if k == 0 else ""
            delta = {"content": f"{stamp} S{time.perf_counter_ns()}"}
            if k == 0:
                delta["role"] = "assistant"
            self._write(event({**chunk, "choices": [{"index": 0, "delta": delta,
                                                     "finish_reason": None}]}))  # fmt: skip
        tail = event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
        if (req.get("stream_options") or {}).get("include_usage"):
            usage = {"prompt_tokens": 1, "completion_tokens": n, "total_tokens": n + 1}
            tail += event({**chunk, "choices": [], "usage": usage})
        data = b"data: [DONE]\n\n"
        self._write(tail + b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data))


def serve_upstream(port: int, itl_ms: float) -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Paced(itl_ms / 1e3), "127.0.0.1", port,
                                          backlog=2048)  # fmt: skip
        async with server:
            await server.serve_forever()

    asyncio.run(run())


def start_record(tmp: Path, upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    """``agentload record`` in front of ``upstream``; RuntimeError when the command is missing."""
    probe = subprocess.run(
        [sys.executable, "-m", "agentload", "record", "--help"], capture_output=True, cwd=ROOT
    )
    if probe.returncode != 0:
        raise RuntimeError("this agentload has no `record` command")
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "agentload",
        "record",
        "--upstream",
        f"{upstream}/v1",
        "--listen",
        f"127.0.0.1:{port}",
        "-o",
        str(tmp / "recorded"),
    ]
    return start(cmd, root, "agentload record", tmp / "record.log"), root


def litellm_exe() -> Path:
    """LiteLLM from the project's one installer (scripts/litellm.sh: a cached, pinned venv)."""
    script = ROOT / "scripts" / "litellm.sh"
    try:
        p = subprocess.run(
            ["bash", str(script), "install"], capture_output=True, text=True, timeout=1800
        )
    except (subprocess.TimeoutExpired, OSError) as exc:
        raise RuntimeError(f"could not install litellm: {exc}") from None
    if p.returncode != 0:
        raise RuntimeError((p.stderr.strip().splitlines() or ["could not install litellm"])[-1])
    return Path(p.stdout.strip())


def start_litellm(tmp: Path, upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    exe = litellm_exe()
    cfg = tmp / "litellm.yaml"
    cfg.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {upstream}/v1\n"
        "      api_key: x\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "  drop_params: false\n"
        "general_settings:\n"
        "  disable_spend_logs: true\n"
    )
    env = dict(
        os.environ,
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        LITELLM_TELEMETRY="False",
        LITELLM_LOG="ERROR",
        NO_PROXY="127.0.0.1,localhost",
    )
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    cmd = [
        str(exe),
        "--config",
        str(cfg),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--num_workers",
        "1",
    ]
    return start(cmd, root, "litellm", tmp / "litellm.log", env, 180), root


# ------------------------------------------------------------------------- client ---------
@dataclass
class Call:
    """One streamed request as the client saw it."""

    ok: bool = False
    error: str = ""
    status: int = 0
    ttft_ns: int = 0
    gaps_ns: list[int] = field(default_factory=list)
    start_ns: int = 0
    end_ns: int = 0
    chunks: int = 0
    req_hop_ns: int = 0
    """Request written by the client → read by the upstream (its ``R`` stamp)."""
    chunk_hops_ns: list[int] = field(default_factory=list)
    """Each content chunk: written by the upstream (``S``) → received by the client."""


class Conn:
    """One keep-alive HTTP/1.1 connection that posts streaming chat requests and stamps each
    content event (kernel receive time of the block that completed it)."""

    def __init__(self, host: str, port: int, backend: AsyncioBackend) -> None:
        self.host, self.port, self.backend = host, port, backend
        self.stream: SocketStream | None = None

    async def _stream(self) -> SocketStream:
        if self.stream is None:
            opt = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
            s = await self.backend.connect_tcp(self.host, self.port, 10, socket_options=opt)
            assert isinstance(s, SocketStream)
            self.stream = s
        return self.stream

    async def close(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
            self.stream = None

    async def post(self, body: bytes) -> Call:
        """One request; a kept-alive connection the server has closed meanwhile (nothing of
        the response came back) is replaced and the request sent once more, as HTTP clients do."""
        for attempt in (0, 1):
            reused = self.stream is not None
            call = Call()
            try:
                await self._exchange(body, call)
                return call
            except Exception as exc:  # OSError, httpcore's network errors, a malformed response
                call.ok, call.error = False, f"{type(exc).__name__}: {exc}"
                await self.close()
                if not (reused and call.status == 0 and attempt == 0):
                    return call
        return call

    async def _exchange(self, body: bytes, call: Call) -> None:
        s = await self._stream()
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nhost: {self.host}:{self.port}\r\n"
            "content-type: application/json\r\nauthorization: Bearer x\r\n"
            f"accept: text/event-stream\r\ncontent-length: {len(body)}\r\n\r\n"
        ).encode()
        t0 = call.start_ns = time.perf_counter_ns()
        await s.write(head + body)
        buf = b""
        while b"\r\n\r\n" not in buf:
            buf += await self._read(s)
        hdr, _, buf = buf.partition(b"\r\n\r\n")
        lines = hdr.split(b"\r\n")
        status = call.status = int(lines[0].split()[1])
        fields = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(b":") for x in lines[1:])
        }
        chunked = fields.get(b"transfer-encoding", b"").lower() == b"chunked"
        length = int(fields.get(b"content-length", b"-1"))
        keep = fields.get(b"connection", b"").lower() != b"close"
        sse, last = b"", 0
        left = length  # bytes of the current chunk (chunked) or of the body still to come
        while True:
            now = s.rx_ns or time.perf_counter_ns()
            if chunked:
                out, buf, left, done = dechunk(buf, left)
            else:
                out, buf = (buf, b"") if left < 0 else (buf[:left], buf[left:])
                left = left - len(out) if left >= 0 else left
                done = left == 0
            sse += out
            while b"\n\n" in sse:
                event, _, sse = sse.partition(b"\n\n")
                text = content(event) if status == 200 else ""
                if text:
                    if call.chunks == 0:
                        call.ttft_ns = now - t0
                    else:
                        call.gaps_ns.append(now - last)
                    last = now
                    call.chunks += 1
                    for word in text.split():
                        if word[0] == "R":
                            call.req_hop_ns = int(word[1:]) - t0
                        elif word[0] == "S":
                            call.chunk_hops_ns.append(now - int(word[1:]))
            if done:
                break
            data = await s.read(1 << 16)
            if not data:
                if length < 0 and not chunked:
                    break
                raise ConnectionError("connection closed mid-response")
            buf += data
        if not keep:
            await self.close()
        call.end_ns = time.perf_counter_ns()
        call.ok = status == 200 and call.chunks > 0
        if status != 200:
            call.error = f"HTTP {status}: {sse[:200]!r}"

    async def _read(self, s: SocketStream) -> bytes:
        data = await s.read(1 << 16)
        if not data:
            raise ConnectionError("connection closed before the response")
        return data


def dechunk(buf: bytes, left: int) -> tuple[bytes, bytes, int, bool]:
    """Body bytes in ``buf`` (chunked transfer coding; ``left`` bytes of the current chunk
    still due, -1 at a size line) → (data, rest of buf, left, reached the last chunk)."""
    out = []
    while buf:
        if left > 0:
            take = buf[:left]
            out.append(take)
            buf, left = buf[len(take) :], left - len(take)
            continue
        if left == 0:  # the CRLF after a chunk's data
            if len(buf) < 2:
                break
            buf, left = buf[2:], -1
            continue
        line, sep, rest = buf.partition(b"\r\n")
        if not sep:
            break
        size = int(line.split(b";")[0], 16)
        if size == 0:
            return b"".join(out), b"", 0, True
        buf, left = rest, size
    return b"".join(out), buf, left, False


def content(event: bytes) -> str:
    """The output text this SSE event carries (``choices[0].delta.content``), or ""."""
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if not data or data == b"[DONE]":
                return ""
            obj = orjson.loads(data)
            ch = obj.get("choices") or [{}]
            return str((ch[0].get("delta") or {}).get("content") or "")
    return ""


def body_for(stream: int, rnd: int, tokens: int) -> bytes:
    words = " ".join(f"w{(stream * 31 + rnd * 7 + k) % 997}" for k in range(80))
    return orjson.dumps(
        {
            "model": MODEL,
            "messages": [{"role": "user", "content": f"stream {stream} round {rnd}: {words}"}],
            "max_tokens": tokens,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )


# ------------------------------------------------------------------------- rounds ---------
@dataclass
class Route:
    """One way to the upstream: its connections, the proxy process (None: direct), figures."""

    name: str
    root: str
    proc: subprocess.Popen[bytes] | None
    conns: list[Conn] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    cpu_s: float = 0.0
    upstream_cpu_s: float = 0.0
    wall_s: float = 0.0
    note: str = ""


async def one_round(p: Route, rnd: int, tokens: int, ramp_s: float, keep: bool, up: int) -> None:
    cpu0, up0 = (tree_cpu_s(p.proc.pid) if p.proc else 0.0), tree_cpu_s(up)
    t0 = time.perf_counter()
    n = len(p.conns)

    async def go(i: int, c: Conn) -> Call:
        await asyncio.sleep(ramp_s * i / n)
        return await c.post(body_for(i, rnd, tokens))

    calls = await asyncio.gather(*(go(i, c) for i, c in enumerate(p.conns)))
    wall = time.perf_counter() - t0
    if keep:
        p.calls.extend(calls)
        p.wall_s += wall
        p.cpu_s += (tree_cpu_s(p.proc.pid) if p.proc else 0.0) - cpu0
        p.upstream_cpu_s += tree_cpu_s(up) - up0


async def measure(paths: list[Route], a: argparse.Namespace, upstream_pid: int) -> None:
    backend = AsyncioBackend(KernelStamps())
    for p in paths:
        host, port = p.root.removeprefix("http://").split(":")
        p.conns = [Conn(host, int(port), backend) for _ in range(a.streams)]
    for rnd in range(a.rounds + 1):  # round 0 warms every path up (connections, lazy setup)
        k = rnd % len(paths)
        for p in paths[k:] + paths[:k]:
            await one_round(p, rnd, a.tokens, a.ramp_ms / 1e3, rnd > 0, upstream_pid)
            await asyncio.sleep(0.2)
    for p in paths:
        for c in p.conns:
            await c.close()
    if backend.stamps is not None:
        backend.stamps.close()


def figures(p: Route, tokens: int) -> dict[str, Any]:
    ok = [c for c in p.calls if c.ok]
    d: dict[str, Any] = {"requests": len(p.calls), "ok": len(ok)}
    errors = sorted({c.error for c in p.calls if not c.ok})
    if errors:
        d["errors"] = errors[:3]
    if not ok:
        return d
    ttft = [c.ttft_ns / 1e6 for c in ok]
    gaps = [g / 1e6 for c in ok for g in c.gaps_ns]
    hops = [h / 1e6 for c in ok for h in c.chunk_hops_ns]
    ttft_hops = [(c.req_hop_ns + c.chunk_hops_ns[0]) / 1e6 for c in ok if c.chunk_hops_ns]
    d.update(
        ttft_hop_p50_ms=percentile(ttft_hops, 50),
        ttft_hop_p99_ms=percentile(ttft_hops, 99),
        chunk_hop_p50_ms=percentile(hops, 50),
        chunk_hop_p99_ms=percentile(hops, 99),
    )
    d.update(
        ttft_p50_ms=percentile(ttft, 50),
        ttft_p99_ms=percentile(ttft, 99),
        gap_p50_ms=percentile(gaps, 50) if gaps else None,
        gap_p99_ms=percentile(gaps, 99) if gaps else None,
        bunched_gaps=sum(g < 2.0 for g in gaps) / len(gaps) if gaps else None,
        chunks_per_request=sum(c.chunks for c in ok) / len(ok),
        short_streams=sum(c.chunks < tokens for c in ok),
        peak_in_flight=peak(ok),
        wall_s=p.wall_s,
        upstream_cpu_s=p.upstream_cpu_s,
    )
    if p.proc is not None:
        d["proxy_cpu_s"] = p.cpu_s
        d["proxy_cpu_ms_per_request"] = 1e3 * p.cpu_s / len(p.calls)
        d["proxy_cpu_us_per_chunk"] = 1e6 * p.cpu_s / max(1, sum(c.chunks for c in p.calls))
        d["proxy_cores_busy"] = p.cpu_s / max(p.wall_s, 1e-9)
    return d


def peak(calls: list[Call]) -> int:
    """Most requests in flight at once (request written → response complete)."""
    edges = sorted([(c.start_ns, 1) for c in calls] + [(c.end_ns, -1) for c in calls])
    now = most = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def added(f: dict[str, Any], direct: dict[str, Any]) -> None:
    for k in ("ttft_p50", "ttft_p99", "gap_p50", "gap_p99", "ttft_hop_p50", "ttft_hop_p99",
              "chunk_hop_p50", "chunk_hop_p99"):  # fmt: skip
        if f.get(f"{k}_ms") is not None and direct.get(f"{k}_ms") is not None:
            f[f"added_{k}_ms"] = f[f"{k}_ms"] - direct[f"{k}_ms"]


def rounded(x: Any) -> Any:
    """``x`` with every float rounded to 3 decimals (for the JSON line)."""
    if isinstance(x, float):
        return round(x, 3)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def ratio(a: Any, b: Any) -> float | None:
    """a / b to 3 significant digits."""
    ok = isinstance(a, float) and isinstance(b, float) and b
    return float(f"{a / b:.3g}") if ok else None


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--streams", type=int, default=100, help="concurrent streams per round")
    ap.add_argument("--rounds", type=int, default=4, help="measured rounds per path")
    ap.add_argument("--tokens", type=int, default=32, help="content tokens per stream")
    ap.add_argument("--itl-ms", type=float, default=20.0, help="upstream inter-token time")
    ap.add_argument(
        "--ramp-ms", type=float, default=200.0, help="starts of a round spread over this long"
    )
    ap.add_argument("--skip-litellm", action="store_true")
    ap.add_argument("--skip-record", action="store_true")
    ap.add_argument("--serve-upstream", type=int, metavar="PORT", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_upstream:
        serve_upstream(a.serve_upstream, a.itl_ms)
        return
    tmp = Path(tempfile.mkdtemp(prefix="agentload-record-bench-"))
    procs: list[subprocess.Popen[bytes]] = []
    notes: dict[str, str] = {}
    try:
        try:
            up, upstream = start_upstream(tmp, a.itl_ms, a.streams)
        except RuntimeError as exc:
            raise SystemExit(f"record_overhead: {exc}") from None
        procs.append(up)
        paths = [Route("direct", upstream, None)]
        starters: dict[str, Callable[[Path, str], tuple[subprocess.Popen[bytes], str]]] = {
            "record": start_record,
            "litellm": start_litellm,
        }
        for name, starter in starters.items():
            if getattr(a, f"skip_{name}"):
                notes[name] = f"skipped (--skip-{name})"
                continue
            try:
                proc, root = starter(tmp, upstream)
            except RuntimeError as exc:
                notes[name] = str(exc)
                continue
            procs.append(proc)
            paths.append(Route(name, root, proc))
        for name, note in notes.items():
            print(f"{name}: {note}")
        busy0, t0 = machine_busy_s(), time.perf_counter()
        self0 = time.process_time()
        asyncio.run(measure(paths, a, up.pid))
        wall = time.perf_counter() - t0
        busy = machine_busy_s() - busy0
        client_cpu = time.process_time() - self0
        ours = client_cpu + sum(tree_cpu_s(p.pid) for p in procs)  # lifetime: an upper bound
    finally:
        for proc in reversed(procs):
            stop(proc)
    out: dict[str, Any] = {p.name: figures(p, a.tokens) for p in paths}
    if "record" in out:  # everything it forwarded is in its trace, once it stopped
        (trace,) = (tmp / "recorded").glob("*.agentload.jsonl.zst")
        t = load_trace(trace)
        sent = sum(len(p.calls) for p in paths if p.name == "record") + a.streams + 1
        out["record"]["recorded_calls"] = len(t.calls)
        out["record"]["forwarded_calls"] = sent
        print(f"record: its trace holds {len(t.calls)} of the {sent} calls it forwarded "
              f"({'closed' if t.truncated is None else 'TRUNCATED'})")  # fmt: skip
    for name in ("record", "litellm"):
        if name in out:
            added(out[name], out["direct"])
        else:
            out[name] = {"note": notes.get(name, "")}
    cores = os.cpu_count() or 1
    print(
        f"{a.streams} concurrent streams x {a.rounds} rounds per path (+1 warm-up), {a.tokens} "
        f"tokens each, upstream paced at {a.itl_ms:g} ms per token; {wall:.1f} s wall"
    )
    hdr = ("path", "ok", "peak", "chunks", "TTFT p50", "p99", "gap p50", "p99", "bunched",
           "proxy CPU s")  # fmt: skip
    print("{:>8} {:>7} {:>5} {:>6} {:>9} {:>9} {:>8} {:>8} {:>8} {:>12}".format(*hdr))
    for p in paths:
        f = out[p.name]
        if "ttft_p50_ms" not in f:
            print(f"{p.name:>8} {f['ok']:>3}/{f['requests']:<3} failed: {f.get('errors')}")
            continue
        print(
            f"{p.name:>8} {f['ok']:>3}/{f['requests']:<3} {f['peak_in_flight']:>5} "
            f"{f['chunks_per_request']:>6.1f} {f['ttft_p50_ms']:>7.1f}ms {f['ttft_p99_ms']:>7.1f}ms "
            f"{f['gap_p50_ms']:>6.2f}ms {f['gap_p99_ms']:>6.1f}ms {100 * f['bunched_gaps']:>7.1f}% "
            f"{f.get('proxy_cpu_s', 0):>12.2f}"
        )
    print("the proxy's hop alone (upstream stamps: request written → read by the upstream, plus "
          "first chunk written → received; each chunk written → received):")  # fmt: skip
    print("{:>8} {:>13} {:>9} {:>13} {:>9}".format("path", "TTFT hop p50", "p99", "chunk hop p50",
                                                  "p99"))  # fmt: skip
    for p in paths:
        f = out[p.name]
        if "ttft_hop_p50_ms" in f:
            print(f"{p.name:>8} {f['ttft_hop_p50_ms']:>11.3f}ms {f['ttft_hop_p99_ms']:>7.3f}ms "
                  f"{f['chunk_hop_p50_ms']:>11.3f}ms {f['chunk_hop_p99_ms']:>7.3f}ms")  # fmt: skip
    goal = None
    if "added_ttft_hop_p99_ms" in out["record"]:
        r = out["record"]
        goal = max(r["added_ttft_hop_p99_ms"], r["added_chunk_hop_p99_ms"]) <= GOAL_MS
        print(f"record: adds {r['added_ttft_hop_p99_ms']:+.3f} ms to the p99 TTFT hop and "
              f"{r['added_chunk_hop_p99_ms']:+.3f} ms to the p99 chunk hop: goal (≤ {GOAL_MS:g} ms "
              f"at p99) {'met' if goal else 'NOT met'}")  # fmt: skip
    for name in ("record", "litellm"):
        f = out[name]
        if "added_ttft_p99_ms" in f:
            print(
                f"{name}: added p99 TTFT {f['added_ttft_p99_ms']:+.2f} ms (p50 "
                f"{f['added_ttft_p50_ms']:+.2f}), added p99 gap {f['added_gap_p99_ms']:+.2f} ms; "
                f"proxy CPU {f['proxy_cpu_ms_per_request']:.2f} ms per request, "
                f"{f['proxy_cpu_us_per_chunk']:.0f} µs per chunk "
                f"({f['proxy_cores_busy']:.2f} cores while its rounds ran)"
            )
    others = max(0.0, busy - ours)
    print(
        f"CPU contention: {cores} cores; the machine was busy {busy:.1f} CPU-s in {wall:.1f} s "
        f"({busy / wall:.2f} of {cores} cores), at least {others:.1f} CPU-s of it other work "
        f"(load average now {os.getloadavg()[0]:.2f}); client {client_cpu:.1f} CPU-s"
    )
    r, lt = out["record"], out["litellm"]
    summary = {
        "direct": out["direct"],
        "record": r,
        "litellm": lt,
        "ratio_added_p99_ttft_record_over_litellm": ratio(
            r.get("added_ttft_p99_ms"), lt.get("added_ttft_p99_ms")
        ),
        "ratio_added_p99_gap_record_over_litellm": ratio(
            r.get("added_gap_p99_ms"), lt.get("added_gap_p99_ms")
        ),
        "ratio_proxy_cpu_record_over_litellm": ratio(r.get("proxy_cpu_s"), lt.get("proxy_cpu_s")),
        "ratio_added_p99_ttft_hop_record_over_litellm": ratio(
            r.get("added_ttft_hop_p99_ms"), lt.get("added_ttft_hop_p99_ms")
        ),
        "ratio_added_p99_chunk_hop_record_over_litellm": ratio(
            r.get("added_chunk_hop_p99_ms"), lt.get("added_chunk_hop_p99_ms")
        ),
        "record_goal_met": goal,
        "streams": a.streams,
        "rounds": a.rounds,
        "tokens": a.tokens,
        "itl_ms": a.itl_ms,
        "machine": {"cores": cores, "busy_cores": busy / wall, "other_cpu_s": others},
    }
    if any(not n.startswith("skipped") for n in notes.values()):
        print(f"logs kept in {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(rounded(summary)))


if __name__ == "__main__":
    main()
