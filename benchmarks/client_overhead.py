"""Client overhead of ``agentload replay`` against the floor and AIPerf, and agentload's client
timing error.

    .venv/bin/python benchmarks/client_overhead.py [--levels 10,100,1000] [--no-aiperf]

The built-in simulator (``instant`` profile: no sleeps) runs in its own process, wrapped in an
ASGI shim that logs, per request, when the server received it and when it handed out the
first body bytes (``time.perf_counter_ns``: CLOCK_MONOTONIC, the same clock in every process
of the machine). At each concurrency level three clients drive the same server with the same
shape of traffic (single-call sessions, ~100 prompt tokens, ``--output-tokens`` pinned with
``ignore_eos``; ``--requests-per-stream`` requests a stream, and at least ``--min-requests`` a
level, so the lower levels are not measured over a couple of CPU-seconds):

* ``agentload`` — replay's own client and point runner (records, phases, timings);
* ``floor`` — the cost floor of this machine: as many keep-alive connections sending the same
  requests (written out before the clock starts) and reading the same responses, counting
  bytes, SSE events and content events by byte patterns only (no HTTP parser, no JSON, no
  records);
* ``aiperf`` — AIPerf, the peer.

The levels run ``--rounds`` times (default 2), every other pass in reverse order (1,000 then
10,000, then 10,000 then 1,000), and agentload's and the floor's figures at a level are their
sums over the passes: a shared machine that slows down or speeds up over the run (run to run,
the same work's CPU time drifts by 10% and more here) then weighs on every level alike instead
of on the last one. agentload replays as ``agentload replay`` does: its plans, and the
payload digests of results.json, are made before the clock starts. AIPerf runs in the first
pass only.

The table (``COLUMNS``: a stable format scripts read; the JSON line's ``rows`` carry every
cell) gives per level and client the content chunks read, their sustained rate, the client's
CPU seconds, chunks per CPU second, CPU µs per chunk and that cost as a multiple of the
floor's. The headlines: agentload's cost per chunk as a multiple of the floor's at each level
(goal ≤ 2), its cost at the highest level over the lowest (goal within 5%), and its chunks
per CPU-second over AIPerf's. The timing error is agentload's TTFT minus the server's own
(first body bytes − request received) for the same request, at ``--timing-streams``.

AIPerf is installed on demand by ``scripts/aiperf.sh install`` (its own cached, pinned venv
under /var/tmp/agentload-aiperf; ~1.2 GB), never into agentload's; it runs offline with the tokenizer
vocabularies written by ``agentload.tokenizer.write_tiktoken_cache`` and ``--tokenizer
builtin``. When it cannot be installed or run, the script says so and reports agentload's own
figures. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------- server (own process) ----
def serve(port: int, log: str, profile: str) -> None:
    """Run the simulator with a timing shim; write the log on SIGTERM."""
    import signal

    import uvicorn

    from agentload.endpoint import Simulator, build_app

    app = build_app(Simulator(profile))
    times: list[str] = []

    async def shim(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/chat/completions":
            await app(scope, receive, send)
            return
        t_recv = time.perf_counter_ns()
        rid = dict(scope["headers"]).get(b"x-bench-id", b"").decode()
        first: list[int] = []

        async def timed_send(msg: Any) -> None:
            if not first and msg["type"] == "http.response.body" and msg.get("body"):
                first.append(time.perf_counter_ns())
            await send(msg)

        await app(scope, receive, timed_send)
        if rid and first:
            times.append(f"{rid} {t_recv} {first[0]}")

    server = uvicorn.Server(
        uvicorn.Config(
            shim,
            host="127.0.0.1",
            port=port,
            log_level="error",
            lifespan="off",
            access_log=False,
            backlog=4096,
            timeout_keep_alive=120,
        )
    )

    def flush(*_: Any) -> None:
        Path(log).write_text("\n".join(times) + "\n")
        server.should_exit = True

    signal.signal(signal.SIGTERM, flush)
    server.run()
    Path(log).write_text("\n".join(times) + "\n")


def serve_raw(port: int, log: str, tokens: int = 8, tok_s: float = 5.0) -> None:
    """A minimal HTTP/1.1 SSE server on raw asyncio sockets (keep-alive, chunked), pacing
    ``tokens`` content events at ``tok_s`` per stream; logs, per request, when the whole
    request arrived and when the first event was written to the socket.

    Arrival is the kernel's receive time of the request's last bytes (``SO_TIMESTAMPNS``,
    through the same ``SocketStream`` replay's client uses; the Python reading where the
    kernel gives none), so the server's own event-loop lag — it shares the machine with the
    client — is not counted as client timing error."""
    import signal

    import httpcore

    from agentload.client.kstamps import SO_TIMESTAMPNS, KernelStamps
    from agentload.client.netback import SocketStream

    times: list[str] = []
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    def chunk(data: bytes) -> bytes:
        return b"%x\r\n%s\r\n" % (len(data), data)

    ev = b'data: {"choices":[{"index":0,"delta":{"content":"tok "},"finish_reason":null}]}\n\n'
    fin = b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}\n\n'
    usage = (
        b'data: {"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":%d}}\n\n' % tokens
    )

    async def handle(stream: SocketStream) -> None:
        buf = b""

        async def fill() -> int:
            nonlocal buf
            data = await stream.read(1 << 16)
            if not data:
                raise ConnectionError("peer closed")
            buf += data
            return stream.rx_ns or time.perf_counter_ns()

        try:
            while True:
                arrived = 0
                while b"\r\n\r\n" not in buf:
                    arrived = await fill()
                hdr, _, buf = buf.partition(b"\r\n\r\n")
                length, rid = 0, ""
                for line in hdr.split(b"\r\n")[1:]:
                    k, _, v = line.partition(b":")
                    if k.lower() == b"content-length":
                        length = int(v)
                    elif k.lower() == b"x-bench-id":
                        rid = v.strip().decode()
                while len(buf) < length:
                    arrived = await fill()
                buf = buf[length:]
                t_recv = min(arrived, time.perf_counter_ns()) if arrived else time.perf_counter_ns()
                if b"/models" in hdr.split(b"\r\n", 1)[0]:
                    body = b'{"object":"list","data":[{"id":"agentload-sim"}]}'
                    await stream.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                        b"content-length: %d\r\n\r\n%s" % (len(body), body)
                    )
                    continue
                await stream.write(head)
                await asyncio.sleep(0.02)
                t_first = 0
                for i in range(tokens):
                    if i:
                        await asyncio.sleep(1 / tok_s)
                    await stream.write(chunk(ev))
                    if i == 0:
                        t_first = time.perf_counter_ns()
                await stream.write(
                    chunk(fin) + chunk(usage) + chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"
                )
                if rid:
                    times.append(f"{rid} {t_recv} {t_first}")
        except (ConnectionError, OSError, httpcore.NetworkError):
            await stream.aclose()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        stamps = KernelStamps()
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind(("127.0.0.1", port))
        lsock.listen(4096)
        lsock.setblocking(False)
        stop = asyncio.Event()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        tasks: set[asyncio.Task[None]] = set()

        async def accept() -> None:
            while True:
                conn, _ = await loop.sock_accept(lsock)
                conn.setblocking(False)
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                try:
                    conn.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                    st: KernelStamps | None = stamps
                except OSError:
                    st = None
                task = asyncio.create_task(handle(SocketStream(conn, loop, st)))
                tasks.add(task)
                task.add_done_callback(tasks.discard)

        acceptor = asyncio.create_task(accept())
        await stop.wait()
        acceptor.cancel()
        Path(log).write_text("\n".join(times) + "\n")

    asyncio.run(main())


def _free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port


def start_server(log: Path, profile: str = "instant") -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(port), str(log), profile],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                return proc, f"http://127.0.0.1:{port}/v1"
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("simulator did not start")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()


# ------------------------------------------------------------------ agentload client ------
def _prompt(i: int) -> str:
    """The user message of request ``i`` (~100 tokens, different in every request)."""
    words = " ".join(f"w{(i * 7 + k) % 997}" for k in range(60))
    return f"{i} {words}"


async def _write_trace(path: Path, n: int, out_tokens: int) -> None:
    from agentload.tokenizer import ChatTokenCounter
    from agentload.trace import CallCapture, ObservedCall, TraceWriter, make_header
    from agentload.trace.schema import Timings

    async with TraceWriter(path, make_header(model="bench")) as w:
        cap = CallCapture(w, ChatTokenCounter())
        for i in range(n):
            body = {"model": "bench", "messages": [{"role": "user", "content": _prompt(i)}]}
            await cap.record(
                ObservedCall(
                    call_id=f"c{i}",
                    session_id=f"s{i}",
                    agent_id=f"a{i}",
                    seq=0,
                    body=body,
                    content="x",
                    tool_calls=None,
                    finish_reason="length",
                    usage={"completion_tokens": out_tokens},
                    timings=Timings(submit_ns=i, first_token_ns=i + 1, last_token_ns=i + 2),
                )
            )


async def run_agentload(
    base: str, trace: Path, level: int, total: int, rate: float | None = None
) -> dict[str, Any]:
    from agentload.client.stream import StreamClient
    from agentload.options.engines import get_engine
    from agentload.options.load import LoadOptions
    from agentload.replay.bodies import BodyBuilder
    from agentload.replay.plan import build_plans
    from agentload.replay.prepare import digest_manifest
    from agentload.replay.schedule import LoadShape, PointRunner
    from agentload.trace import load_trace

    plans = build_plans([load_trace(trace)])
    digest_manifest(plans)  # before the clock, as ``agentload replay`` does (replay.run)
    client = StreamClient(base, max_connections=level + 8, timeout_s=300)
    load = LoadOptions(start_at="zero", gap_scale=0.0, arrival_rate=rate)
    shape = LoadShape(load, concurrency=level, sessions=total, session_header="x-bench-id")
    runner = PointRunner(client, plans, BodyBuilder("agentload-sim", get_engine("vllm")), shape)
    rss0 = _rss_kib()
    await client.warm(level)
    # no GC tuning of its own: the point freezes the heap as a user's replay does (replay.heap)
    cpu0, t0 = time.process_time(), time.perf_counter()
    run = await runner.run()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    rss1 = _rss_kib()
    await client.aclose()
    ok = [r for r in run.requests if r.ok]
    chunks = sum(len(r.itl_ns) + 1 for r in ok)
    ids = {r.session: f"{runner.source.nonce}-{r.session}" for r in ok}
    ttft = {ids[r.session]: (r.ttft_ns or 0) for r in ok}
    first = {ids[r.session]: (r.first_ns or 0) + run.t0_ns for r in ok}
    return {
        "chunks": chunks,
        "cpu_s": cpu,
        "wall_s": wall,
        "ok": len(ok),
        "failed": len(run.requests) - len(ok),
        "ttft": ttft,
        "first": first,
        "max_inflight": runner.stats.max_inflight,
        # resident memory at the end of the run over what the process held before this
        # level's connections: per stream, its connection and its records
        "kib_per_stream": (rss1 - rss0) / level,
    }


# ------------------------------------------------------------------------ the floor ------
_CONTENT_EVENT = b'"delta":{"content":"'
"""How the floor tells a content event (a chunk) without parsing: the simulator's bytes."""


