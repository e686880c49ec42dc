"""Fixtures of the replay tests: hand-built traces and small real HTTP chat servers."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from replay_servers import Behaviour, ChatServer
from replay_traces import Shape, agentic_trace


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    """A well-behaved streaming chat server on 127.0.0.1 (records every body it receives)."""
    with ChatServer() as srv:
        yield srv


@pytest.fixture
def make_server() -> Iterator[object]:
    """Factory for servers with a given ``Behaviour``; all stopped at teardown."""
    started: list[ChatServer] = []

    def make(behaviour: Behaviour) -> ChatServer:
        srv = ChatServer(behaviour=behaviour).start()
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def trace_path(tmp_path: Path) -> Path:
    """One session (orchestrator + two parallel sub-agents) with short known gaps."""
    return agentic_trace(
        tmp_path / "t.agentload.jsonl.zst",
        sessions=1,
        shape=Shape(tool_gap_s=0.15, child_gap_s=0.1, post_gap_s=0.08, spawn_gap_s=0.02),
    )


@pytest.fixture
def fast_trace(tmp_path: Path) -> Path:
    """Two sessions with tiny gaps, for runs that need many sessions quickly."""
    return agentic_trace(
        tmp_path / "fast.agentload.jsonl",
        sessions=2,
        shape=Shape(tool_gap_s=0.02, child_gap_s=0.02, post_gap_s=0.01),
    )
