"""``agentload trace export mooncake``: one line per call with the Mooncake fields only, sorted
recorded submit times, 512-token block ids in one namespace over the file (shared prefix, shared
ids, across sessions and traces), and bad input through the CLI."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import one_line_exit_2
from typer.testing import CliRunner

from agentload.cli import app
from agentload.trace import load_trace
from agentload.trace.prefix import common_blocks

FIELDS = {"timestamp", "input_length", "output_length", "hash_ids"}


def export(traces: list[Path], out: Path) -> list[dict[str, Any]]:
    args = ["trace", "export", "mooncake", *map(str, traces), "-o", str(out)]
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    for line in lines:
        assert set(line) == FIELDS
        assert all(isinstance(line[k], int) for k in FIELDS - {"hash_ids"})
        assert all(isinstance(h, int) for h in line["hash_ids"])
        assert len(line["hash_ids"]) <= math.ceil(line["input_length"] / 512)
        assert line["output_length"] >= 1
    ts = [line["timestamp"] for line in lines]
    assert ts == sorted(ts)
    return lines


def leading(a: list[int], b: list[int]) -> int:
    return next(
        (k for k, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
    )


def test_one_line_per_call_on_the_recorded_schedule(generated_trace: Path, tmp_path: Path) -> None:
    trace = load_trace(generated_trace)
    lines = export([generated_trace], tmp_path / "m.jsonl")
    calls = sorted(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    assert len(lines) == len(calls) == len(trace.calls)
    t0 = calls[0].timings.submit_ns
    for c, line in zip(calls, lines, strict=True):
        assert line["timestamp"] == (c.timings.submit_ns - t0) // 1_000_000
        assert line["input_length"] == c.usage.prompt_tokens
        assert line["output_length"] == c.usage.completion_tokens
    assert lines[-1]["timestamp"] > 1000  # the trace runs for seconds


def test_shared_prefix_gives_shared_ids_across_the_file(
    generated_trace: Path, tmp_path: Path
) -> None:
    """Over every pair of calls of every session, the ids they share from the start are exactly
    their shared whole 512-token blocks: one namespace for the file."""
    trace = load_trace(generated_trace)
    lines = export([generated_trace], tmp_path / "m.jsonl")
    calls = sorted(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    pairs = list(zip(calls, lines, strict=True))
    cross_session = 0
    for i, (a, la) in enumerate(pairs):
        for b, lb in pairs[i + 1 :]:
            shared = common_blocks(trace.blocks(a), trace.blocks(b)) // 32
            want = min(shared, len(la["hash_ids"]), len(lb["hash_ids"]))
            assert leading(la["hash_ids"], lb["hash_ids"]) == want, (a.id, b.id)
            cross_session += a.session_id != b.session_id and want > 0
    assert cross_session > 0  # the two sessions' orchestrators share their first blocks


def test_two_traces_overlay_and_keep_one_namespace(
    generated_trace: Path, build: Any, tmp_path: Path
) -> None:
    one = export([generated_trace], tmp_path / "one.jsonl")
    copy = tmp_path / "copy.agentload.jsonl.zst"
    copy.write_bytes(generated_trace.read_bytes())
    two = export([generated_trace, copy], tmp_path / "two.jsonl")
    # Two copies of a trace: both start at 0 and, being the same text, get the same ids.
    assert len(two) == 2 * len(one)
    assert sorted(json.dumps(x) for x in two) == sorted(json.dumps(x) for x in one * 2)
    # Imported traces' ids mean something only within their trace: equal strings in two
    # imports are two blocks.
    paths = []
    for i in range(2):
        b = build(block_size=64, imported=True)
        b.session("c")
        b.agent("a", "c", 0, 10)
        b.call("a.0", "a", "c", 0, 5 * i, [f"0:{k}" for k in range(16)], 1024)
        paths.append(b.write(tmp_path / f"imp{i}.agentload.jsonl"))
    lines = export(paths, tmp_path / "imp.jsonl")
    assert [line["timestamp"] for line in lines] == [0, 0]
    assert [line["hash_ids"] for line in lines] == [[0, 1], [2, 3]]


def test_content_free_ids_regroup_by_eight_and_errors_get_one_token(
    build: Any, tmp_path: Path
) -> None:
    b = build(block_size=64, imported=True)
    b.session("c")
    b.agent("a", "c", 0, 100)
    ids = [f"0:{k}" for k in range(20)]
    b.call("a.0", "a", "c", 0, 0, ids[:8], 512)
    b.call("a.1", "a", "c", 1, 10, ids[:17], 1100)  # 2 whole 512-blocks; the rest is fresh
    b.call("a.2", "a", "c", 2, 20, ids[:8] + ["0:99"] * 8, 1024)
    b.call("a.3", "a", "c", 3, 30, ids[:16], 600)  # more ids than ceil(600 / 512): clipped
    b.call("a.4", "a", "c", 4, 40, [], 50, out=None, api_ms=None, error="refused")
    lines = export([b.write(tmp_path / "cf.agentload.jsonl")], tmp_path / "m.jsonl")
    assert [line["hash_ids"] for line in lines] == [[0], [0, 1], [0, 2], [0, 1], []]
    assert lines[-1]["output_length"] == 1 and lines[0]["output_length"] == 10


def test_bad_input_is_one_line_and_exit_2(
    build: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def mooncake(trace: Path, out: Path) -> str:
        return one_line_exit_2(["trace", "export", "mooncake", str(trace), "-o", str(out)], capsys)

    line = mooncake(tmp_path / "missing.agentload.jsonl", tmp_path / "m.jsonl")
    assert "missing.agentload.jsonl" in line and "no such" in line
    good = build().write(tmp_path / "good.agentload.jsonl")
    damaged = tmp_path / "damaged.agentload.jsonl"
    damaged.write_text(good.read_text().splitlines()[0] + "\n{not json\n" + '{"type": "x"}\n')
    assert "damaged.agentload.jsonl:2" in mooncake(damaged, tmp_path / "m.jsonl")
    for size in (48, 1024):
        path = build(block_size=size, imported=True).write(tmp_path / f"b{size}.agentload.jsonl")
        line = mooncake(path, tmp_path / "m.jsonl")
        assert f"b{size}.agentload.jsonl" in line and f"{size}-token" in line and "512" in line
    assert "a directory" in mooncake(good, tmp_path)
    assert not (tmp_path / "m.jsonl").exists()
