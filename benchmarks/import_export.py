"""How fast does ``agentload trace import`` stream a big source, and in how much memory?

Writes an N-line Mooncake file (default 1,000,000 lines: ``timestamp`` ms, ``input_length``,
``output_length``, ``hash_ids`` of 512-token blocks drawn from a shared pool, as the public
traces are) in a temp dir, then runs ``agentload trace import mooncake`` on it in a
subprocess, the way a user does. Then, for each ``--export FORMAT``, ``agentload trace export
FORMAT`` of the imported trace, the same way.

Figures (last line, one JSON object):

* ``lines``, ``source_mb``, ``trace_mb``: the source and the trace written.
* ``import_s``, ``import_records_per_s``: wall seconds of the import command (interpreter start
  included) and source lines per second.
* ``import_peak_rss_mb``: the import process's RSS high-water mark (the child's own ``VmHWM``):
  streaming means it does not grow with the file (the file is never held, let alone twice).
* ``parse_records_per_s``, ``import_vs_parse``: the peer in the same run, a bare loop that only
  reads and parses the same file with orjson (no checks, nothing written), and the import's
  rate as a share of it.
* ``exports``: ``{FORMAT: {s, records_per_s, peak_rss_mb, out_mb}}`` for each ``--export``
  format (default: all three), each the CLI exporting a real generated trace (``generate -s
  quick -n 4`` on the simulator, local sandbox; or ``--export-trace PATH``): ``s`` is the CLI's
  wall time (interpreter start included, as a user waits it), ``records_per_s`` calls per second
  of the export alone, run again in this process (reading the trace included).

Usage: ``python benchmarks/import_export.py [--lines N] [--out DIR] [--export weka ...]
[--export-trace PATH]``.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

MB = 1 << 20


def write_mooncake(path: Path, lines: int, seed: int = 0) -> None:
    """``lines`` requests, ~1 ms apart; each prompt a run of blocks from a pool of shared
    prefixes plus blocks of its own, as agentic traffic reuses context."""
    rng = random.Random(seed)
    prefixes = [[rng.randrange(1 << 30) for _ in range(rng.randint(1, 40))] for _ in range(2000)]
    next_id = 1 << 31
    ts = 0
    with path.open("wb") as f:
        buf = []
        for i in range(lines):
            ts += rng.randint(0, 3)
            shared = rng.choice(prefixes)
            own = rng.randint(0, 8)
            ids = shared + list(range(next_id, next_id + own))
            next_id += own
            n_in = len(ids) * 512 - rng.randint(0, 511)
            rec = {"timestamp": ts, "input_length": n_in, "output_length": rng.randint(1, 1000)}
            rec["hash_ids"] = ids
            buf.append(orjson.dumps(rec) + b"\n")
            if len(buf) == 10_000 or i == lines - 1:
                f.write(b"".join(buf))
                buf.clear()


# VmHWM, the high-water mark of this process's own memory: ru_maxrss would also count the
# parent's RSS, which Linux carries over a fork + exec.
_PEAK = (
    "def peak_kb():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1])\n"
    "    return 0\n"
)
_CHILD = _PEAK + (
    "import sys\n"
    "from agentload.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "finally:\n"
    "    rss = peak_kb()\n"
    "    print(f'peak_rss_kb={rss}', file=sys.stderr)\n"
)


def timed(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, peak RSS MB, process) of one agentload command run in its own interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, *argv], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    rss = 0.0
    if lines and lines[-1].startswith("peak_rss_kb="):
        rss = int(lines.pop().split("=")[1]) / 1024
        proc.stderr = "\n".join(lines)
    return wall, rss, proc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="Mooncake lines to import")
    ap.add_argument("--out", type=Path, default=None, help="keep the files in this directory")
    ap.add_argument(
        "--export",
        action="append",
        default=[],
        choices=["weka", "mooncake", "otel"],
        help="time this export (repeatable; default: all three)",
    )
    ap.add_argument(
        "--export-trace",
        type=Path,
        default=None,
        help="trace the exports read (default: a new one)",
    )
    args = ap.parse_args()
    args.export = args.export or ["weka", "mooncake", "otel"]
    with tempfile.TemporaryDirectory(prefix="agentload-import-bench-") as tmp:
        d = args.out or Path(tmp)
        d.mkdir(parents=True, exist_ok=True)
        src = d / "mooncake.jsonl"
        t0 = time.perf_counter()
        write_mooncake(src, args.lines)
        print(f"wrote {args.lines:,} Mooncake lines ({src.stat().st_size / MB:.1f} MB) in "
              f"{time.perf_counter() - t0:.1f}s")  # fmt: skip
        trace = d / "mooncake.agentload.jsonl.zst"
        wall, rss, proc = timed(
            ["trace", "import", "mooncake", str(src), "-o", str(trace), "--force"]
        )
        if proc.returncode != 0:
            sys.exit(f"import failed: {proc.stderr.strip()}")
        print(proc.stdout.strip())
        rate = args.lines / wall
        print(f"import: {wall:.1f}s, {rate:,.0f} records/s, peak RSS {rss:.0f} MB")
        t0 = time.perf_counter()
        n = 0
        with src.open("rb") as f:
            for line in f:
                orjson.loads(line)
                n += 1
        parse_rate = n / (time.perf_counter() - t0)
        print(f"peer: parse only: {parse_rate:,.0f} records/s")
        results: dict[str, Any] = {
            "lines": args.lines,
            "source_mb": round(src.stat().st_size / MB, 1),
            "trace_mb": round(trace.stat().st_size / MB, 1),
            "import_s": round(wall, 2),
            "import_records_per_s": round(rate),
            "import_peak_rss_mb": round(rss),
            "parse_records_per_s": round(parse_rate),
            "import_vs_parse": round(rate / parse_rate, 3),
            "exports": {},
        }
        small = args.export_trace
        if small is None:
            gen = d / "generated"
            _, _, proc = timed(
                [
                    "generate",
                    "-s",
                    "quick",
                    "-n",
                    "4",
                    "-p",
                    "4",
                    "--sandbox",
                    "local",
                    "-o",
                    str(gen),
                ]
            )
            if proc.returncode != 0:
                sys.exit(f"generate failed: {proc.stderr.strip()[-500:]}")
            (small,) = gen.glob("*.agentload.jsonl.zst")
        from agentload.trace.trace import load_trace

        n_export = len(load_trace(small).calls)
        results["export_calls"] = n_export
        from agentload.interop.exports import export_trace

        for fmt in args.export:
            target = d / ("weka-out" if fmt == "weka" else f"export.{fmt}")
            if fmt == "weka":  # a weka export wants a new or empty directory
                shutil.rmtree(target, ignore_errors=True)
            argv = ["trace", "export", fmt, str(small), "-o", str(target), "--force"]
            wall, rss, proc = timed(argv)
            if proc.returncode != 0:
                err = (proc.stderr.strip().splitlines() or ["failed"])[-1]
                results["exports"][fmt] = {"error": err}
                print(f"export {fmt}: failed: {err}")
                continue
            size = (
                sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
                if target.is_dir()
                else target.stat().st_size
            )
            # the export alone, in this process (no interpreter start, trace read included)
            again = d / ("weka-again" if fmt == "weka" else f"again.{fmt}")
            t0 = time.perf_counter()
            export_trace(fmt, [small], again)
            inproc = time.perf_counter() - t0
            results["exports"][fmt] = {
                "s": round(wall, 2),
                "in_process_s": round(inproc, 3),
                "records_per_s": round(n_export / inproc),
                "peak_rss_mb": round(rss),
                "out_mb": round(size / MB, 1),
            }
            print(
                f"export {fmt}: {wall:.1f}s by the CLI, {inproc:.2f}s in process: "
                f"{n_export / inproc:,.0f} calls/s, peak {rss:.0f} MB"
            )
    print(json.dumps(results))


if __name__ == "__main__":
    main()
