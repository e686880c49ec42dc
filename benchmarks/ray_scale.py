"""Ray scaling on this machine: replay capacity and generate wall time with 1 and 2 workers.

    .venv/bin/python benchmarks/ray_scale.py [--levels 1,2,4,8,16] [--duration 10]
        [--max-lag-ms 1] [--sessions 4] [--no-local]

One Ray head (``ray start --head --num-cpus N``, token auth, no dashboard) is started for the
whole run and every ``agentload`` command joins it with ``--ray 127.0.0.1:PORT``, so the only
difference between the two Ray configurations is ``--workers 1`` or ``--workers 2``. A run on
one process without Ray (``local``) is the peer of both. Everything is a fresh ``agentload``
process, as a user runs it.

**Replay capacity.** A trace of one ``quick`` session (``context_target=16000``: an
orchestrator and sub-agents, 24 calls with the recorded tool time between them) is replayed in
closed loop with the *recorded* gaps (``--gap-scale 1``) against the built-in simulator
(``instant`` profile, its own process, so it costs the same CPU in every configuration), for
``--duration`` seconds at each concurrency of ``--levels``. Recorded gaps, not ``--gap-scale
0``: a call is then due at a definite moment (its predecessor's completion plus the recorded
wait), so the client's timing error — the *lag*, actual send minus scheduled send, per
request (``lag_ns`` in results.json) — is what the client adds; with no gaps a closed loop
only saturates the machine and every call is late by the queue. Many concurrent sessions with
short recorded waits is where lag matters most. The capacity of a configuration is the most
concurrent streams (sessions in flight) at which the p99 lag over the measured window stays
``<= --max-lag-ms`` (1 ms) — every level below it passing too; 0 when not even the first
level does. The table per configuration shows each level's measured requests, p50/p99/max
lag, achieved requests/s and, with Ray, the workers that actually ran (never more than the
lanes) and the residual clock skew between them (the uncertainty of the merged time line; it
does not enter the lag, whose two times are read on one worker's clock). The ratio is 2-worker capacity over 1-worker capacity (None when
the 1-worker capacity is 0). The JSON also carries the capacity at a looser bound
(``--loose-lag-ms``, 5 ms) and every level's p99, so the scaling stays visible. A p99 over a
few dozen requests (the lowest levels) is close to their maximum: one late wake-up on a shared
machine decides it. ``busy_processes`` counts the processes that load the machine's cores in
each configuration (the simulator and the replaying processes; Ray's own come on top): where
it exceeds ``cores``, a replaying process the kernel sets aside for another sends late
whatever the client does, and the lag measures the machine.

**The simulator's share of the cores.** The simulator stands in for an inference server,
which in a real run is another machine. Here it shares the cores with the replaying processes
and, streaming as fast as it can, is always ready to run: at equal priority the kernel
time-slices it with them, and a worker whose send falls due while the simulator holds its core
waits for the slice to end (milliseconds) whatever the client does. So by default it runs in
the scheduler's idle class (``SCHED_IDLE``, which needs no privilege): it gets every cycle the
clients leave, and a client that wakes takes its core at once. That holds only among the
processes of one scheduling group: with the kernel's autogroups on (``kernel.sched_autogroup_
enabled``, the default of most distributions), each session (``setsid``) is a group and groups
share the CPU as equals, so a Ray head started in a session of its own would put its workers in
another group than the simulator, and they would again wait for its slices. The Ray head is
therefore started in its own process group (killed as one) but in this script's session.
``--server-sched normal`` restores equal priority; the JSON says which (``server_sched``), and
``busy_processes`` counts the simulator only then.

**Generate wall time.** ``agentload generate -s quick -n SESSIONS -p SESSIONS --sandbox
local`` on Ray with ``--workers 1`` and ``--workers 2`` (each worker runs its own simulator),
and without Ray (``local``). The figure is the run's own ``wall_s`` from ``--json``: from the
start of the run (after the CLI's imports) to the trace closed; on Ray it includes joining the
cluster and starting the workers and their simulators (a couple of seconds), which is part of
what ``--workers`` costs. The whole process's wall time is printed beside it. The speedup is
1-worker wall over 2-worker wall.

**Reading it.** Two workers can at best double the capacity and halve the wall time, and only
with a free core each: both ratios are bounded by the machine's cores (printed as ``cores``,
and sent in the JSON), which here also run the simulator, Ray's own processes and the
driver. On 2 cores a ratio near 1 means the machine is out of cores, not that the workers
wait on each other. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).with_name("agentload")
MODEL = "agentload-sim"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _agentload(*args: str) -> list[str]:
    return [sys.executable, "-m", "agentload", *args]


@contextlib.contextmanager
def ray_head(tmp: Path, cpus: int) -> Iterator[tuple[str, dict[str, str]]]:
    """``ray start --head --block`` on 127.0.0.1 with its own auth token, in its own process
    group (in this session: see the module docstring), killed (the whole group) after, also
    on error. Yields the address and the
    environment every ``agentload --ray ADDRESS`` process needs to join it."""
    ray_bin = Path(sys.executable).with_name("ray")
    if not ray_bin.exists():
        raise SystemExit("Ray is not installed: pip install -e '.[ray]'")
    token = tmp / "ray-token"
    token.write_text(secrets.token_hex(32))
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    port = _free_port()
    log_path = tmp / "ray-start.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            [
                str(ray_bin), "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
                f"--num-cpus={cpus}", "--object-store-memory=300000000",
                f"--temp-dir={tmp / 'ray'}", "--include-dashboard=false",
                "--disable-usage-stats", "--block",
            ],
            env=env, stdout=log, stderr=subprocess.STDOUT, process_group=0,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while b"Ray runtime started" not in log_path.read_bytes():
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
                    raise SystemExit(f"ray start --head did not come up: {' | '.join(tail)}")
                time.sleep(0.5)
            yield f"127.0.0.1:{port}", env
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # SIGTERM would drain for 30 s
            proc.wait(timeout=30)


def _idle_class() -> None:
    """In the child before exec: the scheduler's idle class (no privilege needed to lower)."""
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))


