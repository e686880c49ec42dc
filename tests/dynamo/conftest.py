"""The real NVIDIA Dynamo (``scripts/dynamo.sh``): its frontend, KV router and mocker workers on
127.0.0.1, one deployment per test that asks, stopped after it. Skips without the install, fails
instead under AGENTLOAD_REQUIRE_DYNAMO=1 (CI installs it in the background and names its ready
file in AGENTLOAD_DYNAMO_READY_FILE)."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1]))
from ready_file import skip_or_fail, wait_for_ready_file

REPO = Path(__file__).parents[2]
SCRIPT = REPO / "scripts" / "dynamo.sh"


@dataclass(frozen=True)
class Dynamo:
    """One running deployment: its OpenAI base URL, its model and how it was started."""

    url: str
    model: str
    port: int
    args: tuple[str, ...]
    metrics: str
    """The frontend's /metrics and each worker process's, comma-separated."""


def _run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


@pytest.fixture(scope="session")
def dynamo_installed() -> None:
    why = wait_for_ready_file(
        "AGENTLOAD_DYNAMO_READY_FILE", "AGENTLOAD_DYNAMO_WAIT_S", 900,
        "the Dynamo install", "scripts/dynamo.sh install", "install.err",
    )  # fmt: skip
    if why is None:
        done = _run("path", timeout=60)
        if done.returncode != 0:
            why = (done.stderr.strip().splitlines() or ["scripts/dynamo.sh path failed"])[-1]
    if why is not None:
        skip_or_fail(why, "AGENTLOAD_REQUIRE_DYNAMO")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dynamo(dynamo_installed: None) -> Iterator[Callable[..., Dynamo]]:
    """``dynamo("--workers", "2", "--router-mode", "kv")``: a deployment started now (each on
    a port of its own), every one stopped at the test's end."""
    started: list[int] = []

    def start(*args: str) -> Dynamo:
        port = _free_port()
        started.append(port)
        done = _run("start", "--port", str(port), *args)
        if done.returncode != 0:
            pytest.fail(f"scripts/dynamo.sh start {' '.join(args)}: {done.stderr.strip()[-800:]}")
        env = dict(kv.split("=", 1) for kv in done.stdout.split()[1:])
        return Dynamo(
            env["AGENTLOAD_DYNAMO_URL"],
            env["AGENTLOAD_DYNAMO_MODEL"],
            port,
            args,
            env["AGENTLOAD_DYNAMO_METRICS"],
        )

    yield start
    for port in started:
        _run("stop", "--port", str(port), timeout=60)
