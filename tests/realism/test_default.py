"""The default scenario is shaped like real sessions: `agentload realism` on a default run
against the shipped training corpus finds every statistic in the corpus's p25-p75 band, but the
three the scenario declares as its design (a long session, grown to 400K); `typical-session` is
in band without exception. Also the default's acceptance: Docker sandboxes, 60K -> 400K, the
three sub-agent kinds, real test runs.

A default run here is three sessions (seeds 0, 1, 2: the median session of the modeled waits
and the two quartiles beside it, `agentload.fitted.session_quantile`), judged by their median,
as a statistic of a run is; each generates in well under a minute on the simulator.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from agent_runs import agentload, run_generate

from agentload import contract
from agentload.scenarios import load_scenario
from agentload.trace import Trace
from agentload.trace.stats import compute_stats

BY_DESIGN = {"last_prompt_tokens_root", "calls_per_root_agent", "prefix_reuse"}
"""What the default scenario declares (``coding-session.yaml``'s ``by_design``)."""


def _generate(out: Path, scenario: str, sandbox: str) -> Trace:
    """Three sessions, two at a time, in this process (its containers carry its pid)."""
    return run_generate(out, scenario, sessions=3, levels=[2], sandbox=sandbox)[1]


def _realism(trace: Trace, corpus: Path, *extra: str) -> dict[str, Any]:
    r = agentload("realism", trace.path, "--against", str(corpus), "--json", "--strict", *extra)
    doc: dict[str, Any] = json.loads(r.stdout.splitlines()[-1])
    out = [
        (row["key"], row["ours"], row["corpus"]) for row in doc["rows"] if row["verdict"] == "out"
    ]
    assert r.returncode == 0 and not out, out
    return doc


@pytest.fixture(scope="module")
def default_run(docker_client: Any, tmp_path_factory: pytest.TempPathFactory) -> Trace:
    return _generate(tmp_path_factory.mktemp("default"), "coding-session", "docker")


@pytest.mark.slow
@pytest.mark.docker
def test_the_default_session_is_in_the_real_band(default_run: Trace, kvct_train: Path) -> None:
    doc = _realism(default_run, kvct_train)
    verdicts = {row["key"]: row["verdict"] for row in doc["rows"]}
    out = {k for k, v in verdicts.items() if v not in ("in", "no_data")}
    assert out <= BY_DESIGN and {verdicts[k] for k in out} <= {"by_design"}, verdicts
    assert set(load_scenario("coding-session").by_design) == BY_DESIGN
    rows = {row["key"]: row for row in doc["rows"]}
    # The long session is the design: grown far past the corpus's median and calling as often
    # as its longest sessions. Its cache reuse is declared too (a longer session re-sends more),
    # but it sits at the top edge of the corpus's band, in or just above it with the run's tool
    # outputs: its median is judged at least the corpus's, not out.
    assert {"last_prompt_tokens_root", "calls_per_root_agent"} <= out, verdicts
    reuse = rows["prefix_reuse"]
    assert reuse["ours"]["p50"] >= reuse["corpus"]["p50"], reuse
    # the statistics the issue named, each judged (data on both sides)
    for key in ("output_tokens_per_call", "prompt_growth_per_call", "appended_tokens_per_call",
                "first_prompt_tokens_sub", "gap_after_tool_s", "user_turns_per_session",
                "gap_before_user_s", "subagents_per_session", "subagent_call_share",
                "calls_per_subagent", "session_wall_s"):  # fmt: skip
        assert verdicts[key] == "in", (key, verdicts[key])
    assert doc["ours"]["sessions"] == 3 and "modeled" in doc["ours"]["modeled_waits"]
    assert 2 <= rows["user_turns_per_session"]["ours"]["p50"] <= 10
    assert 7 <= rows["gap_after_tool_s"]["ours"]["p50"] <= 13
    assert 2 <= rows["subagents_per_session"]["ours"]["p50"] <= 5


@pytest.mark.slow
@pytest.mark.docker
def test_the_default_session_acceptance(default_run: Trace, docker_client: Any) -> None:
    trace = default_run
    stats = compute_stats(trace)
    orchs = [a for a in stats["agents"] if a["role"] == contract.ORCHESTRATOR]
    assert len(orchs) == 3
    for orch in orchs:
        assert 50_000 <= orch["prompt_tokens_first"] <= 70_000
        assert 360_000 <= orch["prompt_tokens_last"] <= 440_000
    first = trace.sessions["s0-0"]
    assert first.sandbox == "docker" and first.end_reason == "context_target"
    subs = [a for a in trace.agents.values() if a.session_id == "s0-0" and a.parent_agent_id]
    assert {a.role for a in subs} == set(contract.SUBAGENT_ROLES)  # the three kinds, once or so
    assert 2 <= len(subs) <= 5
    runs = [t for t in trace.tool_calls.values() if t.name == contract.RUN_TESTS]
    assert runs and all(t.sandbox_id and t.exit_code is not None for t in runs)
    assert any(t.exit_code != 0 for t in runs)
    follow_ups = [e for e in trace.events if e.kind == "follow_up" and e.session_id == "s0-0"]
    assert follow_ups  # several user turns, on the simulator too
    leftover = docker_client.containers.list(
        all=True, filters={"label": f"agentload.pid={os.getpid()}"}
    )
    assert leftover == []


@pytest.mark.slow
def test_typical_session_is_in_band_without_exception(tmp_path: Path, kvct_train: Path) -> None:
    trace = _generate(tmp_path, "typical-session", "local")
    doc = _realism(trace, kvct_train)
    verdicts = {row["key"]: row["verdict"] for row in doc["rows"]}
    assert {v for v in verdicts.values()} <= {"in", "no_data"}, verdicts
    assert verdicts["subagents_per_session"] == "no_data"  # it starts none
    rows = {row["key"]: row for row in doc["rows"]}
    assert 20_000 <= rows["first_prompt_tokens_root"]["ours"]["p50"] <= 28_000
    assert 125_000 <= rows["last_prompt_tokens_root"]["ours"]["p50"] <= 160_000
    assert rows["session_wall_s"]["ours"]["p50"] > 1_200  # modeled: a real half hour or so
