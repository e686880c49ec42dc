"""The simulator with a required API key (like vLLM's --api-key), through the official client."""

from __future__ import annotations

import subprocess
import sys

import httpx
import openai
import pytest

from agentload.endpoint.server import ServeOptions, SimulatorServer
from agentload.errors import ConfigError

KEY = "sk-sim-key-0123456789abcdef"


def test_v1_routes_need_the_key_health_and_metrics_do_not() -> None:
    with SimulatorServer("instant", serving=ServeOptions(api_key=KEY)) as srv:
        ok = openai.OpenAI(base_url=srv.base_url, api_key=KEY, max_retries=0)
        assert [m.id for m in ok.models.list()] == [srv.model]
        r = ok.chat.completions.create(
            model=srv.model, messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert r.usage is not None and r.usage.completion_tokens == 3
        bad = openai.OpenAI(base_url=srv.base_url, api_key="sk-wrong", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as exc:
            bad.chat.completions.create(
                model=srv.model, messages=[{"role": "user", "content": "hi"}], max_tokens=3
            )
        assert exc.value.status_code == 401
        assert exc.value.code == "invalid_api_key"
        root = srv.base_url.removesuffix("/v1")
        assert httpx.get(srv.base_url + "/models").status_code == 401  # no header at all
        assert httpx.get(root + "/health").status_code == 200
        assert httpx.get(root + "/metrics").status_code == 200
    with pytest.raises(ConfigError, match="empty API key"):
        SimulatorServer(serving=ServeOptions(api_key=""))


def test_serve_require_api_key_needs_the_variable() -> None:
    env = {"PATH": "/usr/bin:/bin"}
    proc = subprocess.run(
        [sys.executable, "-m", "agentload", "serve", "--port", "0", "--require-api-key"],
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == (
        "agentload: error: --require-api-key: set AGENTLOAD_API_KEY or OPENAI_API_KEY "
        "to the key clients must send"
    )
