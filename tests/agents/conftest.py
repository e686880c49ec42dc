"""Fixtures of the agents' tests. Helper modules of this folder (``agent_runs``,
``fake_endpoint``) are importable by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from agent_runs import run_generate

from agentload.generate.run import RunResult
from agentload.trace import Trace


@pytest.fixture(scope="module")
def quick_local(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunResult, Trace]:
    """``generate -s quick --sandbox local`` on the built-in simulator, once per module."""
    return run_generate(tmp_path_factory.mktemp("quick-local"), sandbox="local")
