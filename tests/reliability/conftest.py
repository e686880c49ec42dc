"""Fixtures of the reliability suite: the fault server (``faultserver.py``) on 127.0.0.1."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from faultserver import FaultPlan, FaultServer


@pytest.fixture
def fault_server() -> Iterator[Callable[..., FaultServer]]:
    """Factory: ``fault_server(chat=["ok", "500"], ...)`` starts one (``port=`` to listen on a
    given port); all stopped at teardown."""
    started: list[FaultServer] = []

    def make(port: int = 0, **plan: object) -> FaultServer:
        srv = FaultServer(FaultPlan(**plan), port=port).start()  # type: ignore[arg-type]
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()
