"""How fast does ``agentload trace import claude-code`` read a user's whole ``~/.claude/projects``,
and does its memory stay flat as the number of sessions grows?

Writes N Claude Code sessions (default 10,000) in the layout and line format Claude Code writes
(the pre-2.1.3xx form: ``user`` / ``assistant`` entries chained by ``parentUuid``, one entry per
content block, ``tool_use`` / ``tool_result``, ``usage``, ISO timestamps; each session a main
file and two sub-agents under ``<session>/subagents/agent-<id>.jsonl`` with their
``meta.json``), spread over 20 projects. Each session: the main agent delegates to two
sub-agents at once (3 calls each), then reads and runs files for 7 more calls, each tool
result ~2 KB of its own text: 15 model calls, ~40 KB of log. Then it runs ``agentload trace
import claude-code`` on the whole directory in a subprocess, the way a user does, twice: on the
first tenth of the sessions and on all of them, so the two peak RSS figures show whether memory
grows with the number of sessions.

Figures (last line, one JSON object):

* ``sessions``, ``source_mb``, ``trace_mb``, ``calls``: what was imported.
* ``import_s``, ``sessions_per_s``, ``calls_per_s``: the import command's wall time
  (interpreter start included) and rates.
* ``peak_rss_mb``, ``peak_rss_mb_tenth``: the import's RSS high-water mark (``VmHWM``) for all
  sessions and for a tenth of them: bounded memory means they are close.
* ``parse_sessions_per_s``, ``import_vs_parse``: the peer in the same run, a bare loop that
  reads and parses every line of the same files with orjson (nothing checked or written), and
  the import's rate as a share of it.

Usage: ``python benchmarks/import_agent_logs.py [--sessions N] [--out DIR]``.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

MB = 1 << 20
WORDS = (  # noqa: SIM905
    "def return self import from class if else for while in not and or None True False try "
    "except raise with as yield lambda pass break continue print len range list dict str int "
    "value result data path name items key index count total error config options args"
).split()
_PEAK = (
    "def peak_kb():\n"
    "    for line in open('/proc/self/status'):\n"
    "        if line.startswith('VmHWM:'):\n"
    "            return int(line.split()[1])\n"
    "    return 0\n"
    "import sys\n"
    "from agentload.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "finally:\n"
    "    print(f'peak_rss_kb={peak_kb()}', file=sys.stderr)\n"
)


class _Log:
    """One file's entries: a ``parentUuid`` chain with timestamps."""

    def __init__(self, session: str, t: datetime, agent: str | None) -> None:
        self.session, self.t, self.agent = session, t, agent
        self.parent: str | None = None
        self.lines: list[bytes] = []
        self.n = 0

    def _entry(self, kind: str, message: dict[str, Any], dt_ms: int) -> str:
        self.t += timedelta(milliseconds=dt_ms)
        u = str(uuid.uuid4())
        e: dict[str, Any] = {
            "parentUuid": self.parent,
            "isSidechain": self.agent is not None,
            "type": kind,
            "message": message,
            "uuid": u,
            "timestamp": self.t.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "sessionId": self.session,
            "version": "2.1.197",
            "cwd": "/home/user/project",
        }
        if self.agent is not None:
            e["agentId"] = self.agent
        self.lines.append(orjson.dumps(e) + b"\n")
        self.parent = u
        return u

    def user(self, content: Any, dt_ms: int = 5) -> None:
        self._entry("user", {"role": "user", "content": content}, dt_ms)

    def answer(self, blocks: list[dict[str, Any]], ctx: int, out: int) -> None:
        self.n += 1
        mid = f"msg_{uuid.uuid4().hex[:24]}"
        usage = {
            "input_tokens": 3,
            "cache_creation_input_tokens": 200,
            "cache_read_input_tokens": ctx,
            "output_tokens": out,
        }
        for i, b in enumerate(blocks):
            msg = {"id": mid, "type": "message", "role": "assistant", "model": "claude-sonnet-4-6",
                   "content": [b], "stop_reason": "tool_use" if b["type"] == "tool_use" else "end_turn",
                   "stop_sequence": None, "usage": usage}  # fmt: skip
            self._entry("assistant", msg, 1500 if i == 0 else 40)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(WORDS, k=words))


def _tool(rng: random.Random, name: str, tid: str) -> dict[str, Any]:
    args = {"file_path": f"/home/user/project/{_text(rng, 1)}.py"} if name == "Read" else {
        "command": f"python -m pytest -q {_text(rng, 2)}"}  # fmt: skip
    return {"type": "tool_use", "id": tid, "name": name, "input": args}


