"""What the other tools' traces and our redacted ones are for: replay. An imported Weka round
trip of a real generated trace, and a redacted copy of it, replay against the real simulator
with every call answered at exactly the recorded input length (the simulator counts with
o200k, replay's default synthesis tokenizer) and with the recorded sharing cached."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import ok

from agentload.options.replay import ReplayConfig
from agentload.replay.run import run_replay
from agentload.trace.trace import load_trace


@pytest.fixture
def sim() -> Iterator[Any]:
    """A simulator of this test alone: its prefix cache holds only this test's prompts."""
    from agentload.endpoint import SimulatorServer

    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as srv:
        yield srv


def _replay(trace: Path, sim: Any, **kw: Any) -> Any:
    cfg = ReplayConfig(
        traces=[str(trace)],
        endpoint=sim.base_url,
        model=sim.model,
        levels=[2],
        gap_scale=0.0,
        start_at="zero",
        **kw,
    )
    return asyncio.run(run_replay(cfg))


def _check(res: Any, recorded: dict[str, int]) -> None:
    (point,) = res.points
    reqs = [r for r in point.requests if r.phase != "warmup"]  # ramp, measured and drain
    assert sorted(r.call for r in reqs) == sorted(recorded)  # every call, once
    assert all(r.ok for r in reqs), [r.error for r in reqs if not r.ok][:3]
    salts = set()
    for r in reqs:
        # the server counted what we sent: the recorded length plus the replica's salt line
        assert r.prompt_tokens == r.prompt_tokens_ours, r.call
        assert r.recorded_prompt_tokens == recorded[r.call], r.call
        salts.add(r.prompt_tokens - recorded[r.call])
    assert all(0 < n < 32 for n in salts), salts
    assert res.prompt_token_ratio == 1.0
    # the recorded sharing is there to be cached: most of the prompt tokens hit the cache
    cached = sum(r.cached_tokens or 0 for r in reqs)
    assert cached > 0.5 * sum(r.prompt_tokens for r in reqs)


def test_an_imported_weka_trace_replays_at_the_recorded_lengths(
    generated_trace: Path, tmp_path: Path, sim: Any
) -> None:
    ok("trace", "export", "weka", str(generated_trace), "-o", str(tmp_path / "weka"))
    back = tmp_path / "back.agentload.jsonl.zst"
    ok("trace", "import", "weka", str(tmp_path / "weka"), "-o", str(back))
    trace = load_trace(back)
    _check(_replay(back, sim), {c.id: trace.prompt_tokens(c) for c in trace.calls.values()})


def test_a_redacted_trace_says_so_and_replays_at_the_original_lengths(
    generated_trace: Path,
    tmp_path: Path,
    sim: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("AGENTLOAD_TEST_SALT", "a salt of this test")
    red = tmp_path / "red.agentload.jsonl.zst"
    ok("trace", "redact", str(generated_trace), "-o", str(red), "--salt-env", "AGENTLOAD_TEST_SALT")
    orig = load_trace(generated_trace)
    assert load_trace(red).header.redacted
    capsys.readouterr()
    ok("trace", "validate", str(red))
    assert "content: redacted (no message text)" in capsys.readouterr().out
    # a redacted call is synthesized at our own count of the original prompt
    _check(
        _replay(red, sim),
        {c.id: c.usage.prompt_tokens_ours for c in orig.calls.values()},
    )
