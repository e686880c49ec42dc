"""Fixtures of the agent-product tests: the recording proxy in front of the simulator."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))  # conftest helpers, ready_file
sys.path.insert(0, str(Path(__file__).parents[1] / "record"))  # real_agents
sys.path.insert(0, str(Path(__file__).parent))  # test_cmd_agent's AGENT


@pytest.fixture
def proxy(simulator: Any, tmp_path: Path) -> Iterator[Any]:
    """A recording proxy in front of the session's simulator, its trace under ``tmp_path``."""
    from agentload.record.server import RecordOptions, RecordServer

    with RecordServer(RecordOptions(upstream=simulator.base_url, out=tmp_path)) as rs:
        yield rs
