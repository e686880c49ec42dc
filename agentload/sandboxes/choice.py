"""Which sandbox a run gets, decided once before its sessions start, and why.

``choose_sandbox("auto", ...)`` asks for a Docker daemon now (``docker`` when one answers, else
``local``); ``"docker"`` without a daemon is ``DockerUnavailableError`` (one line) before anything
starts. The choice also says what a command sees of the host there: ``visible`` (the host
folders a Docker sandbox mounts read-only at the same paths; ``None``: all of the host, the
local sandbox, but for its ``hidden`` private scratch folders) and ``path`` (the ``PATH`` its
commands start with; ``None``: not known, an image of the user's), which is what
``products.placement`` checks a ``cmd:`` command line against.

    choice = choose_sandbox(opts.sandbox or scenario.sandbox.kind, scenario.sandbox, "--sandbox")
    print(f"sandbox: {choice}")        # "local (--sandbox auto: no Docker daemon answers; ...)"
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from agentload.errors import ConfigError, DockerUnavailableError
from agentload.scenarios.models import SandboxSpec

__all__ = ["SandboxChoice", "choose_sandbox"]


@dataclass(frozen=True)
class SandboxChoice:
    """A sandbox kind chosen for a run (``docker`` or ``local``) and why."""

    kind: str
    reason: str
    visible: tuple[str, ...] | None = None
    """The host folders a command sees (at the same paths); None: the whole host."""
    path: tuple[str, ...] | None = None
    """The folders of the ``PATH`` its commands start with; None: not known (an image of the
    user's, whose own PATH applies)."""
    hidden: tuple[str, ...] = ()
    """Host folders a command does not see, even where ``visible`` is None (the confined local
    sandbox's private ``/tmp``, ``/var/tmp`` ...): a program there is mounted like Docker's."""

    def __str__(self) -> str:
        return f"{self.kind} ({self.reason})"

    def sees(self, path: Path) -> bool:
        """Whether a command in the sandbox sees the host's ``path`` (and what it links to)."""
        real = Path(os.path.realpath(path))
        paths = (Path(os.path.abspath(path)), real)
        if any(p == Path(h) or Path(h) in p.parents for h in self.hidden for p in paths):
            return False
        if self.visible is None:
            return True
        return all(any(p == Path(m) or Path(m) in p.parents for m in self.visible) for p in paths)


def choose_sandbox(kind: str, settings: SandboxSpec, origin: str = "--sandbox") -> SandboxChoice:
    """The sandbox ``kind`` (``auto``, ``docker`` or ``local``, as ``origin`` gave it) means now;
    ``ConfigError`` for another kind, ``DockerUnavailableError`` for ``docker`` without a
    daemon."""
    from agentload.sandboxes import SANDBOX_KINDS
    from agentload.sandboxes.confine import HIDDEN, SCRATCH
    from agentload.sandboxes.local import path_env

    asked = f"{origin} {kind}"
    if kind not in SANDBOX_KINDS:
        raise ConfigError(f"unknown sandbox kind {kind!r}; valid: {', '.join(SANDBOX_KINDS)}")
    local_path = tuple(path_env().split(":"))
    hidden = (*SCRATCH, *HIDDEN)
    if kind == "local":
        return SandboxChoice("local", asked, None, local_path, hidden)
    from agentload.sandboxes.docker_host import connect_docker

    try:
        client = connect_docker(timeout=30)
    except DockerUnavailableError:
        if kind == "docker":
            raise
        why = (
            f"{asked}: no Docker daemon answers; the local sandbox (an agent confined in "
            "namespaces, our own tools not: docs/sandboxes.md; Docker: scripts/docker-up.sh)"
        )
        return SandboxChoice("local", why, None, local_path, hidden)
    try:
        visible, path = _image_view(client, settings.image)
    finally:
        client.close()
    why = asked if kind == "docker" else f"{asked}: a Docker daemon answers"
    return SandboxChoice("docker", why, visible, path)


def _image_view(client: object, tag: str | None) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """What a command sees of the host in image ``tag`` (None: the offline image) and its PATH."""
    from agentload.sandboxes.image import host_mounts, image_info, image_path, missing_image

    if tag is None:
        return tuple(host_mounts()), tuple(image_path().split(":"))
    info = image_info(client, tag)
    if info is None:  # refused now, before any session starts
        raise missing_image(tag)
    if not info.built_here:  # the user's own image
        return (), None
    return info.mounts, None
