"""How long ``replay --capacity`` takes to its answer, against a full search with long windows.

    .venv/bin/python benchmarks/capacity_search.py [--target simulator|llamacpp]
        [--full-window-s 60] [--no-full]

The search a new user would run (issue 52): a ``quick`` trace (``generate -s quick --seed 3``)
against ``agentload serve --profile large-gpu`` (an illustrative 8-GPU node, modeled, not
measured), ``--capacity --slo tps_user=30,ttft=5s --gpus 8 --power-watts 10000``, run twice,
each against a fresh server process:

* ``fast`` — the default search: one run whose lanes the search moves (a ramp, then full
  probes placed inside the bracket, ``--capacity-search ramp``), each probe ended by the
  sequential test;
* ``full`` — the reference: ``--capacity-search probes`` (every probe a point of its own from
  cold, its requests in flight completed; or ``--full-search ramp``: the same one run) with
  every full probe measured at least ``--full-window-s`` seconds (``--capacity-min-window``)
  before its verdict.

With ``--target llamacpp`` both run against llama.cpp's ``llama-server`` serving Gemma 3 270M
(``scripts/llama-server.sh``; a tiny model on the CPU, so a tiny trace and loose objectives).

The table (``COLUMNS``: a stable format scripts read; the JSON line's ``rows`` carry every
cell) gives per search its answer, its bracket, the resolution, its probes (ramp steps among
them), its wall-clock seconds and the search's own (``capacity.elapsed_s``). The headlines:
the fast search's minutes (goal ≤ 5 on the simulator, ≤ 10 on llama.cpp) and whether both
answers agree within the resolution. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, ClassVar

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "agentload"]
COLUMNS = (
    "search",
    "answer",
    "bracket",
    "resolution",
    "probes",
    "ramp_steps",
    "wall_s",
    "search_s",
)
SIM_SLO = "tps_user=30,ttft=5s"
ENGINE_SLO = "tps_user=2,ttft=20s"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_up(url: str, timeout_s: float = 60.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the server at {url} did not answer in {timeout_s:.0f} s")


class Simulator:
    """``agentload serve --profile large-gpu`` in its own process, fresh for each search."""

    model = "agentload-sim"
    slo = SIM_SLO
    extra: ClassVar[list[str]] = ["--gpus", "8", "--power-watts", "10000"]

    def __enter__(self) -> str:
        port = _free_port()
        argv = [*CLI, "serve", "--profile", "large-gpu", "--port", str(port)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}/v1"
        _wait_up(f"{base}/models")
        return base

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


class LlamaCpp:
    """llama.cpp's server (``scripts/llama-server.sh``), restarted for each search."""

    model = "gemma"
    slo = ENGINE_SLO
    extra: ClassVar[list[str]] = ["--engine", "llamacpp", "--gap-scale", "0", "--timeout", "120"]

    def __enter__(self) -> str:
        out = subprocess.run(
            ["scripts/llama-server.sh", "start"], cwd=ROOT, capture_output=True, text=True
        )
        if out.returncode != 0:
            raise SystemExit(f"llama-server did not start: {out.stderr.strip()[-400:]}")
        base = out.stdout.strip().splitlines()[-1].split("=", 1)[1]
        _wait_up(f"{base}/models")
        return base

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["scripts/llama-server.sh", "stop"], cwd=ROOT, capture_output=True)


def make_trace(tmp: Path, target: str) -> Path:
    """The trace the searches replay: ``quick`` (seed 3) on the simulator; on the engine, a
    small one its CPU serves (the tests' linear sessions: 4 of 4 calls, 16-token replies)."""
    out = tmp / "trace"
    if target == "llamacpp":
        sys.path.insert(0, str(ROOT / "tests" / "replay"))
        from replay_traces import linear_trace

        return linear_trace(tmp / "lin.agentload.jsonl.zst", sessions=4, calls=4, out_tokens=16)
    argv = [*CLI, "generate", "-s", "quick", "--seed", "3", "--out", str(out)]
    subprocess.run(argv, check=True, capture_output=True, cwd=ROOT)
    (trace,) = out.glob("*.agentload.jsonl.zst")
    return trace


