"""Fixtures of the simulator's tests: servers with custom profiles, HTTP helpers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agentload.endpoint import Profile, SimulatorServer


@pytest.fixture
def make_server() -> Iterator[Callable[..., SimulatorServer]]:
    """Start extra simulators (stopped at teardown): ``make_server(profile=..., seed=...)``."""
    started: list[SimulatorServer] = []

    def make(**kwargs: Any) -> SimulatorServer:
        srv = SimulatorServer(**kwargs).start()
        started.append(srv)
        return srv

    yield make
    for s in started:
        s.stop()


@pytest.fixture
def small_kv() -> Profile:
    """An instant profile whose KV cache holds only 4096 tokens (256 blocks)."""
    return Profile(
        name="small-kv", instant=True, kv_capacity_tokens=4096, max_context=4096, max_batch=64
    )


def post(base_url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(base_url + "/chat/completions", json=body, timeout=30)


def root(base_url: str) -> str:
    return base_url[: -len("/v1")]
