"""Latency that ``agentload record`` adds to a streamed chat call, against LiteLLM's proxy.

    .venv/bin/python benchmarks/record_overhead.py [--streams 100] [--rounds 4] [--tokens 32]
        [--itl-ms 20] [--skip-litellm] [--skip-record]

The upstream is the built-in simulator (``agentload serve``, own process) with a paced profile:
every stream gets its tokens exactly ``--itl-ms`` apart (decode rate 1000/itl, no degradation
with the batch, a batch limit far above ``--streams``, so nothing queues), after a 10 ms TTFT.
The starts of a round are spread over ``--ramp-ms`` (200 ms: shorter than a stream, so all
``--streams`` are in flight at once — ``peak`` says how many were — without the thundering
herd that would measure the simulator's admission rather than the proxies).
Three paths carry the same load — ``--streams`` concurrent streaming chat requests per round,
the same prompts, ``max_tokens`` = ``--tokens`` with ``ignore_eos`` — and the rounds are
interleaved (the order rotates each round) so that the machine's other work falls on each path
alike:

* ``direct``: the client talks to the simulator;
* ``record``: through ``agentload record --upstream URL --listen 127.0.0.1:PORT -o DIR``;
* ``litellm``: through LiteLLM's proxy (``litellm --config``, one ``openai/agentload-sim``
  model whose ``api_base`` is the simulator), installed by ``scripts/litellm.sh install`` in its
  own cached venv; telemetry, spend logs and the remote cost map are off, so it runs offline.

The client is a lean asyncio HTTP/1.1 client (one keep-alive connection per stream, on
``agentload.replay.netback.SocketStream``): each SSE event that carries content is stamped with
the kernel's receive time of the bytes that completed it (``SO_TIMESTAMPNS``, in the
``time.perf_counter_ns`` domain; the client's own reading where the kernel gives none), so the
client's event-loop lag is not counted against a proxy. Per request: TTFT (request written →
first content event) and each gap between content events. Per path: p50/p99 TTFT and gap, the
share of gaps under 2 ms (events that arrived bunched: buffering), and the CPU seconds its
proxy used (its process tree's utime + stime from /proc, over its own rounds only). Per proxy:
the added latency, p99 TTFT and p99 gap minus direct's. The last line is one JSON object.
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

from agentload.quantiles import percentile
from agentload.replay.netback import AsyncioBackend, KernelStamps, SocketStream

ROOT = Path(__file__).resolve().parents[1]
MODEL = "agentload-sim"
TICK = os.sysconf("SC_CLK_TCK")


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
    profile = tmp / "paced.yaml"
    profile.write_text(
        "name: paced\ndescription: fixed inter-token time, no queueing (record_overhead.py)\n"
        f"instant: false\nprefill_tokens_per_s: 100000000\ndecode_tokens_per_s: {1000 / itl_ms}\n"
        f"decode_degradation: 0\noverhead_ms: 10\nmax_batch: {max(1024, streams * 4)}\n"
        "kv_capacity_tokens: 100000000\nblock_size: 16\nmax_context: 1048576\n"
    )
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    cmd = [
        sys.executable,
        "-m",
        "agentload",
        "serve",
        "--port",
        str(port),
        "--profile",
        str(profile),
    ]
    return start(cmd, root, "agentload serve", tmp / "upstream.log"), root


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
                if status == 200 and has_content(event):
                    if call.chunks == 0:
                        call.ttft_ns = now - t0
                    else:
                        call.gaps_ns.append(now - last)
                    last = now
                    call.chunks += 1
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


def has_content(event: bytes) -> bool:
    """Does this SSE event carry output text (a non-empty ``choices[0].delta.content``)?"""
    for line in event.split(b"\n"):
        if line.startswith(b"data:"):
            data = line[5:].strip()
            if not data or data == b"[DONE]":
                return False
            obj = orjson.loads(data)
            ch = obj.get("choices") or [{}]
            return bool((ch[0].get("delta") or {}).get("content"))
    return False


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
    for k in ("ttft_p50", "ttft_p99", "gap_p50", "gap_p99"):
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
    return round(a / b, 3) if isinstance(a, float) and isinstance(b, float) and b else None


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
    a = ap.parse_args()
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
