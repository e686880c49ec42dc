"""The acceptance test of the exports: AIPerf's own Weka and Mooncake loaders read what
``agentload trace export`` wrote and replay it against a real ``agentload serve``; AIPerf's own
records must count exactly our calls (per conversation, for Weka), with no failed request."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentload.cli import app
from agentload.trace import load_trace

pytestmark = pytest.mark.aiperf


def _export(fmt: str, trace: Path, out: Path) -> None:
    res = CliRunner().invoke(app, ["trace", "export", fmt, str(trace), "-o", str(out)])
    assert res.exit_code == 0, res.output


def _run(aiperf: Any, serve: Any, args: list[str], art: Path) -> list[dict[str, Any]]:
    """``aiperf profile`` against ``serve``; AIPerf's per-request records of the run."""
    common = [
        "--model",
        serve.model,
        "--url",
        serve.root,
        "--endpoint-type",
        "chat",
        "--streaming",
        "--output-artifact-dir",
        str(art),
        "--random-seed",
        "0",
        "--ui-type",
        "none",
        "--no-gpu-telemetry",
        "--no-server-metrics",
    ]
    proc = aiperf.profile([*common, *args])
    log = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, log
    summary = json.loads((art / "profile_export_aiperf.json").read_text())
    assert summary["is_complete"] and not summary["was_cancelled"], log
    records = [json.loads(line) for line in (art / "profile_export.jsonl").read_text().splitlines()]
    assert summary["request_count"]["avg"] == len(records)
    assert [r["error"] for r in records if r.get("error")] == []
    assert {r["metadata"]["benchmark_phase"] for r in records} == {"profiling"}
    return records


def test_aiperf_replays_the_weka_export(
    aiperf: Any, generated_trace: Path, serve: Any, tmp_path: Path
) -> None:
    trace = load_trace(generated_trace)
    out = tmp_path / "weka"
    _export("weka", generated_trace, out)
    files = sorted(out.glob("*.json"))
    assert len(files) == len(trace.sessions) == 2
    records = _run(
        aiperf,
        serve,
        [
            "--custom-dataset-type",
            "weka_trace",
            "--input-file",
            str(out),
            # One pass over the files: without it AIPerf wraps around the dataset.
            "--conversation-num",
            str(len(files)),
            "--concurrency",
            str(len(files)),
        ],
        tmp_path / "art",
    )
    assert len(records) == len(trace.calls)
    # AIPerf names a root conversation by the file's id and a sub-agent's "{id}::sa:{agent_id}".
    got = Counter(r["metadata"]["conversation_id"] for r in records)
    want: Counter[str] = Counter()
    for c in trace.calls.values():
        root = trace.agents[c.agent_id].parent_agent_id is None
        want[c.session_id if root else f"{c.session_id}::sa:{c.agent_id}"] += 1
    assert got == want


def test_aiperf_replays_the_mooncake_export(
    aiperf: Any, generated_trace: Path, serve: Any, tmp_path: Path
) -> None:
    trace = load_trace(generated_trace)
    out = tmp_path / "trace.jsonl"
    _export("mooncake", generated_trace, out)
    lines = out.read_text().splitlines()
    # Timestamps make AIPerf replay on the recorded schedule (fixed schedule), each line once.
    records = _run(
        aiperf,
        serve,
        ["--custom-dataset-type", "mooncake_trace", "--input-file", str(out)],
        tmp_path / "art",
    )
    assert len(records) == len(lines) == len(trace.calls)
    assert len({r["metadata"]["conversation_id"] for r in records}) == len(lines)
