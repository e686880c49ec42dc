"""`agentload generate --engine dynamo`: the built-in agents' calls name Dynamo's sessions as
replay's do — the orchestrator's the session's id, each sub-agent's its own under the
orchestrator's (``X-Dynamo-Session-ID``, ``X-Dynamo-Parent-Session-ID``). A preset without
session headers sends none; ``--engine`` without ``--endpoint``, or with an agent product that
sends its own requests, is one line and exit 2."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from agent_runs import agentload, one_error_line

from agentload.endpoint.server import SimulatorServer

SESSION, PARENT = "x-dynamo-session-id", "x-dynamo-parent-session-id"


class Watched(SimulatorServer):
    """The simulator, keeping the headers of every chat completion it is sent."""

    seen: list[dict[str, str]]

    def config(self) -> uvicorn.Config:
        cfg = super().config()
        inner, self.seen = cfg.loaded_app, []

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
                self.seen.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
            await inner(scope, receive, send)

        cfg.loaded_app = app
        return cfg


@pytest.fixture
def sim() -> Iterator[Watched]:
    with Watched("instant") as srv:
        yield srv


def _generate(srv: SimulatorServer, out: Path, *extra: str) -> list[str]:
    return ["generate", "-s", "quick", "--endpoint", srv.base_url, "--model", srv.model,
            "--sandbox", "local", "--out", str(out), *extra]  # fmt: skip


def test_each_agent_is_a_dynamo_session_under_its_parent(sim: Watched, tmp_path: Path) -> None:
    proc = agentload(*_generate(sim, tmp_path, "--engine", "dynamo"))
    assert proc.returncode == 0, proc.stderr
    pairs = {(h[SESSION], h.get(PARENT)) for h in sim.seen}
    roots = {sid for sid, parent in pairs if parent is None}
    assert len(roots) == 1, pairs  # one session: one orchestrator
    (root,) = roots
    subs = {sid for sid, parent in pairs if parent is not None}
    assert subs, pairs  # the quick scenario delegates
    assert all(p == root and s.startswith(root + "/") for s, p in pairs if p is not None), pairs


def test_a_preset_without_session_headers_sends_none(sim: Watched, tmp_path: Path) -> None:
    proc = agentload(*_generate(sim, tmp_path, "--engine", "vllm", "-c", "context_target=12000"))
    assert proc.returncode == 0, proc.stderr
    assert sim.seen and not any(SESSION in h or PARENT in h for h in sim.seen)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--engine", "dynamo"], "--engine names the target's engine: give --endpoint too"),
        (["--engine", "nope", "--endpoint", "http://127.0.0.1:9/v1"], "unknown engine 'nope'"),
        (
            ["--engine", "dynamo", "--endpoint", "http://127.0.0.1:9/v1", "--agent", "codex"],
            "an agent product sends its own",
        ),
    ],
)
def test_engine_misuse_is_one_line(tmp_path: Path, argv: list[str], says: str) -> None:
    line = one_error_line(agentload("generate", "-s", "quick", "--out", str(tmp_path), *argv))
    assert says in line, line
