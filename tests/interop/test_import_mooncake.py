"""``agentload trace import mooncake``: JSONL requests (``timestamp`` ms, ``input_length``,
``output_length``, ``hash_ids`` of 512-token blocks, global scope) become one session per line
submitted at its timestamp; a 50k-line file streams through the CLI."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_helpers import run, write_jsonl

from agentload.replay.plan import build_plans
from agentload.trace import load_trace
from agentload.trace.stats import compute_stats

MS = 1_000_000
LINES = [
    {"timestamp": 0, "input_length": 1200, "output_length": 40, "hash_ids": [10, 11, 12]},
    {"timestamp": 250, "input_length": 700, "output_length": 5, "hash_ids": [10, 11]},
    {"timestamp": 1000.5, "input_length": 100, "output_length": 9},
]


def test_one_session_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = write_jsonl(tmp_path / "mc.jsonl", LINES)
    out = tmp_path / "m.agentload.jsonl.zst"
    code, stdout, err = run(["trace", "import", "mooncake", str(src), "-o", str(out)], capsys)
    assert code == 0, err
    assert stdout.strip() == (
        f"wrote {out}: 3 sessions, 3 agents, 3 calls from 1 mooncake file (block size 512)"
    )
    trace = load_trace(out)
    h = trace.header
    assert h.redacted and h.block_size == 512 and h.source is not None
    assert (h.source.format, h.source.hash_id_scope, h.source.records) == ("mooncake", "global", 3)
    m = h.clock.mono_ns
    calls = sorted(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    assert [c.timings.submit_ns - m for c in calls] == [0, 250 * MS, 1000 * MS + MS // 2]
    assert [(c.usage.prompt_tokens_ours, c.request.max_tokens) for c in calls] == [
        (1200, 40), (700, 5), (100, 9)]  # fmt: skip
    # global scope: equal ids are equal blocks across sessions
    assert [trace.blocks(c) for c in calls] == [["10", "11", "12"], ["10", "11"], []]
    assert len({c.session_id for c in calls}) == 3 and all(not c.depends_on for c in calls)
    plans = build_plans([trace], salt_at="off")
    assert [len(p.calls) for p in plans] == [1, 1, 1]
    assert all(not c.preds for p in plans for c in p.calls.values())
    assert compute_stats(trace)["llm_calls"] == 3
    code, stdout, _ = run(["trace", "validate", str(out)], capsys)
    assert code == 0
    assert "content: imported from mooncake (mc.jsonl, block size 512), no message text" in stdout


@pytest.mark.parametrize(
    ("line", "expect"),
    [
        ({"timestamp": "soon", "input_length": 10, "output_length": 1}, "timestamp: expected a number"),
        ({"timestamp": 5, "input_length": 10.5, "output_length": 1}, "input_length: expected an integer"),
        ({"timestamp": 5, "input_length": 1000, "output_length": 1, "hash_ids": [1, 2, 3]},
         "hash_ids: 3 block ids do not fit 1000 input tokens at block size 512 (at most 2)"),
        ({"timestamp": 5, "input_length": 10}, "output_length: missing"),
        ({"timestamp": 5, "input_length": -5, "output_length": 1}, "input_length: expected an integer >= 0, got -5"),
        ({"timestamp": 5, "input_length": [10], "output_length": 1}, "input_length: expected an integer, got [10]"),
        ({"timestamp": 5, "input_length": "10 tokens", "output_length": 1}, "input_length: expected an integer"),
    ],
)  # fmt: skip
def test_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: dict[str, Any], expect: str
) -> None:
    src = write_jsonl(tmp_path / "mc.jsonl", [LINES[0], line, LINES[1]])
    out = tmp_path / "bad.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "mooncake", str(src), "-o", str(out)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"mc.jsonl:line 2: {expect}" in err, err
    assert not out.exists()


def test_cut_and_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "mc.jsonl"
    src.write_bytes(write_jsonl(src, LINES).read_bytes()[:-10])
    out = str(tmp_path / "x.agentload.jsonl.zst")
    code, _, err = run(["trace", "import", "mooncake", str(src), "-o", out], capsys)
    assert code == 2 and "mc.jsonl:line 3: invalid JSON (the file ends inside it" in err
    code, _, err = run(
        ["trace", "import", "mooncake", str(tmp_path / "none.jsonl"), "-o", out], capsys
    )
    assert code == 2 and err.strip().endswith("none.jsonl: no such file or directory")
    bad_out = str(src / "x.agentload.jsonl.zst")  # under a file
    code, _, err = run(["trace", "import", "mooncake", str(src), "-o", bad_out], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot write there" in err


def test_50k_lines_stream_through_the_cli(tmp_path: Path) -> None:
    rng = random.Random(7)
    src = tmp_path / "big.jsonl"
    n = 50_000
    with src.open("wb") as f:
        for i in range(n):
            n_in = rng.randint(1, 8000)
            ids = [rng.randint(0, 3000) for _ in range(rng.randint(0, -(-n_in // 512)))]
            f.write(orjson.dumps({"timestamp": i * 3, "input_length": n_in,
                                  "output_length": rng.randint(1, 500), "hash_ids": ids}) + b"\n")  # fmt: skip
    out = tmp_path / "big.agentload.jsonl.zst"
    code = (
        "import sys\n"
        "from agentload.cli import main\n"
        "try:\n"
        f"    main(['trace', 'import', 'mooncake', {str(src)!r}, '-o', {str(out)!r}])\n"
        "except SystemExit as e:\n"
        # VmHWM, this process's own peak: ru_maxrss would count pytest's RSS too, which Linux
        # carries over the fork + exec (a long test run failed on it)
        "    hwm = [ln for ln in open('/proc/self/status') if ln.startswith('VmHWM:')]\n"
        "    print('rss_kb', hwm[0].split()[1], file=sys.stderr)\n"
        "    raise\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert f"{n:,} sessions, {n:,} agents, {n:,} calls" in proc.stdout
    rss_mb = int(proc.stderr.split("rss_kb")[1].split()[0]) / 1024
    # the source (~5 MB) and its trace are never held whole: memory stays near the interpreter's
    assert rss_mb < 250, rss_mb
    trace = load_trace(out)
    assert len(trace.calls) == n and trace.truncated is None
    last = max(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    assert last.timings.submit_ns - trace.header.clock.mono_ns == (n - 1) * 3 * MS


def test_validate_names_a_redacted_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from agentload.trace import TraceWriter, make_header

    path = tmp_path / "r.agentload.jsonl.zst"

    async def write_empty() -> None:
        async with TraceWriter(path, make_header(redacted=True)):
            pass

    asyncio.run(write_empty())
    code, stdout, _ = run(["trace", "validate", str(path)], capsys)
    assert code == 0 and "content: redacted (no message text)" in stdout
    assert "imported from" not in stdout
