"""Fixtures of the sandbox tests: a small workspace and tight limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentload.scenarios.models import SandboxSpec


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "mod.py").write_text("VALUE = 41\n")
    return root


@pytest.fixture
def tight() -> SandboxSpec:
    return SandboxSpec(kind="auto", memory="256m", cpus=1.0, pids=64)
