"""The modeled waits and the simulator's pacing: fitted to the real corpus, not typed in.

The shipped presets' ``waits:`` and ``pacing:`` blocks are exactly what ``agentload realism
--fit`` prints for the shipped training corpus, and the fit recovers the parameters of data
drawn from a known model.
"""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_runs import agentload

from agentload.fitted import GapModel, SessionWaits, WaitKind, WaitModel, fit_gap, session_quantile
from agentload.quantiles import percentile
from agentload.scenarios import load_scenario

SOURCE = (
    "kv-cache-tester traces/ (WEKA, Apache-2.0, github callanjfox/kv-cache-tester @ 94f6046): "
    "every tenth of 739 real Claude Code sessions"
)


def _fit(corpus: Path, *extra: str) -> dict[str, Any]:
    r = agentload("realism", "--against", str(corpus), "--fit", "--source", SOURCE, *extra)
    assert r.returncode == 0, r.stderr
    assert "auto: weka" in r.stderr  # a real 1.2 MB file, detected from its first bytes
    fitted: dict[str, Any] = yaml.safe_load(r.stdout)
    return fitted


def test_the_default_waits_and_pacing_are_the_fit_of_the_training_corpus(kvct_train: Path) -> None:
    every = _fit(kvct_train)
    long = _fit(kvct_train, "--min-calls", "100")
    assert long["waits"] == every["waits"]  # the waits are every session's
    cs = load_scenario("coding-session")
    assert cs.waits is not None and cs.pacing is not None
    waits = cs.waits.model_dump(mode="json", exclude_none=True)
    # the preset leaves the sub-agents' own gap out on purpose (they follow after_tool)
    every["waits"].pop("after_tool_subagent")
    assert waits == every["waits"]
    # the default is a long session: its pacing is that of the corpus's long sessions
    assert cs.pacing.model_dump(mode="json", exclude_none=True) == long["pacing"]
    assert long["pacing"]["turn_calls"]["median"] > 2 * every["pacing"]["turn_calls"]["median"]
    typical = load_scenario("typical-session")
    assert typical.waits == cs.waits
    assert typical.pacing is not None
    assert typical.pacing.model_dump(mode="json", exclude_none=True) == every["pacing"]


def test_fit_gap_recovers_a_known_model() -> None:
    truth = GapModel(median_s=9.0, session_sigma=0.4, call_sigma=0.8)
    rng = random.Random(5)
    sessions = []
    for _ in range(400):
        z = rng.gauss(0, 1)
        sessions.append([truth.at(z, rng.gauss(0, 1)) for _ in range(60)])
    got = fit_gap(sessions)
    assert got is not None and got.sessions == 400 and got.gaps == 24_000
    assert math.isclose(got.median_s, 9.0, rel_tol=0.06)
    assert math.isclose(got.session_sigma, 0.4, rel_tol=0.15)
    assert math.isclose(got.call_sigma, 0.8, rel_tol=0.05)
    assert fit_gap([[3.0, 4.0]]) is None  # one session says nothing of the spread between them


def test_session_quantiles_are_stratified() -> None:
    qs = [session_quantile(i) for i in range(15)]
    assert qs[:3] == [0.5, 0.25, 0.75]  # session 0 is the median session
    assert sorted(qs[:7]) == [k / 8 for k in range(1, 8)]  # 7 sessions: one per eighth
    assert sorted(qs) == [k / 16 for k in range(1, 16)]  # 15: one per sixteenth


def test_session_waits_spread_like_the_model_and_repeat_with_the_seed() -> None:
    model = WaitModel(source="test", after_tool=GapModel(median_s=9, session_sigma=0.36,
                                                          call_sigma=1.2))  # fmt: skip
    waits = SessionWaits(model, index=0)
    again = SessionWaits(model, index=0)
    a = [waits.wait_ns(WaitKind.TOOL, "s3-0.orch", 0) / 1e9 for _ in range(40)]
    b = [again.wait_ns(WaitKind.TOOL, "s3-0.orch", 0) / 1e9 for _ in range(40)]
    assert a == b
    # the median session's first few gaps cover the distribution evenly: their median is the
    # model's (a plain random draw of 5 would stray by a factor of ~1.6 at one sigma)
    assert statistics.median(a[:1]) == statistics.median(a[:3]) == statistics.median(a[:5]) == 9
    assert 9 < statistics.median(a[:2]) < 9 * 2.3  # two: between the 0.5 and 0.75 quantiles
    slow = SessionWaits(model, index=2)  # the third session: its effect at the 0.75 quantile
    assert slow.wait_ns(WaitKind.TOOL, "a", 0) / 1e9 == pytest.approx(
        9 * math.exp(0.36 * 0.6745), rel=1e-3
    )
    assert 0.9 < statistics.median(a) / 9 < 1.1
    assert percentile(a, 90) > 3 * percentile(a, 10)
    # a sub-agent's gap falls back to after_tool; a measured gap is taken off the draw
    sub = SessionWaits(model).wait_ns(WaitKind.SUBAGENT_TOOL, "x", 0)
    assert sub > 0
    assert waits.wait_ns(WaitKind.TOOL, "s3-0.orch", 10**13) == 0
    assert waits.wait_ns(WaitKind.USER, "s3-0.orch", 0) == 0  # no before_user model


def test_a_scenario_takes_fitted_blocks_and_refuses_bad_ones(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "extends: quick\nwaits: {source: x, after_tool: {median_s: -1, session_sigma: 0, call_sigma: 0}}\n"
    )
    r = agentload("scenarios", "show", str(bad))
    assert r.returncode == 2 and "median_s" in r.stderr and "Traceback" not in r.stderr
