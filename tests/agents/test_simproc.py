"""The built-in simulator in a child process: serves, stops, reports bad profiles in one line."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from agent_runs import agentload, one_error_line

from agentload.errors import ConfigError
from agentload.generate.simproc import SimulatorProcess


def test_child_serves_and_stops() -> None:
    sim = SimulatorProcess(profile="instant", model="m1", seed=3)
    sim.start()
    proc = sim._proc
    try:
        assert sim.base_url.startswith("http://127.0.0.1:") and sim.model == "m1"
        models = httpx.get(sim.base_url + "/models", timeout=10).json()
        assert [m["id"] for m in models["data"]] == ["m1"]
    finally:
        sim.stop()
    assert proc is not None and not proc.is_alive()
    with pytest.raises(httpx.ConnectError):
        httpx.get(sim.base_url + "/models", timeout=5)
    sim.stop()  # idempotent


def test_bad_profile_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="no-such-profile"):
        SimulatorProcess(profile="no-such-profile").start()


def test_generate_with_a_bad_profile_is_one_line(tmp_path: Path) -> None:
    proc = agentload("generate", "-s", "quick", "-c", "endpoint.profile=no-such-profile",
                     "--out", str(tmp_path))  # fmt: skip
    assert "no-such-profile" in one_error_line(proc)
