"""Shared fixtures: the network guard, Docker availability, the simulated endpoint."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a non-loopback connection fails the test."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        if isinstance(host, str) and (host.startswith("127.") or host in ("localhost", "::1")):
            return real_connect(self, address)
        if self.family == socket.AF_UNIX:
            return real_connect(self, address)
        raise AssertionError(f"network access attempted: {address!r}")

    def no_dns(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"DNS lookup attempted: {args[0]!r}")

    monkeypatch.setattr(socket.socket, "connect", guarded)
    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: no_dns(*a))


def docker_required() -> bool:
    """CI sets AGENTLOAD_REQUIRE_DOCKER=1: a Docker test that would skip fails instead."""
    return os.environ.get("AGENTLOAD_REQUIRE_DOCKER", "") not in ("", "0")


def skip_or_fail(reason: str) -> None:
    if docker_required():
        pytest.fail(f"{reason} (AGENTLOAD_REQUIRE_DOCKER=1 turns this skip into a failure)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker SDK client for a daemon that answers; skips (or fails in CI) without one."""
    from agentload.errors import DockerUnavailableError
    from agentload.sandboxes.docker_host import connect_docker  # provided by sandboxes/

    try:
        client = connect_docker()
    except DockerUnavailableError as exc:
        skip_or_fail(f"no Docker daemon: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def simulator() -> Iterator[Any]:
    """The built-in simulated endpoint (instant profile) on a free 127.0.0.1 port, per session."""
    from agentload.endpoint import SimulatorServer

    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as srv:
        yield srv
