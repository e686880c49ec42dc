"""Bad requests get OpenAI-shaped errors with the documented codes; ``agentload serve``."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentload.endpoint import Profile, SimulatorServer

from .conftest import post

OK = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"messages": OK}, 400, "model"),
        ({"model": "M"}, 400, "messages"),
        ({"model": "M", "messages": "hi"}, 400, "messages"),
        ({"model": "M", "messages": [{"content": "x"}]}, 400, "messages[0].role"),
        ({"model": "M", "messages": [{"role": "robot", "content": "x"}]}, 400, "messages[0].role"),
        ({"model": "M", "messages": [{"role": "user", "content": 3}]}, 400, "messages[0].content"),
        ({"model": "M", "messages": OK, "max_tokens": "ten"}, 400, "max_tokens"),
        ({"model": "M", "messages": OK, "max_tokens": 0}, 400, "max_tokens"),
        ({"model": "M", "messages": OK, "n": 2}, 400, "n"),
        ({"model": "M", "messages": OK, "stream": "yes"}, 400, "stream"),
        ({"model": "M", "messages": OK, "temperature": 9}, 400, "temperature"),
        ({"model": "M", "messages": OK, "tools": [{"type": "function"}]}, 400, "tools[0].function"),
        ({"model": "M", "messages": OK, "tool_choice": "required"}, 400, "tool_choice"),
        ({"model": "nope", "messages": OK}, 404, "model"),
    ],
)
def test_bad_requests(simulator: Any, body: dict[str, Any], status: int, param: str) -> None:
    if body.get("model") == "M":
        body = {**body, "model": simulator.model}
    r = post(simulator.base_url, body)
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["param"] == param
    assert err["message"].startswith(param) or status == 404
    assert err["type"] == "invalid_request_error"


def test_malformed_json_and_unknown_route(simulator: Any) -> None:
    r = httpx.post(simulator.base_url + "/chat/completions", content=b"{not json")
    assert r.status_code == 400 and "malformed JSON" in r.json()["error"]["message"]
    r = httpx.post(simulator.base_url + "/chat/completions", content=b"[1, 2]")
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"
    r = httpx.get(simulator.base_url + "/nothing")
    assert r.status_code == 404 and "error" in r.json()


def test_context_limit_names_both_numbers(make_server: Callable[..., SimulatorServer]) -> None:
    srv = make_server(
        profile=Profile(name="tiny", instant=True, kv_capacity_tokens=256, max_context=256)
    )
    long = [{"role": "user", "content": "word " * 400}]
    r = post(srv.base_url, {"model": srv.model, "messages": long})
    assert r.status_code == 400
    msg = r.json()["error"]["message"]
    assert "256" in msg and str(r.json()["error"]["code"]) == "context_length_exceeded"
    c = openai.OpenAI(base_url=srv.base_url, api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError, match="maximum context length is 256"):
        c.chat.completions.create(model=srv.model, messages=long)  # type: ignore[arg-type]
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="other", messages=OK)  # type: ignore[arg-type]


def test_serve_cli_banner_request_and_ctrl_c() -> None:
    p = subprocess.Popen(
        [sys.executable, "-m", "agentload.cli", "serve", "--port", "0", "--seed", "3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        banner = p.stdout.readline()
        assert banner.startswith("agentload simulator on http://127.0.0.1:")
        assert "model=agentload-sim" in banner and "profile=instant" in banner
        url = banner.split(" on ")[1].split()[0]
        r = httpx.post(url + "/chat/completions", json={"model": "agentload-sim", "messages": OK})
        assert r.status_code == 200
        p.send_signal(signal.SIGINT)
        _out, err = p.communicate(timeout=15)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "Traceback" not in err


def test_serve_cli_bad_profile_exits_2() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "agentload.cli", "serve", "--profile", "nope.yaml"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.strip().startswith("agentload: error: unknown simulator profile")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELDS = st.sampled_from(
    [
        "model",
        "messages",
        "stream",
        "max_tokens",
        "n",
        "tools",
        "tool_choice",
        "stop",
        "seed",
        "ignore_eos",
        "min_tokens",
        "stream_options",
        "temperature",
        "parallel_tool_calls",
    ]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fields=st.dictionaries(_FIELDS, _JSON, max_size=4),
    messages=st.lists(
        st.fixed_dictionaries(
            {"role": st.sampled_from(["user", "assistant", "tool", "system", "x"])},
            optional={"content": _JSON, "tool_calls": _JSON, "tool_call_id": _JSON},
        ),
        max_size=3,
    ),
)
def test_fuzzed_bodies_never_cause_a_server_error(
    simulator: Any, fields: dict[str, Any], messages: list[Any]
) -> None:
    body = {"model": simulator.model, "messages": messages, **fields}
    r = post(simulator.base_url, body)
    assert r.status_code in (200, 400, 404), (body, r.text)
    if r.status_code != 200:
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