class _FloorConn(asyncio.Protocol):
    """One keep-alive connection of the floor: counts bytes, SSE events and content events by
    byte patterns (no HTTP parser, no JSON, no records); a response ends at the chunked
    body's last chunk."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.tail = b""
        self.bytes = self.events = self.chunks = 0
        self.done: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.bytes += len(data)
        tail, joined = self.tail, self.tail + data
        self.events += joined.count(b"data: ") - tail.count(b"data: ")
        self.chunks += joined.count(_CONTENT_EVENT) - tail.count(_CONTENT_EVENT)
        self.tail = joined[-32:]
        if self.tail.endswith(b"\r\n0\r\n\r\n") and self.done and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(exc or ConnectionError("closed mid-response"))


def _floor_request(host: str, i: int, out_tokens: int) -> bytes:
    """Request ``i`` as agentload sends it (the trace's prompt, the vllm preset's pinned
    length and usage chunk), written out once before the clock starts."""
    body = json.dumps(
        {
            "model": "agentload-sim",
            "messages": [{"role": "user", "content": _prompt(i)}],
            "stream": True,
            "max_tokens": out_tokens,
            "ignore_eos": True,
            "min_tokens": out_tokens,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\n"
        f"content-type: application/json\r\naccept: text/event-stream\r\n"
        f"x-bench-id: floor-{i}\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def run_floor(base: str, level: int, total: int, out_tokens: int) -> dict[str, Any]:
    """The cost floor of this machine: ``level`` connections reading ``total`` responses of
    the same requests, counting bytes and events only (``_FloorConn``)."""
    from urllib.parse import urlsplit

    u = urlsplit(base)
    host, port = u.hostname or "127.0.0.1", u.port or 80
    requests = [_floor_request(f"{host}:{port}", i, out_tokens) for i in range(total)]
    loop = asyncio.get_running_loop()
    conns = [(await loop.create_connection(_FloorConn, host, port))[1] for _ in range(level)]
    todo = iter(requests)
    failed = 0

    async def lane(c: _FloorConn) -> None:
        nonlocal failed
        for req in todo:
            c.done = loop.create_future()
            assert c.transport is not None
            c.transport.write(req)
            try:
                await c.done
            except ConnectionError:
                failed += 1
                return

    cpu0, t0 = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane(c) for c in conns))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    for c in conns:
        if c.transport is not None:
            c.transport.close()
    return {
        "chunks": sum(c.chunks for c in conns),
        "events": sum(c.events for c in conns),
        "bytes": sum(c.bytes for c in conns),
        "cpu_s": cpu,
        "wall_s": wall,
        "failed": failed,
    }


def _rss_kib() -> int:
    """The process's resident memory now, KiB (Linux)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


