"""Ray, the optional engine of ``generate --ray`` and ``replay --ray``: connecting, and clocks.

    with connect(address) as cluster:          # None/"local", "auto" or HOST:PORT
        n = cluster.workers(requested)          # --workers, else one per CPU (capped)
        off = measure_offset(lambda: ray.get(actor.clock.remote()))

* Ray is an extra (``pip install 'agentload[ray]'``): without it ``--ray`` is one line
  (``ConfigError``), raised before anything else runs.
* ``address``: None or ``local`` starts a Ray instance on this machine for the run (and stops
  it after); ``auto`` joins the cluster this machine belongs to (``ray.init(address="auto")``);
  ``HOST:PORT`` (or ``ray://HOST:PORT``) joins that cluster. When Ray is already initialised
  in this process (a caller's own ``ray.init``), that instance is used and left running.
* ``ray.init`` replaces this process's SIGTERM handler; ``connect`` puts the one it found back.
* Clocks: every worker stamps with its own monotonic clock. ``measure_offset`` estimates a
  worker's clock minus ours from a few round trips (the fastest one: Cristian's method), with
  its uncertainty (half that round trip), so the driver can put every worker's times on its
  own time line and say how far off they may still be.

Nothing here imports Ray at import time.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from agentload.errors import ConfigError

__all__ = [
    "RAY_INSTALL",
    "ClockOffset",
    "Cluster",
    "connect",
    "measure_offset",
    "require_ray",
]

RAY_INSTALL = "pip install 'agentload[ray]'"
PROBE_TIMEOUT_S = 5.0
"""How long joining ``HOST:PORT`` waits for the cluster to accept a connection."""
MAX_DEFAULT_WORKERS = 64
"""``--workers`` default: one per CPU of the cluster, at most this many."""


def require_ray(flag: str = "--ray") -> ModuleType:
    """The ``ray`` module, or a one-line ``ConfigError`` saying how to install it."""
    try:
        return importlib.import_module("ray")  # typed ModuleType whether or not Ray is installed
    except ImportError as exc:
        raise ConfigError(f"{flag} needs Ray, an optional extra: {RAY_INSTALL} ({exc})") from None


@dataclass(frozen=True)
class Cluster:
    """The Ray cluster a run uses."""

    address: str
    """What ``--ray`` said (``local``, ``auto``, ``HOST:PORT``)."""
    nodes: int
    cpus: int

    def workers(self, requested: int | None, flag: str = "--workers") -> int:
        """``requested`` checked (1..1024), else one worker per CPU (at most
        ``MAX_DEFAULT_WORKERS``)."""
        if requested is None:
            return max(1, min(self.cpus, MAX_DEFAULT_WORKERS))
        if requested < 1 or requested > 1024:
            raise ConfigError(f"{flag} {requested}: must be 1..1024")
        return requested

    def describe(self) -> str:
        return f"Ray cluster {self.address}: {self.nodes} node(s), {self.cpus} CPU(s)"


@contextlib.contextmanager
def connect(address: str | None, flag: str = "--ray") -> Iterator[Cluster]:
    """Ray initialised for ``address`` (see the module docstring); shut down after when this
    call started it."""
    ray = require_ray(flag)
    shown = address or "local"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no phoning home from a benchmark
    started = False
    saved = signal.getsignal(signal.SIGTERM) if _main_thread() else None
    if not ray.is_initialized():
        kw: dict[str, Any] = {
            "logging_level": logging.WARNING,
            "log_to_driver": False,
            "include_dashboard": False,
        }
        if shown == "local":
            kw["num_cpus"] = os.cpu_count() or 1
            # its own token is made and used on this machine: no need to warn about it
            logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
                logging.ERROR
            )
        else:
            if shown != "auto":
                _probe(shown, flag)  # ray.init waits a long time on an address nobody serves
            kw["address"] = shown
            del kw["include_dashboard"]  # a setting of the cluster, not of a driver joining it
        try:
            ray.init(**kw)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError, auth errors ...
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ConfigError(
                f"{flag} {shown}: cannot start or join a Ray cluster "
                f"({type(exc).__name__}: {first or 'no detail'})"
            ) from None
        started = True
        if saved is not None:
            # ray.init replaces SIGTERM's handler (sys.exit, then a C one that aborts): put
            # ours back, so SIGTERM still ends a run cleanly (partial results, trace closed)
            signal.signal(signal.SIGTERM, saved)
    try:
        res = ray.cluster_resources()
        nodes = sum(1 for n in ray.nodes() if n.get("Alive"))
        yield Cluster(address=shown, nodes=max(1, nodes), cpus=int(res.get("CPU", 1)))
    finally:
        if started:
            ray.shutdown()


def _probe(address: str, flag: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """One TCP connection to ``[ray://]HOST:PORT``, or a one-line ``ConfigError``."""
    hostport = address.removeprefix("ray://")
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ConfigError(
            f"{flag} {address}: not a Ray address; give local, auto, HOST:PORT or ray://HOST:PORT"
        )
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as exc:
        raise ConfigError(
            f"{flag} {address}: cannot start or join a Ray cluster (nothing answers at "
            f"{hostport}: {exc.strerror or type(exc).__name__})"
        ) from None


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@dataclass(frozen=True)
class ClockOffset:
    """A worker's clock minus ours, as estimated from round trips."""

    offset_ns: int
    uncertainty_ns: int
    """Half the fastest round trip: the estimate is off by at most this much."""
    rounds: int


def measure_offset(
    remote_clock: Callable[[], int],
    rounds: int = 7,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> ClockOffset:
    """Estimate ``remote clock - clock`` from ``rounds`` calls of ``remote_clock`` (a blocking
    round trip that returns the remote clock): the round trip with the shortest duration
    ``rtt`` gives ``remote - (send + rtt / 2)``, good to within ``rtt / 2``."""
    best: tuple[int, int] | None = None
    for _ in range(max(1, rounds)):
        t1 = clock()
        remote = remote_clock()
        t2 = clock()
        rtt = t2 - t1
        if best is None or rtt < best[0]:
            best = (rtt, remote - (t1 + rtt // 2))
    assert best is not None
    return ClockOffset(offset_ns=best[1], uncertainty_ns=(best[0] + 1) // 2, rounds=rounds)
