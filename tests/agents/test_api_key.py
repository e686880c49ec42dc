"""`agentload generate` against an endpoint that requires a key: a missing or wrong key is one
line before any session starts; the right key (from the environment) works and is never written."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import zstandard
from agent_runs import agentload, one_error_line

from agentload.endpoint.server import ServeOptions, SimulatorServer

KEY = "sk-gen-key-0123456789abcdef"


@pytest.fixture(scope="module")
def keyed() -> Iterator[SimulatorServer]:
    with SimulatorServer("instant", serving=ServeOptions(api_key=KEY)) as srv:
        yield srv


def _generate(srv: SimulatorServer, out: Path, *extra: str) -> list[str]:
    return ["generate", "-s", "quick", "--endpoint", srv.base_url, "--model", srv.model,
            "--sandbox", "local", "--out", str(out), *extra]  # fmt: skip


@pytest.mark.parametrize(("key", "says"), [(None, "not set"), ("sk-wrong-key-000000", "; set)")])
def test_refused_key_is_one_line_before_any_session(
    keyed: SimulatorServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    key: str | None,
    says: str,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    if key is None:
        monkeypatch.delenv("AGENTLOAD_API_KEY", raising=False)
    else:
        monkeypatch.setenv("AGENTLOAD_API_KEY", key)
    line = one_error_line(agentload(*_generate(keyed, tmp_path)))
    assert f"{keyed.base_url}/models: HTTP 401: Incorrect API key provided" in line, line
    assert "AGENTLOAD_API_KEY or OPENAI_API_KEY" in line and says in line, line
    assert not list(tmp_path.iterdir())  # no trace was started


def test_the_key_from_the_environment_works_and_is_never_written(
    keyed: SimulatorServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTLOAD_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    proc = agentload(*_generate(keyed, tmp_path, "-c", "context_target=12000"))
    assert proc.returncode == 0, proc.stderr
    [trace] = list(tmp_path.glob("*.zst"))
    with trace.open("rb") as f:
        text = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True).read()
    assert b'"type":"llm_call"' in text and KEY.encode() not in text
    assert KEY not in proc.stdout + proc.stderr