# ------------------------------------------------------------------------- AIPerf ---------
def ensure_aiperf() -> tuple[Path | None, str]:
    """AIPerf from the project's one installer (scripts/aiperf.sh: a cached, pinned venv)."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "aiperf.sh"
    try:
        proc = subprocess.run(
            ["bash", str(script), "install"], capture_output=True, text=True, timeout=1800
        )
    except (subprocess.TimeoutExpired, OSError) as exc:
        return None, f"could not install aiperf: {exc}"
    if proc.returncode != 0:
        return None, (proc.stderr.strip().splitlines() or ["could not install aiperf"])[-1]
    exe = Path(proc.stdout.strip()).parent / "aiperf"
    return (exe, "found") if exe.exists() else (None, "aiperf installed without a CLI")


def run_aiperf(
    exe: Path, base: str, level: int, total: int, out_tokens: int, cache: Path, art: Path
) -> dict[str, Any]:
    env = dict(os.environ, TIKTOKEN_CACHE_DIR=str(cache))
    cmd = [
        str(exe),
        "profile",
        "--model",
        "agentload-sim",
        "--url",
        base.removesuffix("/v1"),
        "--endpoint-type",
        "chat",
        "--streaming",
        "--concurrency",
        str(level),
        "--request-count",
        str(total),
        "--synthetic-input-tokens-mean",
        "100",
        "--output-tokens-mean",
        str(out_tokens),
        "--output-tokens-stddev",
        "0",
        "--extra-inputs",
        "ignore_eos:true",
        "--tokenizer",
        "builtin",
        "--artifact-dir",
        str(art),
        "--ui-type",
        "none",
    ]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, capture_output=True, timeout=1800)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        tail = (p.stdout + p.stderr).decode(errors="replace")[-400:]
        return {"error": f"aiperf exited {p.returncode}: {tail}"}
    dur = wall
    for f in art.rglob("*aiperf*.json"):
        try:
            data = json.loads(f.read_text())
        except (ValueError, OSError):
            continue
        d = _find(data, "benchmark_duration")
        if isinstance(d, int | float) and d > 0:
            dur = float(d)
            break
    return {"chunks": total * out_tokens, "cpu_s": cpu, "wall_s": dur, "ok": total}


def _find(obj: Any, key: str) -> Any:
    if isinstance(obj, dict):
        if key in obj:
            v = obj[key]
            return v.get("avg", v.get("value")) if isinstance(v, dict) else v
        for v in obj.values():
            r = _find(v, key)
            if r is not None:
                return r
    return None


# --------------------------------------------------------------------------- main ---------
def _pct(vals: list[float], q: float) -> float:
    v = sorted(vals)
    if not v:
        return float("nan")
    r = (len(v) - 1) * q / 100
    lo = int(r)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (r - lo)


def timing_error(tmp: Path, n: int, kind: str) -> dict[str, Any]:
    """agentload TTFT − server TTFT per request, at ``n`` concurrent paced streams (8 tokens at
    5 tokens/s, started as Poisson arrivals so they overlap without one thundering herd)."""
    log = tmp / f"timing-{kind}.log"
    trace = tmp / "timing.agentload.jsonl"
    if not trace.exists():
        asyncio.run(_write_trace(trace, n * 3, 8))
    profile = "raw"
    if kind == "simulator":
        profile = str(tmp / "paced.yaml")
        Path(profile).write_text(
            "name: paced\ninstant: false\nprefill_tokens_per_s: 10000000\n"
            "decode_tokens_per_s: 5\ndecode_degradation: 0\noverhead_ms: 20\n"
            f"max_batch: {n * 2}\nkv_capacity_tokens: 100000000\nblock_size: 16\n"
            "max_context: 1048576\n"
        )
    proc, base = start_server(log, profile)
    try:
        t = asyncio.run(run_agentload(base, trace, n, n * 3, rate=n / 1.7))
    finally:
        stop_server(proc)
    server: dict[str, tuple[int, int]] = {}
    for line in log.read_text().splitlines():
        if line.strip():
            rid, t_recv, t_first = line.split()
            server[rid] = (int(t_recv), int(t_first))
    err = [(t["ttft"][k] - (server[k][1] - server[k][0])) / 1e6 for k in t["ttft"] if k in server]
    recv = [(t["first"][k] - server[k][1]) / 1e6 for k in t["first"] if k in server]
    return {
        "n": len(err),
        "failed": t["failed"],
        "peak": t["max_inflight"],
        "p50": _pct(err, 50),
        "p99": _pct(err, 99),
        "max": max(err, default=float("nan")),
        "recv_p50": _pct(recv, 50),
        "recv_p99": _pct(recv, 99),
        "cpu_s": t["cpu_s"],
        "wall_s": t["wall_s"],
    }


CLIENTS = ("agentload", "floor", "aiperf")
COLUMNS = (
    "level",
    "client",
    "chunks",
    "chunks_per_s",
    "cpu_s",
    "chunks_per_cpu_s",
    "us_per_chunk",
    "x_floor",
    "kib_per_stream",
)
"""The table's columns, in order (scripts read them; the JSON line's ``rows`` use these keys):
the streams in flight, the client, the content chunks it read, their sustained rate, the
client's CPU seconds, chunks per CPU second, CPU µs per chunk, that cost as a multiple of the
floor's at the same level, and resident KiB per stream (agentload only)."""


