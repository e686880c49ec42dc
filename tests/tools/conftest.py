"""Fixtures of the tool tests: a real stdlib:email workspace with the default fault, in a real
sandbox (local, and Docker where a daemon answers)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentload.sandboxes import open_sandbox
from agentload.scenarios import Scenario, load_scenario
from agentload.scenarios.workspace import Workspace, materialise
from agentload.tools import Toolbox


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return materialise("stdlib:email", tmp_path / "ws", "qp-header-decode")


@pytest.fixture
def scenario() -> Scenario:
    return load_scenario("quick", ["sandbox.memory=512m"])


def make_box(
    kind: str, ws: Workspace, scenario: Scenario, request: pytest.FixtureRequest
) -> Toolbox:
    client: Any = request.getfixturevalue("docker_client") if kind == "docker" else None
    sid = f"tools-{uuid.uuid4().hex[:8]}"
    sandbox = open_sandbox(kind, ws.root, scenario.sandbox, sid, docker_client=client)
    request.addfinalizer(sandbox.close)
    return Toolbox(sandbox, ws.root, scenario)


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def box(request: pytest.FixtureRequest, ws: Workspace, scenario: Scenario) -> Iterator[Toolbox]:
    """A toolbox in each kind of sandbox."""
    yield make_box(request.param, ws, scenario, request)


@pytest.fixture
def local_box(request: pytest.FixtureRequest, ws: Workspace, scenario: Scenario) -> Toolbox:
    """For the tools served on the host: the sandbox kind does not matter."""
    return make_box("local", ws, scenario, request)


@pytest.fixture
def docker_box(request: pytest.FixtureRequest, ws: Workspace, scenario: Scenario) -> Toolbox:
    """A toolbox in a Docker sandbox only (tests marked ``docker``)."""
    return make_box("docker", ws, scenario, request)