def server_sched(asked: str) -> str:
    """The scheduling class the simulator gets: ``idle`` where the platform has it."""
    return "idle" if asked == "idle" and hasattr(os, "SCHED_IDLE") else "normal"


@contextlib.contextmanager
def simulator(tmp: Path, sched: str) -> Iterator[str]:
    """``agentload serve`` (instant profile) in its own process, in scheduling class ``sched``
    (``server_sched``); yields its base URL."""
    import httpx

    port = _free_port()
    log = (tmp / "serve.log").open("wb")
    proc = subprocess.Popen(
        _agentload("serve", "--port", str(port), "--profile", "instant", "--model", MODEL),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        preexec_fn=_idle_class if sched == "idle" else None,
    )
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("agentload serve did not come up (see its log)")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def _run(argv: list[str], env: dict[str, str] | None, what: str) -> tuple[float, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write((proc.stdout + proc.stderr)[-4000:])
        raise SystemExit(f"{what} failed with exit code {proc.returncode}")
    return wall, proc.stdout


def _pct(vals: list[float], q: float) -> float:
    v = sorted(vals)
    if not v:
        return float("nan")
    r = (len(v) - 1) * q / 100
    lo = int(r)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (r - lo)


# ------------------------------------------------------------------------ replay ----------
def make_trace(tmp: Path) -> Path:
    out = tmp / "trace"
    argv = _agentload(
        "generate", "-s", "quick", "-c", "context_target=16000", "--sandbox", "local",
        "-o", str(out), "--json",
    )  # fmt: skip
    _, stdout = _run(argv, None, "agentload generate (the replay trace)")
    return Path(json.loads(stdout.strip().splitlines()[-1])["trace"])


def replay_point(
    trace: Path,
    base: str,
    level: int,
    duration: float,
    out: Path,
    ray: tuple[str, dict[str, str], int] | None,
) -> dict[str, Any]:
    from agentload.measure.results import load_results

    argv = _agentload(
        "replay", str(trace), "--endpoint", base, "--model", MODEL, "--concurrency", str(level),
        "--duration", str(duration), "--gap-scale", "1", "--out", str(out),
    )  # fmt: skip
    env = None
    if ray is not None:
        address, env, workers = ray
        argv += ["--ray", address, "--workers", str(workers)]
    _run(argv, env, f"agentload replay at concurrency {level}")
    doc = load_results(out / "results.json")
    point = doc.points[0]
    measured = [r for r in point.requests if r.phase == "measured"]
    lags = [r.lag_ns / 1e6 for r in measured]
    window_s = (point.window.end_ns - point.window.start_ns) / 1e9
    shutil.rmtree(out, ignore_errors=True)
    return {
        "level": level,
        "requests": len(measured),
        "failed": sum(1 for r in measured if not r.ok),
        "p50_ms": _pct(lags, 50),
        "p99_ms": _pct(lags, 99),
        "max_ms": max(lags, default=float("nan")),
        "req_s": len(measured) / window_s if window_s > 0 else float("nan"),
        "workers": len(point.workers) if point.workers else 1,
        "skew_ms": None if doc.cluster is None else doc.cluster.residual_skew_ns / 1e6,
    }


def capacity(rows: list[dict[str, Any]], bound_ms: float) -> int:
    """The highest level up to which every level's p99 lag is within ``bound_ms``."""
    cap = 0
    for row in rows:
        if not row["p99_ms"] <= bound_ms:  # NaN (no measured request) fails too
            break
        cap = row["level"]
    return cap


def print_table(label: str, rows: list[dict[str, Any]], bound: float) -> None:
    print(f"replay, {label}:")
    print(
        f"{'streams':>8} {'requests':>9} {'failed':>7} {'p50 lag':>10} {'p99 lag':>10} "
        f"{'max lag':>10} {'req/s':>8} {'workers':>8} {'skew':>9}"
    )
    for r in rows:
        skew = "-" if r["skew_ms"] is None else f"{r['skew_ms']:.3f}ms"
        mark = "" if r["p99_ms"] <= bound else f"  > {bound:g} ms"
        print(
            f"{r['level']:>8} {r['requests']:>9} {r['failed']:>7} {r['p50_ms']:>8.3f}ms "
            f"{r['p99_ms']:>8.3f}ms {r['max_ms']:>8.3f}ms {r['req_s']:>8.1f} {r['workers']:>8} {skew:>9}{mark}"
        )


# ---------------------------------------------------------------------- generate ----------
def generate_wall(
    sessions: int, out: Path, ray: tuple[str, dict[str, str], int] | None
) -> tuple[float, float]:
    """(the run's own wall_s from --json, the process's wall seconds)."""
    argv = _agentload(
        "generate", "-s", "quick", "-n", str(sessions), "-p", str(sessions), "--sandbox", "local",
        "-o", str(out), "--json",
    )  # fmt: skip
    env = None
    if ray is not None:
        address, env, workers = ray
        argv += ["--ray", address, "--workers", str(workers)]
    proc_wall, stdout = _run(argv, env, "agentload generate")
    payload = json.loads(stdout.strip().splitlines()[-1])
    shutil.rmtree(out, ignore_errors=True)
    return float(payload["wall_s"]), proc_wall


# -------------------------------------------------------------------------- main ----------
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,2,4,8,16", help="replay concurrencies, ascending")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of load per level")
    ap.add_argument("--max-lag-ms", type=float, default=1.0, help="the capacity's p99 lag bound")
    ap.add_argument("--loose-lag-ms", type=float, default=5.0, help="a second, looser bound")
    ap.add_argument("--sessions", type=int, default=4, help="generate: sessions (all parallel)")
    ap.add_argument("--workers", type=int, default=2, help="the larger worker count (vs 1)")
    ap.add_argument("--no-local", action="store_true", help="skip the peer runs without Ray")
    ap.add_argument(
        "--server-sched",
        choices=("idle", "normal"),
        default="idle",
        help="the simulator's scheduling class: idle (it runs when no client process wants "
        "the CPU, as a server on its own machine would not compete) or normal (it shares the "
        "cores with the clients at equal priority)",
    )
    a = ap.parse_args()
    sched = server_sched(a.server_sched)
    levels = sorted(int(x) for x in a.levels.split(","))
    cores = os.cpu_count() or 1
    bound, loose = a.max_lag_ms, a.loose_lag_ms
    worker_counts = [1, a.workers]
    t_start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="agentload-bench-"))
    tables: dict[str, list[dict[str, Any]]] = {}
    gen: dict[str, tuple[float, float]] = {}
    try:
        trace = make_trace(tmp)
        with ray_head(tmp, max(cores, a.workers)) as (address, env):
            print(
                f"ray head at {address} ({max(cores, a.workers)} CPUs); cores: {cores}; "
                f"simulator in the {sched} scheduling class"
            )
            with simulator(tmp, sched) as base:
                configs: list[tuple[str, tuple[str, dict[str, str], int] | None]] = [
                    (f"ray {w}", (address, env, w)) for w in worker_counts
                ]
                if not a.no_local:
                    configs.append(("local", None))
                for label, ray in configs:
                    rows = []
                    for level in levels:
                        rows.append(
                            replay_point(trace, base, level, a.duration, tmp / "replay", ray)
                        )
                    tables[label] = rows
                    print_table(label if ray is None else f"--ray --workers {ray[2]}", rows, bound)
            for label, ray in configs:
                gen[label] = generate_wall(a.sessions, tmp / "gen", ray)
                g = gen[label]
                print(
                    f"generate {a.sessions} quick sessions, {label}: {g[0]:.2f}s wall "
                    f"(process {g[1]:.1f}s)"
                )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    caps = {label.removeprefix("ray "): capacity(rows, bound) for label, rows in tables.items()}
    caps_loose = {
        label.removeprefix("ray "): capacity(rows, loose) for label, rows in tables.items()
    }
    one, many = "1", str(a.workers)
    ratio = caps[many] / caps[one] if caps[one] else None
    ratio_loose = caps_loose[many] / caps_loose[one] if caps_loose[one] else None
    walls = {label.removeprefix("ray "): round(g[0], 2) for label, g in gen.items()}
    speedup = walls[one] / walls[many]
    # the simulator, and the replaying processes (the workers, or the one local process)
    # (an idle-class simulator yields its core to them, so it does not count)
    busy = {k: int(sched == "normal") + (1 if k == "local" else int(k)) for k in caps}
    for label in caps:
        print(
            f"replay capacity ({label}): {caps[label]} streams at p99 lag <= {bound:g} ms, "
            f"{caps_loose[label]} at <= {loose:g} ms; {busy[label]} busy processes on "
            f"{cores} cores" + (" (more than the cores)" if busy[label] > cores else "")
        )
    print(
        f"replay capacity ratio {many}/{one} workers: "
        + ("n/a (1-worker capacity 0)" if ratio is None else f"{ratio:.2f}")
        + f" at {bound:g} ms, "
        + ("n/a" if ratio_loose is None else f"{ratio_loose:.2f}")
        + f" at {loose:g} ms; cores: {cores}"
    )
    print(f"generate speedup {one}/{many} workers wall: {speedup:.2f}; cores: {cores}")
    print(f"total {time.perf_counter() - t_start:.0f}s")
    print(
        json.dumps(
            {
                "benchmark": "ray_scale",
                "cores": cores,
                "max_lag_ms": bound,
                "replay_capacity_streams": caps,
                "replay_capacity_ratio": None if ratio is None else round(ratio, 2),
                f"replay_capacity_streams_{loose:g}ms": caps_loose,
                f"replay_capacity_ratio_{loose:g}ms": (
                    None if ratio_loose is None else round(ratio_loose, 2)
                ),
                "busy_processes": busy,
                "server_sched": sched,
                "replay_p99_lag_ms": {
                    label.removeprefix("ray "): {
                        str(r["level"]): round(r["p99_ms"], 3) for r in rows
                    }
                    for label, rows in tables.items()
                },
                "generate_sessions": a.sessions,
                "generate_wall_s": walls,
                "generate_speedup": round(speedup, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
