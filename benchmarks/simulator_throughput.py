"""Streaming throughput of the built-in simulator (instant profile).

Starts ``agentload serve`` in its own process (one event loop, so one core), then for each
concurrency N runs N streaming clients (httpx, one connection each) that send chat requests
with ``max_tokens`` + ``ignore_eos`` back to back for ``--duration`` seconds. Reports streamed
tokens/s and requests/s per N (tokens counted from each stream's usage chunk) and the server
process's CPU seconds during each phase (from /proc). Last line: one JSON object.

    python benchmarks/simulator_throughput.py [--duration 5] [--max-tokens 256] [--n 1,64,512]
        [--client-procs K] [--client httpx|raw]

On a small machine the clients, not the server, are the limit: ``tokens_per_server_cpu_s``
(streamed tokens per CPU second the server process used) is the server's one-core capacity.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import subprocess
import sys
import time

import httpx
import orjson


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def client(
    c: httpx.AsyncClient, url: str, body: bytes, deadline: float, totals: list[int]
) -> None:
    while time.perf_counter() < deadline:
        async with c.stream(
            "POST", url, content=body, headers={"content-type": "application/json"}
        ) as r:
            tail = b""
            async for chunk in r.aiter_raw():
                tail = (tail + chunk)[-4096:]
        i = tail.rfind(b'"usage":{')
        if r.status_code != 200 or i < 0:
            raise RuntimeError(f"bad response {r.status_code}: {tail[-300:]!r}")
        usage = orjson.loads(tail[i + 8 : tail.index(b"}", tail.index(b"}", i) + 1) + 1])
        totals[0] += usage["completion_tokens"]
        totals[1] += 1


async def raw_client(host: str, port: int, body: bytes, deadline: float, totals: list[int]) -> None:
    """A minimal keep-alive HTTP/1.1 client (chunked responses), to take the client's own
    parsing cost out of the measurement."""
    reader, writer = await asyncio.open_connection(host, port)
    req = (
        f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\ncontent-type: "
        f"application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    ).encode() + body
    try:
        while True:
            writer.write(req)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"bad response: {head[:200]!r}")
            tail = b""
            while True:
                size = int((await reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await reader.readline()
                    break
                tail = (tail + await reader.readexactly(size))[-4096:]
                await reader.readexactly(2)
            i = tail.rfind(b'"usage":{')
            usage = orjson.loads(tail[i + 8 : tail.index(b"}", tail.index(b"}", i) + 1) + 1])
            totals[0] += usage["completion_tokens"]
            totals[1] += 1
            if time.perf_counter() >= deadline:
                return
    finally:
        writer.close()


async def _run(
    base: str, ids: range, start: float, duration: float, max_tokens: int, kind: str = "httpx"
) -> tuple[int, int]:
    url = base + "/chat/completions"
    n = len(ids)
    limits = httpx.Limits(max_connections=n, max_keepalive_connections=n)
    async with httpx.AsyncClient(limits=limits, timeout=60) as c:
        bodies = [
            orjson.dumps(
                {
                    "model": "agentload-sim",
                    "messages": [{"role": "user", "content": f"Client {i}: explain KV caches."}],
                    "max_tokens": max_tokens,
                    "ignore_eos": True,
                    "stream": True,
                    "stream_options": {"include_usage": True},
                }
            )
            for i in ids
        ]
        await asyncio.gather(*(client(c, url, b, 0, [0, 0]) for b in bodies[: min(n, 8)]))
        await asyncio.sleep(max(0.0, start - time.time()))
        totals = [0, 0]
        deadline = time.perf_counter() + duration
        if kind == "raw":
            hostport = base.split("//", 1)[1].split("/", 1)[0]
            host, port = hostport.rsplit(":", 1)
            await asyncio.gather(
                *(raw_client(host, int(port), b, deadline, totals) for b in bodies)
            )
        else:
            await asyncio.gather(*(client(c, url, b, deadline, totals) for b in bodies))
    return totals[0], totals[1]


def _worker(args: tuple[str, range, float, float, int, str]) -> tuple[int, int]:
    return asyncio.run(_run(*args))


def phase(
    base: str, n: int, duration: float, max_tokens: int, pid: int, procs: int, kind: str
) -> dict[str, float | int | str | None]:
    """N clients split over ``procs`` client processes, all starting at the same instant."""
    procs = max(1, min(procs, n))
    shares = [range(i, n, procs) for i in range(procs)]
    start = time.time() + 1.5 + 0.02 * n / procs
    with multiprocessing.get_context("spawn").Pool(procs) as pool:
        job = pool.map_async(
            _worker, [(base, ids, start, duration, max_tokens, kind) for ids in shares]
        )
        time.sleep(max(0.0, start - time.time()))
        cpu0, t0 = cpu_seconds(pid), time.perf_counter()
        out = job.get()
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(pid) - cpu0
    tokens = sum(t for t, _ in out)
    reqs = sum(r for _, r in out)
    return {
        "n": n,
        "tokens_per_s": round(tokens / wall),
        "requests_per_s": round(reqs / wall, 1),
        "server_cpu_s": round(cpu, 2),
        "wall_s": round(wall, 2),
        "tokens_per_server_cpu_s": round(tokens / cpu) if cpu else None,
        "client_processes": procs,
        "client": kind,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--max-tokens", type=int, default=256)
    ap.add_argument("--n", default="1,64,512")
    ap.add_argument(
        "--client-procs",
        type=int,
        default=max(1, (os.cpu_count() or 2) - 1),
        help="client processes (the server uses one core; clients get the rest)",
    )
    ap.add_argument(
        "--client",
        choices=("httpx", "raw"),
        default="httpx",
        help="httpx streaming clients, or a minimal raw HTTP/1.1 client (cheaper to run)",
    )
    a = ap.parse_args()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentload.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        banner = proc.stdout.readline()
        base = banner.split(" on ")[1].split()[0]
        results = []
        for n in (int(x) for x in a.n.split(",")):
            r = phase(base, n, a.duration, a.max_tokens, proc.pid, a.client_procs, a.client)
            print(
                f"N={n:4d}  {r['tokens_per_s']:>8} tokens/s  {r['requests_per_s']:>7} req/s  "
                f"server CPU {r['server_cpu_s']} s over {r['wall_s']} s",
                flush=True,
            )
            results.append(r)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    print(
        json.dumps(
            {
                "benchmark": "simulator_throughput",
                "profile": "instant",
                "max_tokens": a.max_tokens,
                "duration_s": a.duration,
                "cpus": os.cpu_count(),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
