"""Sandboxes: where tools execute. ``docker`` (one container per session) or ``local``.

``open_sandbox(kind, workspace, settings, session_id)`` is the one way in:

* ``docker`` — a container of the scenario's image, or of the offline image built from the host's
  Python on first use (``agentload sandbox build``);
* ``local`` — a subprocess in the workspace, confined in namespaces for an agent product
  (``egress``), plain for our own tools (``docs/sandboxes.md`` says what each promises);
* ``auto`` — ``docker`` when a daemon answers, else ``local`` announced by one warning line.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentload.errors import ConfigError, DockerUnavailableError
from agentload.protocols import ExecResult, Sandbox
from agentload.sandboxes.lifecycle import close_all, install_signal_handlers
from agentload.scenarios.models import SandboxSpec

__all__ = [
    "SANDBOX_KINDS",
    "ExecResult",
    "Sandbox",
    "close_all",
    "get_sandbox_class",
    "install_signal_handlers",
    "open_sandbox",
    "sandbox_ready",
]

_SANDBOX_MAPPING = {
    "docker": "agentload.sandboxes.docker.DockerSandbox",
    "local": "agentload.sandboxes.local.LocalSandbox",
}
SANDBOX_KINDS = ("auto", *_SANDBOX_MAPPING)
_warned = False

# SIGTERM/SIGHUP remove every open sandbox before the process ends, wherever they were opened.
# (SIGINT is left to KeyboardInterrupt / asyncio cancellation until a sandbox opens here.)
install_signal_handlers(sigint=False)


def get_sandbox_class(kind: str) -> Any:
    """The class behind a sandbox kind; ``ConfigError`` listing the valid kinds if unknown."""
    if kind not in _SANDBOX_MAPPING:
        raise ConfigError(f"unknown sandbox kind {kind!r}; valid: {', '.join(SANDBOX_KINDS)}")
    module, _, name = _SANDBOX_MAPPING[kind].rpartition(".")
    return getattr(importlib.import_module(module), name)


def _warn_local() -> None:
    global _warned
    if not _warned:
        _warned = True
        print(
            "agentload: warning: no Docker daemon answers; tools run as local subprocesses "
            "WITHOUT network isolation or a pids cap (start Docker: scripts/docker-up.sh)",
            file=sys.stderr,
            flush=True,
        )


def sandbox_ready(kind: str, settings: SandboxSpec) -> None:
    """What ``open_sandbox(kind, ...)`` will need, checked once before a run's sessions start:
    for ``docker`` a daemon that answers (``DockerUnavailableError``), and for ``docker`` or an
    ``auto`` that finds one, the image (``SandboxError`` when a named one is missing; the offline
    image is built now, once)."""
    if kind not in ("auto", "docker"):
        return
    from agentload.sandboxes.docker_host import connect_docker
    from agentload.sandboxes.image import ensure_image

    try:
        client = connect_docker(timeout=30)
    except DockerUnavailableError:
        if kind == "docker":
            raise
        return
    try:
        ensure_image(client, settings.image)
    finally:
        client.close()


def open_sandbox(
    kind: str,
    workspace: Path,
    settings: SandboxSpec | None = None,
    session_id: str = "default",
    *,
    progress: Callable[[str], None] | None = None,
    docker_client: Any = None,
    mounts: Mapping[str, str] | None = None,
    egress: Sequence[int] | None = None,
) -> Sandbox:
    """Open a sandbox over ``workspace``; close it with ``.close()`` or a ``with`` block.
    ``mounts``: more host directories a Docker sandbox sees read-only (host path → path
    inside; a local sandbox sees the host anyway, and a confined one those at their own path).
    ``egress``: a local sandbox confines its commands (``local`` module docstring), the host's
    ``127.0.0.1:PORT`` of each port their only way out; None: unconfined (our own tools). A
    Docker sandbox has no network either way."""
    settings = settings or SandboxSpec()
    if kind not in SANDBOX_KINDS:
        raise ConfigError(f"unknown sandbox kind {kind!r}; valid: {', '.join(SANDBOX_KINDS)}")
    if kind in ("auto", "docker"):
        from agentload.sandboxes.docker_host import connect_docker

        client, owned = docker_client, docker_client is None
        if client is None:
            try:
                client = connect_docker()
            except DockerUnavailableError:
                if kind == "docker":
                    raise
                _warn_local()
                kind = "local"
        if client is not None:
            from agentload.sandboxes.image import ensure_image

            try:
                image = ensure_image(client, settings.image, progress)
            except BaseException:
                if owned:
                    client.close()
                raise
            cls = get_sandbox_class("docker")
            sandbox: Sandbox = cls(
                client,
                image,
                Path(workspace),
                settings,
                session_id,
                owns_client=owned,
                mounts=mounts,
            )
            return sandbox
    cls = get_sandbox_class("local")
    local: Sandbox = cls(Path(workspace), settings, session_id, egress=egress, mounts=mounts)
    return local
