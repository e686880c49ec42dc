"""How real the shipped scenarios look, and how long a default session takes to generate.

Generates `coding-session` (the default) and its peer `typical-session` on the built-in
simulator, three sessions each, two at a time (`-n 3 -p 2`, seeds 0-2: the median session of
the modeled waits and the quartiles beside it), as fresh `agentload generate` processes; prints
each session's generation time (the goal: a default session in <= 60 s) and the table of
`agentload realism TRACE --against CORPUS` for each, then, last, one JSON object:

    {"benchmark": "realism", "corpus": ..., "scenarios": {NAME: {"sessions_s": [...],
     "wall_s": ..., "calls": [...], "in_band": N, "judged": M, "by_design": [...],
     "out": [...]}}}

CORPUS defaults to the training corpus shipped for the tests (`tests/realism/data`, unpacked
to a temporary folder); `--corpus DIR` takes any path `agentload realism --against` reads.
`--docs` also writes the two tables into docs/realism.md and README.md, between the markers
`<!-- realism:NAME -->` and `<!-- /realism:NAME -->` (what those files hold was written so).

    .venv/bin/python benchmarks/realism.py [--corpus DIR] [--sandbox auto|docker|local] [--docs]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "tests" / "realism" / "data" / "kvct-train.tar.zst"
SCENARIOS = ("coding-session", "typical-session")
ENDED = re.compile(r"^(s\d+-\d+): ended \((\w+)\) after ([\d.]+)s: (\d+) calls", re.M)


def agentload(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentload", *args], capture_output=True, text=True, check=False
    )


def unpack(tmp: Path) -> Path:
    import zstandard

    with (
        SHIPPED.open("rb") as raw,
        zstandard.ZstdDecompressor().stream_reader(raw) as stream,
        tarfile.open(fileobj=stream, mode="r|") as tar,
    ):
        tar.extractall(tmp, filter="data")
    return tmp / "kvct-train"


def generate(scenario: str, sandbox: str, out: Path) -> tuple[float, list[dict[str, Any]], Path]:
    t0 = time.perf_counter()
    r = agentload("generate", "-s", scenario, "-n", "3", "-p", "2", "--sandbox", sandbox,
                  "-o", str(out))  # fmt: skip
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"realism: generate -s {scenario} failed: {r.stderr.strip()[-500:]}")
    sessions = [
        {"session": m[0], "end": m[1], "seconds": float(m[2]), "calls": int(m[3])}
        for m in ENDED.findall(r.stdout + r.stderr)
    ]
    (trace,) = out.glob("*.agentload.jsonl.zst")
    return wall, sorted(sessions, key=lambda s: str(s["session"])), trace


def realism(trace: Path, corpus: Path) -> tuple[str, str, dict[str, Any]]:
    table = agentload("realism", str(trace), "--against", str(corpus))
    md = agentload("realism", str(trace), "--against", str(corpus), "--markdown")
    js = agentload("realism", str(trace), "--against", str(corpus), "--json")
    for r in (table, md, js):
        if r.returncode != 0:
            sys.exit(f"realism: agentload realism failed: {r.stderr.strip()[-500:]}")
    return table.stdout, md.stdout, json.loads(js.stdout.splitlines()[-1])


def write_docs(tables: dict[str, str], line: dict[str, str]) -> None:
    for doc in (ROOT / "docs" / "realism.md", ROOT / "README.md"):
        text = doc.read_text()
        for name, md in tables.items():
            begin, end = f"<!-- realism:{name} -->", f"<!-- /realism:{name} -->"
            if begin not in text:
                continue
            head, _, rest = text.partition(begin)
            _, _, tail = rest.partition(end)
            text = f"{head}{begin}\n{line[name]}\n\n{md}{end}{tail}"
        doc.write_text(text)
        print(f"wrote the tables into {doc.relative_to(ROOT)}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=None)
    ap.add_argument("--sandbox", default="auto")
    ap.add_argument("--docs", action="store_true")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="agentload-realism-bench-") as tmp:
        corpus = args.corpus or unpack(Path(tmp))
        result: dict[str, Any] = {"benchmark": "realism", "corpus": str(args.corpus or SHIPPED)}
        tables: dict[str, str] = {}
        lines: dict[str, str] = {}
        for scenario in SCENARIOS:
            wall, sessions, trace = generate(scenario, args.sandbox, Path(tmp) / scenario)
            for s in sessions:
                print(f"{scenario} {s['session']}: {s['seconds']:.1f} s to generate, "
                      f"{s['calls']} calls ({s['end']})")  # fmt: skip
            print(f"{scenario}: 3 sessions, 2 at a time, in {wall:.1f} s")
            table, md, doc = realism(trace, corpus)
            print(table)
            rows = doc["rows"]
            result.setdefault("scenarios", {})[scenario] = {
                "sessions_s": [s["seconds"] for s in sessions],
                "calls": [s["calls"] for s in sessions],
                "wall_s": round(wall, 1),
                "in_band": doc["in_band"],
                "judged": doc["judged"],
                "by_design": [r["key"] for r in rows if r["verdict"] == "by_design"],
                "out": [r["key"] for r in rows if r["verdict"] == "out"],
            }
            tables[scenario] = md
            took = ", ".join(f"{s['seconds']:.0f}" for s in sessions)
            design = result["scenarios"][scenario]["by_design"]
            lines[scenario] = (
                f"`{scenario}`, three sessions (seeds 0-2) on the built-in simulator; "
                "`agentload realism TRACE --against kvct-train` (71 real Claude Code sessions, "
                f"tests/realism/data): {doc['in_band']} of {doc['judged']} statistics in band"
                + (f", {len(design)} by design" if design else "")
                + f"; sessions generated in {took} s."
            )
        if args.docs:
            write_docs(tables, lines)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
