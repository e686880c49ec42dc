"""A content-free trace replayed against the real engine on the recorded schedule: every
synthesized prompt accepted, lengths pinned, and the server/ours prompt-token ratio reported
(Gemma's tokenizer and chat template against o200k and agentload's framing)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from agentload.options.replay import ReplayConfig
from agentload.replay.run import run_replay

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from test_synth import Call, content_free_trace

pytestmark = pytest.mark.engine

# two sessions sharing a 64-token block, one extending its first call: 550 prompt tokens
CALLS = [
    Call("c0", "s0", "a0", 0, ["1", "2"], 150, 0, out=3),
    Call("d0", "s1", "b0", 0, ["1", "3"], 140, 100, out=3),
    Call("c1", "s0", "a0", 1, ["3", "4"], 260, 200, base="c0", base_blocks=2, out=3),
]


def test_a_content_free_trace_replays_on_the_engine(engine: Any, tmp_path: Path) -> None:
    trace = content_free_trace(tmp_path / "cf.agentload.jsonl", CALLS)
    cfg = ReplayConfig(
        traces=[str(trace)],
        endpoint=engine.url,
        model=engine.model,
        engine="llamacpp",
        schedule="recorded",
        salt=False,
        timeout_s=120,
    )
    res = asyncio.run(run_replay(cfg))
    reqs = {r.call: r for r in res.points[0].requests}
    assert len(reqs) == 3 and all(r.ok for r in reqs.values()), [r.error for r in reqs.values()]
    assert all(r.completion_tokens == r.expected_tokens == 3 for r in reqs.values())
    assert all(r.prompt_tokens_ours == c.tokens for c, r in ((c, reqs[c.id]) for c in CALLS))
    # the input-length check: the server's count of the same prompts against the recorded one
    ratio = res.prompt_token_ratio
    assert ratio is not None and 0.8 < ratio < 2.0
    # the open loop measures every call it sent
    assert all(r.phase == "measured" for r in reqs.values())
