"""The strongest check of the proxy: ``generate`` pointed at ``agentload record`` in front of the
simulator. The trace the proxy writes must tell the same story as the trace ``generate`` writes
itself in the same run: the same sessions, agent tree and roles, the same calls with the same
message blobs and token counts, the same tool calls, the same dependencies."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agentload.endpoint import SimulatorServer
from agentload.generate.options import GenerateOptions
from agentload.generate.run import generate
from agentload.generate.simproc import scenario_pacing
from agentload.scenarios.loader import load_scenario
from agentload.trace.trace import Trace, load_trace

sys.path.insert(0, str(Path(__file__).parent))

from equivalence import assert_same_story

pytestmark = pytest.mark.slow


def _run(record_proxy: Callable[..., Any], out: Path) -> tuple[Trace, Trace]:
    scenario = load_scenario("quick", ["context_target=20000"])
    with SimulatorServer(
        profile=scenario.endpoint.profile,
        model="agentload-sim",
        seed=0,
        policy_overrides=scenario_pacing(scenario),
    ) as sim:
        rp = record_proxy(sim.base_url)
        opts = GenerateOptions(
            scenario=scenario,
            endpoint=rp.base_url,
            sessions=2,
            levels=[2],
            sandbox="local",
            seed=0,
            out=out,
        )
        own = asyncio.run(generate(opts)).trace_path
        proxied = rp.stop()
    return load_trace(own), load_trace(proxied)


def test_generate_through_the_proxy_records_generates_own_trace(
    record_proxy: Callable[..., Any], tmp_path: Path
) -> None:
    own, rec = _run(record_proxy, tmp_path / "own")
    assert not own.truncated and not rec.truncated
    assert len(own.sessions) == len(rec.sessions) == 2
    assert len(own.calls) == len(rec.calls) > 10
    assert_same_story(own, rec, min_tool_calls=max(6, len(own.tool_calls) - 2 * len(own.sessions)))
