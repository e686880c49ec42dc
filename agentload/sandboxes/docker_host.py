"""Finding a Docker daemon that answers.

``DOCKER_HOST`` set (with the usual ``DOCKER_TLS_VERIFY``/``DOCKER_CERT_PATH``): that daemon
alone, as the docker CLI does (a user who names a daemon never gets another one). Unset: the
daemon ``scripts/docker-up.sh`` starts (``unix:///var/tmp/agentload-docker/docker.sock``), then
the default socket. The first that answers a ping wins; none → ``DockerUnavailableError``
naming what was tried.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import docker
from docker.errors import DockerException

from agentload.errors import DockerUnavailableError

__all__ = ["AGENTLOAD_SOCKET", "DEFAULT_SOCKET", "connect_docker", "docker_hosts"]

AGENTLOAD_SOCKET = "unix:///var/tmp/agentload-docker/docker.sock"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def docker_hosts() -> list[str]:
    """The daemon addresses tried, in order: ``DOCKER_HOST`` alone when it is set."""
    named = os.environ.get("DOCKER_HOST", "")
    return [named] if named else [AGENTLOAD_SOCKET, DEFAULT_SOCKET]


def _probe_unix(path: str) -> None:
    """Fail fast (and without leaking a socket) when nothing listens on a unix socket."""
    if not os.path.exists(path):
        raise DockerUnavailableError("no such socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        try:
            s.connect(path)
        except OSError as exc:
            raise DockerUnavailableError(exc.strerror or str(exc)) from None


def _client(host: str, timeout: float) -> Any:
    if host.startswith("unix://"):
        _probe_unix(host.removeprefix("unix://"))
    if host == os.environ.get("DOCKER_HOST"):
        return docker.from_env(timeout=int(timeout))
    return docker.DockerClient(base_url=host, timeout=int(timeout))


def connect_docker(timeout: float = 60.0) -> Any:
    """A ``docker.DockerClient`` for the first daemon that answers a ping.

    ``timeout`` bounds each API request (long exec output streams are not bound by it).
    """
    tried: list[str] = []
    for host in docker_hosts():
        client = None
        try:
            client = _client(host, timeout)
            client.ping()
        except (DockerException, DockerUnavailableError, OSError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            tried.append(f"{host} ({reason[:120]})")
            if client is not None:
                client.close()
            continue
        return client
    if os.environ.get("DOCKER_HOST"):
        raise DockerUnavailableError(
            f"no Docker daemon answers at DOCKER_HOST={tried[0]}; fix DOCKER_HOST or unset it "
            "to use the local socket"
        )
    raise DockerUnavailableError(
        "no Docker daemon answers; tried " + "; ".join(tried) + " (start one: scripts/docker-up.sh)"
    )