def write_session(root: Path, i: int, rng: random.Random, t0: datetime) -> int:
    """One session (main file, two sub-agents); returns its bytes."""
    project = root / f"-home-user-project{i % 20}"
    sid = str(uuid.UUID(int=rng.getrandbits(128)))
    main = _Log(sid, t0 + timedelta(minutes=i), None)
    main.user(f"Fix the failing test in module {i}: {_text(rng, 30)}")
    spawn = [f"toolu_{i}_a", f"toolu_{i}_b"]
    tasks = [f"Search the code for {_text(rng, 12)} (session {i}, helper {k})" for k in (0, 1)]
    main.answer([{"type": "text", "text": "Two helpers will search."}]
                + [{"type": "tool_use", "id": spawn[k], "name": "Agent",
                    "input": {"description": "search", "prompt": tasks[k], "subagent_type": "Explore"}}
                   for k in (0, 1)], 12000, 120)  # fmt: skip
    size = sum(len(x) for x in main.lines)
    sub_dir = project / sid / "subagents"
    sub_dir.mkdir(parents=True, exist_ok=True)
    for k in (0, 1):
        aid = f"a{uuid.UUID(int=rng.getrandbits(128)).hex[:16]}"
        sub = _Log(sid, main.t, aid)
        sub.user(tasks[k], dt_ms=30)
        for j in range(2):
            tid = f"toolu_{i}_{k}_{j}"
            sub.answer([_tool(rng, "Read", tid)], 8000 + 600 * j, 60)
            sub.user([{"tool_use_id": tid, "type": "tool_result", "content": _text(rng, 350)}], 80)
        sub.answer([{"type": "text", "text": f"Found it: {_text(rng, 40)}"}], 9500, 90)
        main.t = max(main.t, sub.t)
        (sub_dir / f"agent-{aid}.jsonl").write_bytes(b"".join(sub.lines))
        meta = {"agentType": "Explore", "description": "search", "toolUseId": spawn[k]}
        (sub_dir / f"agent-{aid}.meta.json").write_text(json.dumps(meta))
        size += sum(len(x) for x in sub.lines)
        main.user([{"tool_use_id": spawn[k], "type": "tool_result",
                    "content": [{"type": "text", "text": f"Found it: {_text(rng, 40)}"}]}], 10)  # fmt: skip
    for j in range(7):
        tid = f"toolu_{i}_m{j}"
        main.answer([_tool(rng, "Read" if j % 2 else "Bash", tid)], 13000 + 700 * j, 80)
        main.user([{"tool_use_id": tid, "type": "tool_result", "content": _text(rng, 350)}], 900)
    main.answer([{"type": "text", "text": f"Fixed: {_text(rng, 50)}"}], 18000, 200)
    (project / f"{sid}.jsonl").write_bytes(b"".join(main.lines))
    return size + sum(len(x) for x in main.lines)


def timed(argv: list[str]) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(wall s, peak RSS MB, process) of one agentload command in its own interpreter."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _PEAK, *argv], capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - t0
    lines = proc.stderr.strip().splitlines()
    rss = 0.0
    if lines and lines[-1].startswith("peak_rss_kb="):
        rss = int(lines.pop().split("=")[1]) / 1024
        proc.stderr = "\n".join(lines)
    return wall, rss, proc


def _import(srcs: list[Path], out: Path) -> tuple[float, float, str]:
    argv = ["trace", "import", "claude-code", *map(str, srcs), "-o", str(out), "--force"]
    wall, rss, proc = timed(argv)
    if proc.returncode != 0:
        sys.exit(f"import failed: {proc.stderr.strip()[-800:]}")
    return wall, rss, proc.stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=10_000, help="sessions to write and import")
    ap.add_argument("--out", type=Path, default=None, help="keep the files in this directory")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentload-logs-bench-") as tmp:
        d = args.out or Path(tmp)
        rng = random.Random(0)
        t0 = datetime(2026, 11, 1, tzinfo=UTC)
        tenth = max(1, args.sessions // 10)
        small, rest = d / "tenth" / "projects", d / "rest" / "projects"
        start = time.perf_counter()
        size = 0
        for i in range(args.sessions):
            size += write_session(small if i < tenth else rest, i, rng, t0)
        print(f"wrote {args.sessions:,} sessions ({size / MB:.0f} MB) in "
              f"{time.perf_counter() - start:.0f}s")  # fmt: skip
        _, rss_tenth, line = _import([small], d / "tenth.agentload.jsonl.zst")
        print(f"tenth: {line} (peak RSS {rss_tenth:.0f} MB)")
        trace = d / "all.agentload.jsonl.zst"
        wall, rss, line = _import([small, rest], trace)
        print(f"all: {line}: {wall:.1f}s, peak RSS {rss:.0f} MB")
        calls = int(line.split(" sessions, ")[1].split(" calls")[0].replace(",", ""))
        start = time.perf_counter()
        for top in (small, rest):
            for f in top.rglob("*.jsonl"):
                with f.open("rb") as fh:
                    for raw in fh:
                        orjson.loads(raw)
        parse_s = time.perf_counter() - start
        print(f"peer: parse only: {args.sessions / parse_s:,.0f} sessions/s")
        results = {
            "sessions": args.sessions,
            "source_mb": round(size / MB, 1),
            "trace_mb": round(trace.stat().st_size / MB, 1),
            "calls": calls,
            "import_s": round(wall, 1),
            "sessions_per_s": round(args.sessions / wall, 1),
            "calls_per_s": round(calls / wall),
            "peak_rss_mb": round(rss),
            "peak_rss_mb_tenth": round(rss_tenth),
            "parse_sessions_per_s": round(args.sessions / parse_s),
            "import_vs_parse": round((args.sessions / wall) / (args.sessions / parse_s), 4),
        }
        print(json.dumps(results))


if __name__ == "__main__":
    main()
