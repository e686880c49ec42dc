"""Remove the containers that a crashed (``kill -9``) agentload process left behind."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from typing import Any

from docker.errors import DockerException, NotFound

from agentload.sandboxes.docker import HOST_LABEL, PID_LABEL, SESSION_LABEL
from agentload.sandboxes.tempdirs import pid_alive

__all__ = ["CleanupReport", "cleanup"]


@dataclass(frozen=True)
class CleanupReport:
    """What ``cleanup`` did: container ids removed, and those kept because their owner lives."""

    removed: list[str]
    kept_live: list[str]


def _owner_alive(labels: dict[str, str]) -> bool:
    if labels.get(HOST_LABEL) != socket.gethostname():
        return False
    try:
        pid = int(labels.get(PID_LABEL, ""))
    except ValueError:
        return False
    return pid_alive(pid)


def cleanup(client: Any, *, include_live: bool = False) -> CleanupReport:
    """Remove every container labelled ``agentload.session`` whose creating process is gone
    (all of them with ``include_live``)."""
    removed: list[str] = []
    kept: list[str] = []
    for c in client.containers.list(all=True, filters={"label": SESSION_LABEL}):
        if not include_live and _owner_alive(c.labels):
            kept.append(c.id[:12])
            continue
        try:
            c.remove(force=True)
        except NotFound:
            continue
        except DockerException:
            kept.append(c.id[:12])
            continue
        removed.append(c.id[:12])
    return CleanupReport(removed=removed, kept_live=kept)