def search(
    server: Simulator | LlamaCpp, trace: Path, out: Path, extra: list[str]
) -> dict[str, Any]:
    """One capacity search against a fresh server; its row."""
    with server as base:
        argv = [*CLI, "replay", str(trace), "--endpoint", base, "--model", server.model]
        argv += ["--capacity", "--slo", server.slo, *server.extra, *extra, "--out", str(out)]
        t = time.monotonic()
        proc = subprocess.Popen(
            argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT
        )
        assert proc.stderr is not None
        tail: list[str] = []
        for line in proc.stderr:  # each probe's line as it ends, with the time so far
            tail = [*tail[-20:], line]
            if line.startswith("agentload: capacity probe"):
                print(f"  {time.monotonic() - t:6.1f}s {line[11:].rstrip()}", flush=True)
        proc.wait()
        wall = time.monotonic() - t
    if proc.returncode != 0:
        return {"error": "".join(tail).strip()[-600:], "wall_s": round(wall, 1)}
    cap = json.loads((out / "results.json").read_text())["capacity"]
    low, high = cap["bracket"]
    return {
        "answer": cap["max_concurrency"],
        "bracket": f"[{low}, {high if high is not None else '-'}]",
        "resolution": cap["resolution"],
        "probes": len(cap["probes"]),
        "ramp_steps": sum(1 for p in cap["probes"] if p.get("ramp")),
        "wall_s": round(wall, 1),
        "search_s": round(cap.get("elapsed_s") or wall, 1),
        "levels": [p["concurrency"] for p in cap["probes"]],
        "line": cap["answer"],
    }


def table(rows: dict[str, dict[str, Any]]) -> list[str]:
    widths = [8, 7, 12, 11, 7, 11, 8, 9]
    lines = [" ".join(f"{c:>{w}}" for c, w in zip(COLUMNS, widths, strict=True))]
    for name, r in rows.items():
        if "error" in r:
            lines.append(f"{name:>8} error: {r['error']}")
            continue
        cells = {"search": name, **r}
        lines.append(
            " ".join(
                f"{'-' if cells.get(c) is None else cells[c]!s:>{w}}"
                for c, w in zip(COLUMNS, widths, strict=True)
            )
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", choices=("simulator", "llamacpp"), default="simulator")
    ap.add_argument("--full-window-s", type=float, default=60.0)
    ap.add_argument("--no-full", action="store_true", help="run the fast search only")
    ap.add_argument(
        "--full-search",
        choices=("probes", "ramp"),
        default="probes",
        help="the reference's way: a point per probe from cold (the default), or the same "
        "one run as the fast search with every full probe's window at least --full-window-s",
    )
    a = ap.parse_args()
    os.chdir(ROOT)
    tmp = Path(tempfile.mkdtemp(prefix="agentload-capacity-"))
    trace = make_trace(tmp, a.target)
    server: Simulator | LlamaCpp = Simulator() if a.target == "simulator" else LlamaCpp()
    rows: dict[str, dict[str, Any]] = {}
    print(f"target: {a.target}; trace: {trace.name}; slo: {server.slo}", flush=True)
    rows["fast"] = search(server, trace, tmp / "fast", [])
    print(f"fast: {rows['fast']}", flush=True)
    if not a.no_full:
        full = ["--capacity-search", a.full_search]
        full += ["--capacity-min-window", f"{a.full_window_s:g}"]
        rows["full"] = search(server, trace, tmp / "full", full)
        print(f"full: {rows['full']}", flush=True)
    for line in table(rows):
        print(line)
    fast, ref = rows.get("fast", {}), rows.get("full", {})
    same = None
    if "answer" in fast and "answer" in ref and None not in (fast["answer"], ref["answer"]):
        same = abs(fast["answer"] - ref["answer"]) <= max(fast["resolution"], ref["resolution"])
    elif "answer" in fast and "answer" in ref:
        same = fast["answer"] == ref["answer"]
    goal_min = 5.0 if a.target == "simulator" else 10.0
    minutes = fast.get("wall_s", 0) / 60 if "wall_s" in fast else None
    print(
        json.dumps(
            {
                "benchmark": "capacity_search",
                "target": a.target,
                "slo": server.slo,
                "full_window_s": None if a.no_full else a.full_window_s,
                "full_search": None if a.no_full else a.full_search,
                "columns": list(COLUMNS),
                "rows": [{"search": k, **v} for k, v in rows.items()],
                "fast_minutes": None if minutes is None else round(minutes, 2),
                "goal_minutes": goal_min,
                "within_goal": None if minutes is None else minutes <= goal_min,
                "same_answer_within_resolution": same,
                "speedup_vs_full": round(ref["wall_s"] / fast["wall_s"], 1)
                if "wall_s" in ref and fast.get("wall_s")
                else None,
            }
        )
    )


if __name__ == "__main__":
    main()
