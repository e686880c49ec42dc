"""Wall time of `agentload generate` on the built-in simulator with Docker sandboxes.

Runs one `coding-session` session, then 8 sessions with `--parallel 8`, each as a fresh
`agentload generate` process (what a user runs), and prints a line per run and, last, one JSON
object: {"one_session_s": ..., "eight_parallel_s": ..., "ratio": ...}. Goals: one session
<= 60 s, ratio <= 2 (eight parallel sessions cost at most twice one).

    .venv/bin/python benchmarks/generate_wall.py [--scenario coding-session] [--sandbox docker]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time


def run(scenario: str, sandbox: str, sessions: int, out: str) -> tuple[float, dict[str, object]]:
    argv = [
        sys.executable, "-m", "agentload", "generate", "--scenario", scenario,
        "--sandbox", sandbox, "--sessions", str(sessions), "--parallel", str(sessions),
        "--out", out, "--json",
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
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="agentload-bench-") as out:
        for label, n in (("one_session_s", 1), ("eight_parallel_s", 8)):
            wall, payload = run(args.scenario, args.sandbox, n, out)
            sessions = payload["sessions"]
            assert isinstance(sessions, list)
            calls = sum(int(s["calls"]) for s in sessions)
            reasons = sorted({str(s["end_reason"]) for s in sessions})
            last = [s["orchestrator_prompt_last"] for s in sessions]
            print(
                f"{label}: {wall:.1f}s wall for {n} session(s): {calls} LLM calls, "
                f"end {reasons}, orchestrator last prompt {last}"
            )
            results[label] = round(wall, 2)
    results["ratio"] = round(results["eight_parallel_s"] / results["one_session_s"], 2)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
