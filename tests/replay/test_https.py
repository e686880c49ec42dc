"""Replay and the agents' client against the simulator served over HTTPS (a private CA from
trustme, trusted through SSL_CERT_FILE), and the TLS errors users meet."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from replay_helpers import run_cli

from agentload.agents.llm import ChatClient
from agentload.endpoint.server import ServeOptions, SimulatorServer
from agentload.errors import ConfigError


@pytest.fixture
def tls_simulator(tls_files: dict[str, Path]) -> Iterator[SimulatorServer]:
    with SimulatorServer(
        "instant",
        serving=ServeOptions(ssl_certfile=tls_files["cert"], ssl_keyfile=tls_files["key"]),
    ) as srv:
        yield srv


def test_replay_over_https_with_a_private_ca(
    tls_simulator: SimulatorServer,
    tls_files: dict[str, Path],
    trace_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert tls_simulator.base_url.startswith("https://127.0.0.1:")
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files["ca"]))
    out = tmp_path / "out"
    argv = ["replay", str(trace_path), "--endpoint", tls_simulator.base_url]
    argv += ["--model", tls_simulator.model, "--start-at", "zero", "--out", str(out)]
    assert run_cli(argv) == 0
    res = orjson.loads((out / "results.json").read_bytes())
    reqs = res["points"][0]["requests"]
    assert len(reqs) == 7 and all(r["status"] == 200 and r["error"] is None for r in reqs)
    assert all(r["completion_tokens"] == r["expected_tokens"] for r in reqs)
    assert all(r["ttft_ns"] > 0 for r in reqs)


def test_untrusted_certificate_is_one_line_before_any_load(
    tls_simulator: SimulatorServer,
    trace_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    argv = ["replay", str(trace_path), "--endpoint", tls_simulator.base_url]
    assert run_cli([*argv, "--model", tls_simulator.model]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err
    assert "CERTIFICATE_VERIFY_FAILED" in err and "SSL_CERT_FILE" in err, err
    assert tls_simulator.simulator.engine.stats.prompt_tokens == 0  # no chat request was sent


async def test_the_agents_client_streams_over_https(
    tls_simulator: SimulatorServer, tls_files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_files["ca"]))
    client = ChatClient(tls_simulator.base_url, model=tls_simulator.model)
    try:
        r = await client.complete(
            {
                "model": tls_simulator.model,
                "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 5,
            }
        )
    finally:
        await client.aclose()
    assert r.completion_tokens == 5 and r.prompt_tokens > 0
    assert r.timings.first_token_ns is not None


def test_serving_tls_needs_a_readable_certificate_and_key(
    tls_files: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError, match="both a certificate file and a key file"):
        SimulatorServer(serving=ServeOptions(ssl_certfile=tls_files["cert"]))
    with pytest.raises(ConfigError, match="key file not found"):
        SimulatorServer(
            serving=ServeOptions(ssl_certfile=tls_files["cert"], ssl_keyfile=tmp_path / "nope.key")
        )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    argv = ["serve", "--port", "0", "--ssl-certfile", str(garbage)]
    assert run_cli([*argv, "--ssl-keyfile", str(tls_files["key"])]) == 2
    err = capsys.readouterr().err.strip()
    assert "garbage.pem" in err and "TLS certificate" in err and err.count("\n") == 0, err