def client_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The table's lines and rows (``COLUMNS``), and the headline figures: agentload's chunks
    per CPU-s over AIPerf's (the lowest level's ratio), its cost per chunk as a multiple of
    the floor's (the highest), and its cost at the highest level over the lowest."""
    widths = (6, 10, 11, 12, 8, 14, 10, 8, 11)
    lines = [" ".join(f"{c:>{w}}" for c, w in zip(COLUMNS, widths, strict=True))]
    out: list[dict[str, Any]] = []
    for row in rows:
        floor_us = _us_per_chunk(row.get("floor"))
        for name in CLIENTS:
            r = row.get(name)
            if not r:
                continue
            if "error" in r:
                lines.append(f"{row['level']:>6} {name:>10} {r['error']}")
                continue
            us = _us_per_chunk(r)
            rec = {
                "level": row["level"],
                "client": name,
                "chunks": r["chunks"],
                "chunks_per_s": round(r["chunks"] / max(r["wall_s"], 1e-9)),
                "cpu_s": round(r["cpu_s"], 3),
                "chunks_per_cpu_s": round(r["chunks"] / max(r["cpu_s"], 1e-9)),
                "us_per_chunk": None if us is None else round(us, 3),
                "x_floor": None if us is None or not floor_us else round(us / floor_us, 2),
                "kib_per_stream": None
                if r.get("kib_per_stream") is None
                else round(r["kib_per_stream"], 1),
            }
            out.append(rec)
            lines.append(
                " ".join(
                    f"{'' if rec[c] is None else _cell(rec[c]):>{w}}"
                    for c, w in zip(COLUMNS, widths, strict=True)
                )
            )
    ours = [r for r in out if r["client"] == "agentload" and r["us_per_chunk"]]
    theirs = {r["level"]: r for r in out if r["client"] == "aiperf"}
    ratios = [
        r["chunks_per_cpu_s"] / theirs[r["level"]]["chunks_per_cpu_s"]
        for r in ours
        if r["level"] in theirs and theirs[r["level"]]["chunks_per_cpu_s"]
    ]
    return {
        "lines": lines,
        "rows": out,
        "ratio_vs_aiperf": round(min(ratios), 2) if ratios else None,
        "agentload_x_floor": {r["level"]: r["x_floor"] for r in ours},
        "flatness": round(ours[-1]["us_per_chunk"] / ours[0]["us_per_chunk"], 3)
        if len(ours) > 1
        else None,
    }


