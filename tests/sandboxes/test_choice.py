"""The sandbox a run gets, chosen once before it starts, and what it says about the choice."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agentload.errors import ConfigError, DockerUnavailableError
from agentload.sandboxes import docker_host
from agentload.sandboxes.choice import choose_sandbox
from agentload.scenarios.models import SandboxSpec


@pytest.fixture
def no_daemon(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every address connect_docker tries points at a socket that does not exist."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.setattr(docker_host, "AGENTLOAD_SOCKET", f"unix://{tmp_path}/a.sock")
    monkeypatch.setattr(docker_host, "DEFAULT_SOCKET", f"unix://{tmp_path}/b.sock")


def test_auto_without_a_daemon_is_local_and_says_why(no_daemon: None) -> None:
    choice = choose_sandbox("auto", SandboxSpec(), "--sandbox")
    assert choice.kind == "local"
    assert str(choice).startswith("local (--sandbox auto: no Docker daemon answers; ")
    assert choice.visible is None and choice.sees(Path("/anywhere/at/all"))
    assert choice.path is not None and "/usr/bin" in choice.path


def test_docker_without_a_daemon_is_one_error_before_anything_starts(no_daemon: None) -> None:
    with pytest.raises(DockerUnavailableError, match="no Docker daemon answers at DOCKER_HOST="):
        choose_sandbox("docker", SandboxSpec())


def test_local_is_local_whatever_docker_does() -> None:
    choice = choose_sandbox("local", SandboxSpec(), "the scenario's sandbox.kind")
    assert str(choice) == "local (the scenario's sandbox.kind local)"


def test_an_unknown_kind_lists_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="unknown sandbox kind 'vm'; valid: auto, docker, local"):
        choose_sandbox("vm", SandboxSpec())


@pytest.mark.docker
def test_auto_with_a_daemon_is_docker_seeing_only_the_images_folders(
    docker_client: Any, tmp_path: Path
) -> None:
    choice = choose_sandbox("auto", SandboxSpec())
    assert str(choice) == "docker (--sandbox auto: a Docker daemon answers)"
    assert choice.visible is not None and "/usr" in choice.visible
    assert choice.sees(Path("/usr/bin/env")) and choice.sees(Path(sys.base_prefix) / "bin")
    assert not choice.sees(tmp_path)
