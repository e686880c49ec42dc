"""The live benchmark against the real engine: a short ``generate -s quick`` run writes a
results.json whose timings and token counts are the ones llama-server gave the agents."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentload.measure.results import load_results
from agentload.trace import load_trace

pytestmark = pytest.mark.engine

# One short orchestrator call is the aim: a small first prompt, a task a tiny model answers
# in a few words, no follow-ups, and every limit tight (a rambling reply is cut by the call
# timeout, a delegation gets one sub-agent turn).
SHORT = [
    "-c", "orchestrator.initial_context_tokens=600",
    "-c", "orchestrator.max_rounds=2",
    "-c", "orchestrator.max_parallel_delegations=1",
    "-c", "follow_ups=[]",
    "-c", "task=Say the single word DONE and nothing else.",
    "-c", "wall_budget_s=120",
    "-c", "subagents.code_search.max_turns=1",
    "-c", "subagents.test_runner.max_turns=1",
    "-c", "subagents.file_reader.max_turns=1",
]  # fmt: skip


# Per-role reply limits: a tiny model asked without one can ramble for minutes.
CAPPED = [
    "-c", "orchestrator.max_tokens=32",
    *(x for kind in ("code_search", "test_runner", "file_reader")
      for x in ("-c", f"subagents.{kind}.max_tokens=32")),
]  # fmt: skip


def test_a_live_run_records_the_servers_timings_and_tokens(engine: Any, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentload", "generate", "-s", "quick", *SHORT, *CAPPED,
         "--endpoint", engine.url, "--model", engine.model, "--sandbox", "local",
         "--call-timeout", "90", "--retries", "0", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=400, check=False,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    (trace_path,) = tmp_path.glob("*.agentload.jsonl.zst")
    trace = load_trace(trace_path)
    doc = load_results(tmp_path / trace_path.name.removesuffix(".agentload.jsonl.zst"))
    assert doc.mode == "live" and doc.config.model == engine.model
    assert doc.live is not None and doc.simulator is None  # a real engine: measured
    assert (
        tmp_path / trace_path.name.removesuffix(".agentload.jsonl.zst") / "report.html"
    ).exists()
    (point,) = doc.points
    calls = [c for c in trace.calls.values() if c.timings.first_token_ns is not None]
    assert calls, f"no call answered: {proc.stdout[-2000:]}"
    # Output tokens are llama-server's own counts, request by request.
    by_call = {r.call: r for r in point.requests}
    for c in calls:
        assert c.usage.completion_tokens is not None and c.usage.prompt_tokens is not None
        assert by_call[c.id].completion_tokens == c.usage.completion_tokens
        assert by_call[c.id].prompt_tokens == c.usage.prompt_tokens
    # TTFT: the recorded first token minus submit (one session: every call is measured).
    ttfts = [(c.timings.first_token_ns - c.timings.submit_ns) / 1e6 for c in calls]  # type: ignore[operator]
    a = point.aggregates
    assert a.ttft_ms is not None and a.ttft_ms.p50 == pytest.approx(statistics.median(ttfts))
    assert a.output_tps is not None and a.output_tps > 0
    # Gemma's tokenizer splits the same prompts finer than agentload's o200k.
    assert doc.prompt_token_ratio is not None and doc.prompt_token_ratio > 1.0
