"""One token unit: generate measures the server/ours ratio and sizes and limits in server tokens.

Against the simulator the ratio is exactly 1 (it counts with our tokenizer); a simulator that
counts with another tokenizer stands in for a real model's server: a real Hugging Face
``tokenizer.json`` made here (words cut into runs of five letters: ~25% more tokens than
o200k on this text, about what Gemma 3 counts). The first prompt then lands on the scenario's
size in *its* tokens, and the ratio is in the header, the stats and the summary. A server
without ``/completions`` gives one warning and ratio 1.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agent_runs import run_generate
from fake_endpoint import Reply, ScriptedEndpoint

from agentload import contract
from agentload.endpoint import SimulatorServer
from agentload.generate.calibrate import SAMPLE_TOKENS, calibrate
from agentload.generate.simproc import scenario_pacing
from agentload.scenarios import load_scenario
from agentload.tokenizer import ChatTokenCounter
from agentload.trace.stats import compute_stats


def test_the_simulator_counts_as_we_do(simulator: Any) -> None:
    s = load_scenario("coding-session")
    got = asyncio.run(calibrate(simulator.base_url, simulator.model, s, ChatTokenCounter(), 30))
    assert got.error is None and got.ratio == 1.0
    assert got.sample_tokens_server == got.sample_tokens_ours
    assert SAMPLE_TOKENS * 0.8 <= got.sample_tokens_ours <= SAMPLE_TOKENS * 1.3  # "about"


def _short_words_tokenizer(path: Path) -> str:
    """A real tokenizer.json: one token per run of at most five word characters (with its
    leading space), per space run, per punctuation run; returns its ``hf:`` name."""
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({"[UNK]": 0}, unk_token="[UNK]"))
    pattern = tokenizers.Regex(r" ?\w{1,5}|\s+|[^\w\s]+")
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(pattern, behavior="isolated")
    tok.save(str(path))
    return f"hf:{path}"


def test_a_server_with_another_tokenizer_gets_prompts_in_its_tokens(tmp_path: Path) -> None:
    overrides = ["context_target=16000"]
    scenario = load_scenario("quick", overrides)
    theirs = _short_words_tokenizer(tmp_path / "tokenizer.json")
    with SimulatorServer(tokenizer=theirs, policy_overrides=scenario_pacing(scenario)) as srv:
        result, trace = run_generate(
            tmp_path, overrides=overrides, sandbox="local", endpoint=srv.base_url
        )
    cal = trace.header.token_calibration
    assert cal is not None and cal.error is None
    ratio = cal.server_per_ours
    assert 1.1 < ratio < 1.4  # the two tokenizers really differ on this text
    assert result.tokens is not None and result.tokens.ratio == ratio
    (orch,) = [a for a in trace.agents.values() if a.role == contract.ORCHESTRATOR]
    calls = trace.calls_of(orch.id)
    first = calls[0].usage
    # The first prompt is the scenario's 8K in the server's tokens, not in ours.
    assert first.prompt_tokens is not None and 7_700 <= first.prompt_tokens <= 8_200
    assert abs(first.prompt_tokens_ours - 8_000 / ratio) <= 0.03 * 8_000
    (sess,) = trace.sessions.values()
    assert sess.meta["initial_context_budget_ours"] == round(8_000 / ratio)
    # The target is checked on the server's count.
    assert sess.end_reason == "context_target"
    assert (calls[-1].usage.prompt_tokens or 0) >= 16_000 > (calls[-2].usage.prompt_tokens or 0)
    # The recorded calls' own server/ours ratio is near the calibration (later prompts hold
    # other text: tool outputs, replies), and both are in the stats.
    st = compute_stats(trace)
    assert st["token_calibration"] == ratio
    assert st["prompt_tokens_server_per_ours"] == pytest.approx(ratio, rel=0.1)
    assert abs(st["prompt_tokens_server_per_ours"] - 1) > 0.1


def test_no_completions_route_is_one_warning_and_ratio_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    overrides = ["orchestrator.initial_context_tokens=3000", "follow_ups=[]"]
    with ScriptedEndpoint(lambda b: Reply("All fixed.", [], 3000)) as ep:
        _, trace = run_generate(
            tmp_path, overrides=overrides, sandbox="local", endpoint=ep.base_url
        )
        sent = ep.requests
    warnings = [ln for ln in capsys.readouterr().err.splitlines() if "warning" in ln]
    assert len(warnings) == 1, warnings
    assert warnings[0].startswith("agentload: warning: token calibration failed (POST ")
    assert "/completions: HTTP 404" in warnings[0] and "ratio 1" in warnings[0]
    cal = trace.header.token_calibration
    assert cal is not None and cal.server_per_ours == 1.0 and "404" in (cal.error or "")
    assert len(sent) == 1  # the sessions' chat route saw only the session's own call
    (sess,) = trace.sessions.values()
    assert sess.end_reason == "done" and sess.meta["initial_context_budget_ours"] == 3000
