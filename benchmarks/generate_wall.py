"""Wall time of `agentload generate` on the built-in simulator with Docker sandboxes.

Runs one `coding-session` session, then 8 sessions with `--parallel 8`, each as a fresh
`agentload generate` process (what a user runs), and prints a line per run and, last, one JSON
object: {"one_session_s": ..., "eight_parallel_s": ..., "ratio": ...}. Goals: one session
<= 60 s, ratio <= 2 (eight parallel sessions cost at most twice one).

Then one session per agent (``--agents``: agentload's own ``langgraph`` and the real products
``claude-code``, ``codex``, ``mini-swe-agent``, ``aider`` in their sandboxes through the recording proxy,
``generate --agent NAME -s quick``): a line each and ``"agents": {NAME: {"wall_s", "cpu_s",
"calls", "end"}}`` in the JSON, ``cpu_s`` being the whole machine's busy CPU-seconds during it
(the agent, the proxy, the simulator, dockerd). The built-in agents are the peer.

The JSON also carries what bounds the ratio on this machine, measured in the same run (Linux,
from /proc/stat): ``cpus``, ``cpu_s_per_session`` (busy CPU-seconds of the whole machine —
agentload, the simulator, dockerd and the tools in the containers — during the one-session
run) and ``ratio_floor`` = 8 × cpu_s_per_session / cpus / one_session_s, the ratio no
scheduler could beat with that many cores. A ratio near its floor means the machine is out
of cores, not that sessions wait on each other.

    .venv/bin/python benchmarks/generate_wall.py [--scenario coding-session] [--sandbox docker]
        [--agents langgraph,claude-code,codex,mini-swe-agent,aider] [--agent-scenario quick]
        [--only-agents]   # the per-agent rows alone
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time


def busy_cpu_s() -> float | None:
    """CPU-seconds the whole machine spent busy since boot (None where /proc/stat is absent)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    guest = sum(fields[8:10])  # guest time is already counted in user
    return (sum(fields) - idle - guest) / os.sysconf("SC_CLK_TCK")


def run(
    scenario: str, sandbox: str, sessions: int, out: str, agent: str = "langgraph"
) -> tuple[float, dict[str, object]]:
    argv = [
        sys.executable, "-m", "agentload", "generate", "--scenario", scenario,
        "--sandbox", sandbox, "--sessions", str(sessions), "--parallel", str(sessions),
        "--out", out, "--json", "--agent", agent,
    ]  # fmt: skip
    t0 = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-4000:])
        raise SystemExit(f"agentload generate failed with exit code {proc.returncode}")
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", default="coding-session")
    ap.add_argument("--sandbox", default="docker", choices=["auto", "docker", "local"])
    ap.add_argument("--agents", default="langgraph,claude-code,codex,mini-swe-agent,aider")
    ap.add_argument("--agent-scenario", default="quick")
    ap.add_argument("--only-agents", action="store_true", help="only the per-agent rows")
    args = ap.parse_args()
    if args.only_agents:
        print(json.dumps({"agents": agent_rows(args)}))
        return
    results: dict[str, float | int | None] = {}
    cpu_one: float | None = None
    with tempfile.TemporaryDirectory(prefix="agentload-bench-") as out:
        for label, n in (("one_session_s", 1), ("eight_parallel_s", 8)):
            cpu0 = busy_cpu_s()
            wall, payload = run(args.scenario, args.sandbox, n, out)
            cpu1 = busy_cpu_s()
            cpu = None if cpu0 is None or cpu1 is None else cpu1 - cpu0
            if n == 1:
                cpu_one = cpu
            sessions = payload["sessions"]
            assert isinstance(sessions, list)
            calls = sum(int(s["calls"]) for s in sessions)
            reasons = sorted({str(s["end_reason"]) for s in sessions})
            last = [s["orchestrator_prompt_last"] for s in sessions]
            print(
                f"{label}: {wall:.1f}s wall for {n} session(s): {calls} LLM calls, "
                f"end {reasons}, orchestrator last prompt {last}"
                + ("" if cpu is None else f", machine busy {cpu:.1f} CPU-s")
            )
            results[label] = round(wall, 2)
    one, eight = float(results["one_session_s"] or 0), float(results["eight_parallel_s"] or 0)
    results["ratio"] = round(eight / one, 2)
    cpus = os.cpu_count() or 1
    results["cpus"] = cpus
    results["cpu_s_per_session"] = None if cpu_one is None else round(cpu_one, 1)
    results["ratio_floor"] = (
        None if cpu_one is None else round(max(1.0, 8 * cpu_one / cpus / one), 2)
    )
    print(json.dumps({**results, "agents": agent_rows(args)}))


def agent_rows(args: argparse.Namespace) -> dict[str, dict[str, object]]:
    """One session of each agent of ``--agents``: its wall time, the machine's CPU-seconds,
    its calls and end reason."""
    rows: dict[str, dict[str, object]] = {}
    with tempfile.TemporaryDirectory(prefix="agentload-bench-") as out:
        for agent in filter(None, args.agents.split(",")):
            cpu0 = busy_cpu_s()
            wall, payload = run(args.agent_scenario, args.sandbox, 1, out, agent)
            cpu1 = busy_cpu_s()
            cpu = None if cpu0 is None or cpu1 is None else round(cpu1 - cpu0, 1)
            sessions = payload["sessions"]
            assert isinstance(sessions, list)
            row = {"wall_s": round(wall, 2), "cpu_s": cpu, "calls": int(sessions[0]["calls"]),
                   "end": str(sessions[0]["end_reason"])}  # fmt: skip
            print(f"agent {agent}: {wall:.1f}s wall, {cpu} CPU-s, {row['calls']} LLM calls, "
                  f"end {row['end']}")  # fmt: skip
            rows[agent] = row
    return rows


if __name__ == "__main__":
    main()
