"""Latency of the sandboxes and tools: what a tool call costs an agent session.

    .venv/bin/python benchmarks/sandbox_tools.py [--repeat 10] [--kinds docker,local]

For each sandbox kind (Docker skipped when no daemon answers): the time to materialise the
default workspace (stdlib:email + fault) and open the sandbox, the median and p90 of a trivial
exec (`true`), and through the Toolbox the median of search_code (a regex over the ~1.3 MB
workspace), read_file, and run_tests (the full test_email suite, 1,667 tests). The last line is
one JSON object: {"<kind>": {"open_s", "exec_ms_p50", "exec_ms_p90", "search_ms_p50",
"read_ms_p50", "run_tests_s_p50"}, ...}.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentload.errors import DockerUnavailableError
from agentload.sandboxes import open_sandbox
from agentload.sandboxes.docker_host import connect_docker
from agentload.scenarios import load_scenario
from agentload.scenarios.workspace import materialise
from agentload.tools import Toolbox


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


async def _measure(kind: str, repeat: int) -> dict[str, float]:
    scenario = load_scenario("coding-session")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        ws = materialise(scenario.workspace.recipe, Path(tmp) / "ws", scenario.workspace.fault)
        sandbox = open_sandbox(kind, ws.root, scenario.sandbox, f"bench-{kind}")
        open_s = time.perf_counter() - t0
        try:
            box = Toolbox(sandbox, ws.root, scenario)
            execs = []
            for _ in range(repeat * 3):
                r = sandbox.exec(["true"], timeout_s=10)
                execs.append((r.end_ns - r.start_ns) / 1e6)
            timings: dict[str, list[float]] = {"search": [], "read": [], "tests": []}
            calls: list[tuple[str, str, dict[str, Any]]] = [
                ("search", "search_code", {"pattern": r"def \w+_encode"}),
                ("read", "read_file", {"path": "email/_header_value_parser.py"}),
            ]
            for _ in range(repeat):
                for key, name, args in calls:
                    res = await box.call(name, args)
                    assert res.error is None, res.error
                    timings[key].append(res.duration_ns / 1e6)
            for _ in range(max(2, repeat // 3)):
                res = await box.call("run_tests", {})
                timings["tests"].append(res.duration_ns / 1e9)
        finally:
            sandbox.close()
    return {
        "open_s": round(open_s, 3),
        "exec_ms_p50": round(statistics.median(execs), 1),
        "exec_ms_p90": round(_p(execs, 0.9), 1),
        "search_ms_p50": round(statistics.median(timings["search"]), 1),
        "read_ms_p50": round(statistics.median(timings["read"]), 2),
        "run_tests_s_p50": round(statistics.median(timings["tests"]), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--kinds", default="docker,local")
    args = ap.parse_args()
    out: dict[str, Any] = {}
    for kind in args.kinds.split(","):
        if kind == "docker":
            try:
                connect_docker().close()
            except DockerUnavailableError as exc:
                print(f"docker: skipped ({exc})")
                continue
        out[kind] = asyncio.run(_measure(kind, args.repeat))
        print(f"{kind}: " + ", ".join(f"{k}={v}" for k, v in out[kind].items()))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
