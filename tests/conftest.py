"""Shared fixtures: the network guard, Docker availability, the simulated endpoint, the real engine."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))  # ready_file
from ready_file import skip_or_fail, wait_for_ready_file

# Property tests are deterministic: the same examples on every run and machine (a failure found
# once is found again, and no run fails on an example the previous one never tried).
settings.register_profile("agentload", derandomize=True, database=None)
settings.load_profile("agentload")


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


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A docker SDK client for a daemon that answers; skips (or fails in CI) without one."""
    from agentload.errors import DockerUnavailableError
    from agentload.sandboxes.docker_host import connect_docker  # provided by sandboxes/

    try:
        client = connect_docker()
    except DockerUnavailableError as exc:
        skip_or_fail(f"no Docker daemon: {exc}", "AGENTLOAD_REQUIRE_DOCKER")
    yield client
    client.close()


@pytest.fixture(scope="session")
def simulator() -> Iterator[Any]:
    """The built-in simulated endpoint (instant profile) on a free 127.0.0.1 port, per session."""
    from agentload.endpoint import SimulatorServer

    with SimulatorServer(profile="instant", model="agentload-sim", seed=0) as srv:
        yield srv


@dataclass(frozen=True)
class Engine:
    """A real llama.cpp ``llama-server`` (``scripts/llama-server.sh``): its base URL
    (``.../v1``), the model name it answers to, its context size and its slots."""

    url: str
    model: str
    ctx: int
    slots: int

    @property
    def root(self) -> str:
        """The server's root URL (``/health``, ``/metrics``, ``/props``)."""
        return self.url.removesuffix("/v1")


SERIAL_GROUPS = ("engine", "ray", "aiperf", "dynamo")
"""Markers whose tests share one machine-wide resource (the one engine, Ray clusters on this
host, AIPerf's CPU and memory, Dynamo's processes): under pytest-xdist (pyproject's ``-n 2
--dist loadgroup``) each group runs on one worker, one test at a time."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Dynamo tests, then AIPerf tests, then engine tests, run last: CI installs Dynamo and
    AIPerf and builds the engine in the background while the other tests run. Tests of a
    ``SERIAL_GROUPS`` marker share a worker.

    First of the hooks: pytest-xdist's worker reads the group marks in its own hook of this name
    (registered after this file, so called before it unless this one goes first)."""
    items.sort(
        key=lambda item: (
            item.get_closest_marker("engine") is not None,
            item.get_closest_marker("aiperf") is not None,
            item.get_closest_marker("dynamo") is not None,
        )
    )
    for item in items:
        group = next((g for g in SERIAL_GROUPS if item.get_closest_marker(g)), None)
        if group is None and _shares_fixtures(item):
            group = item.nodeid.split("::", 1)[0]
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


def _shares_fixtures(item: pytest.Item) -> bool:
    """Whether a test uses a module- or class-scoped fixture: its module's tests then share a
    worker, so that the fixture (often a whole generate or eval run) is built once."""
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else ()
    return any(fd.scope in ("module", "class", "package") for fds in defs for fd in fds)


def _wait_for_engine_start() -> str | None:
    """When the engine is still being built and started in the background (CI:
    AGENTLOAD_ENGINE_READY_FILE names the file its exit code will be written to), wait for it,
    bounded by AGENTLOAD_ENGINE_WAIT_S (default 3000 s). ``None`` when it started, else why not."""
    return wait_for_ready_file(
        "AGENTLOAD_ENGINE_READY_FILE", "AGENTLOAD_ENGINE_WAIT_S", 3000,
        "the engine's build and start", "scripts/llama-server.sh start", "start.log",
    )  # fmt: skip