def _summed(before: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, Any]:
    """One client's figures at a level over the passes so far: chunks, CPU and wall seconds
    summed (a failed pass is the level's error); memory per stream the first pass's (a later
    one reuses what the process already holds)."""
    if before is None or "error" in before:
        return before or now
    if "error" in now:
        return now
    return {
        **before,
        "chunks": before["chunks"] + now["chunks"],
        "cpu_s": before["cpu_s"] + now["cpu_s"],
        "wall_s": before["wall_s"] + now["wall_s"],
    }


def _us_per_chunk(r: dict[str, Any] | None) -> float | None:
    if not r or "error" in r or not r.get("chunks"):
        return None
    return float(r["cpu_s"]) / r["chunks"] * 1e6


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", nargs=3, metavar=("PORT", "LOG", "PROFILE"), help=argparse.SUPPRESS)
    ap.add_argument("--timing-streams", type=int, default=1000)
    ap.add_argument("--levels", default="10,100,1000")
    ap.add_argument("--requests-per-stream", type=int, default=3)
    ap.add_argument(
        "--min-requests",
        type=int,
        default=30000,
        help="requests at each level at least (more per stream at the lower levels), so every "
        "level measures the same volume of chunks, not a few CPU-seconds that noise decides",
    )
    ap.add_argument("--output-tokens", type=int, default=256)
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="passes over the levels, every other one in reverse (1,2,3 then 3,2,1: a machine "
        "that slows or speeds up over the run weighs on every level alike); agentload's and "
        "the floor's figures are their sums over the passes, AIPerf runs in the first only",
    )
    ap.add_argument("--no-aiperf", action="store_true")
    a = ap.parse_args()
    if a.serve:
        if a.serve[2] == "raw":
            serve_raw(int(a.serve[0]), a.serve[1])
        else:
            serve(int(a.serve[0]), a.serve[1], a.serve[2])
        return
    sys.path.insert(0, str(ROOT))
    levels = [int(x) for x in a.levels.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="agentload-bench-"))
    log = tmp / "server.log"
    trace = tmp / "bench.agentload.jsonl"
    totals = {lv: max(lv * a.requests_per_stream, a.min_requests) for lv in levels}
    asyncio.run(_write_trace(trace, max(totals.values()), a.output_tokens))

    aiperf, note = (None, "skipped (--no-aiperf)")
    cache = tmp / "tiktoken"
    if not a.no_aiperf:
        aiperf, note = ensure_aiperf()
        from agentload.tokenizer import write_tiktoken_cache

        write_tiktoken_cache(str(cache))
    print(f"aiperf: {note}")
    proc, base = start_server(log)
    rows: dict[int, dict[str, Any]] = {lv: {"level": lv} for lv in levels}
    try:
        for n in range(max(1, a.rounds)):
            for level in levels if n % 2 == 0 else levels[::-1]:
                row, total = rows[level], totals[level]
                ours = asyncio.run(run_agentload(base, trace, level, total))
                row["agentload"] = _summed(row.get("agentload"), ours)
                floor = asyncio.run(run_floor(base, level, total, a.output_tokens))
                row["floor"] = _summed(row.get("floor"), floor)
                if aiperf is not None and n == 0:
                    row["aiperf"] = run_aiperf(
                        aiperf, base, level, total, a.output_tokens, cache, tmp / f"aiperf-{level}"
                    )
    finally:
        stop_server(proc)
    n = a.timing_streams
    timings = {
        "simulator": timing_error(tmp, n, "simulator"),
        "lean": timing_error(tmp, n, "raw"),
    }

    table = client_table(list(rows.values()))
    for line in table["lines"]:
        print(line)
    for name, t in timings.items():
        what = (
            "the simulator (paced profile)"
            if name == "simulator"
            else "a lean raw-asyncio SSE server (no queue of its own)"
        )
        print(
            f"timing error vs {what} at {n} concurrent streams (agentload TTFT − server TTFT, "
            f"{t['n']} requests, {t['failed']} failed, peak {t['peak']} in flight): p50 "
            f"{t['p50']:.3f} ms, p99 {t['p99']:.3f} ms, max {t['max']:.3f} ms; response side "
            f"(client first chunk − server first write) p50 {t['recv_p50']:.3f} ms, p99 "
            f"{t['recv_p99']:.3f} ms; client CPU {t['cpu_s']:.2f} s in {t['wall_s']:.2f} s"
        )
    shutil.rmtree(tmp, ignore_errors=True)
    print(
        json.dumps(
            {
                "ratio_vs_aiperf": table["ratio_vs_aiperf"],
                "agentload_x_floor": table["agentload_x_floor"],
                "agentload_cost_flatness": table["flatness"],
                "timing_error_p99_ms": round(timings["lean"]["p99"], 3),
                "timing_error_vs_simulator_p99_ms": round(timings["simulator"]["p99"], 3),
                "receive_lag_p99_ms": round(timings["lean"]["recv_p99"], 3),
                "timing_streams": n,
                "columns": list(COLUMNS),
                "rows": table["rows"],
                "aiperf": note,
            }
        )
    )


if __name__ == "__main__":
    main()