@pytest.fixture(scope="session")
def engine() -> Engine:
    """The real engine that ``scripts/llama-server.sh start`` runs (AGENTLOAD_ENGINE_URL, default
    http://127.0.0.1:18500/v1); skips without one, fails instead under AGENTLOAD_REQUIRE_ENGINE=1.
    Its context size and slot count are read from the server's own ``/props``."""
    url = os.environ.get("AGENTLOAD_ENGINE_URL", "http://127.0.0.1:18500/v1").rstrip("/")
    root = url.removesuffix("/v1")
    why = _wait_for_engine_start()
    props: dict[str, Any] = {}
    if why is None:
        try:
            with urllib.request.urlopen(f"{root}/props", timeout=10) as resp:
                props = json.load(resp)
        except (OSError, ValueError) as exc:
            why = f"no llama-server answers at {root} ({exc}); start one: scripts/llama-server.sh start"
    if why is not None:
        skip_or_fail(why, "AGENTLOAD_REQUIRE_ENGINE")
    settings = props.get("default_generation_settings") or {}
    return Engine(
        url=url,
        model=os.environ.get("AGENTLOAD_ENGINE_MODEL", "gemma"),
        ctx=int(settings.get("n_ctx") or props.get("n_ctx") or 0),
        slots=int(props.get("total_slots") or 1),
    )


@pytest.fixture(scope="session")
def ray_installed() -> None:
    """Skips without Ray (fails instead under AGENTLOAD_REQUIRE_RAY=1): for a test that needs
    the package but not a cluster."""
    import importlib.util

    if importlib.util.find_spec("ray") is None:
        skip_or_fail("Ray is not installed: pip install -e '.[ray]'", "AGENTLOAD_REQUIRE_RAY")


@dataclass
class RayCluster:
    """A real Ray cluster on this machine (``ray start --head``), token-authenticated."""

    address: str
    env: dict[str, str]
    """What a driver needs in its environment to join it (token mode, token file)."""
    pid: int

    def subprocess_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """``ray start --head --block`` on 127.0.0.1 with 2 CPUs, a temp dir and its own auth token,
    for the whole session; killed (its whole process group) after. Skips without Ray, fails
    instead under AGENTLOAD_REQUIRE_RAY=1. The test process's environment gets the token
    settings, so ``agentload ... --ray ADDRESS`` in-process or in a subprocess can join."""
    import importlib.util
    import secrets
    import shutil
    import signal
    import subprocess
    import sys
    import tempfile

    ray_bin = Path(sys.executable).with_name("ray")
    # not imported here: Ray reads its auth settings from the environment when first imported
    if importlib.util.find_spec("ray") is None or not ray_bin.exists():
        skip_or_fail("Ray is not installed: pip install -e '.[ray]'", "AGENTLOAD_REQUIRE_RAY")
    tmp = Path(tempfile.mkdtemp(prefix="alray-", dir="/tmp"))
    token = tmp / "token"
    token.write_text(secrets.token_hex(32))
    env = {
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = (tmp / "start.log").open("wb")
    proc = subprocess.Popen(
        [
            str(ray_bin),
            "start",
            "--head",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--object-store-memory=300000000",
            f"--temp-dir={tmp / 'r'}",
            "--include-dashboard=false",
            "--disable-usage-stats",
            "--block",
        ],
        env={**os.environ, **env},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    mp = pytest.MonkeyPatch()
    try:
        deadline = time.monotonic() + 90
        while b"Ray runtime started" not in (tmp / "start.log").read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                tail = (tmp / "start.log").read_text(errors="replace").strip().splitlines()[-3:]
                pytest.fail(f"ray start --head did not come up: {' | '.join(tail)}")
            time.sleep(0.5)
        for k, v in env.items():
            mp.setenv(k, v)
        yield RayCluster(address=f"127.0.0.1:{port}", env=env, pid=proc.pid)
    finally:
        mp.undo()
        import contextlib

        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # SIGTERM would drain for 30 s
        proc.wait(timeout=30)
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A private CA (trustme) and a server certificate for 127.0.0.1 / localhost signed by it:
    ``ca``, ``cert`` (the chain) and ``key`` PEM files. Clients trust it through SSL_CERT_FILE."""
    import trustme

    d = tmp_path_factory.mktemp("tls")
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    files = {"ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key"}
    ca.cert_pem.write_to_path(str(files["ca"]))
    cert.private_key_pem.write_to_path(str(files["key"]))
    with files["cert"].open("wb") as f:
        for blob in cert.cert_chain_pems:
            f.write(blob.bytes())
    return files
