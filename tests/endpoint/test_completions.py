"""``POST /v1/completions``: one text prompt, counted as plain text (what generate calibrates on)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import openai

from agentload.endpoint import Profile, SimulatorServer
from agentload.tokenizer import ChatTokenCounter

TEXT = "def parse(header):\n    return header.split(':', 1)\n" * 20


def _post(srv: Any, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(srv.base_url + "/completions", json=body, timeout=30)


def test_prompt_tokens_are_the_texts_own_count(simulator: Any) -> None:
    with openai.OpenAI(base_url=simulator.base_url, api_key="x", max_retries=0) as client:
        r = client.completions.create(model=simulator.model, prompt=TEXT, max_tokens=5)
    assert r.usage is not None
    assert r.usage.prompt_tokens == ChatTokenCounter().count_text(TEXT)  # no chat framing
    assert r.usage.completion_tokens == 5 and r.choices[0].finish_reason == "length"
    assert ChatTokenCounter().count_text(r.choices[0].text) == 5
    one = _post(simulator, {"model": simulator.model, "prompt": [TEXT], "max_tokens": 1})
    assert one.json()["usage"]["prompt_tokens"] == r.usage.prompt_tokens


def test_bad_requests_are_openai_errors(
    simulator: Any, make_server: Callable[..., SimulatorServer]
) -> None:
    m = simulator.model
    cases = [
        ({"model": m, "prompt": TEXT, "stream": True}, 400, "stream"),
        ({"model": m}, 400, "prompt"),
        ({"model": m, "prompt": 3}, 400, "prompt"),
        ({"model": m, "prompt": TEXT, "max_tokens": 0}, 400, "max_tokens"),
        ({"model": "other", "prompt": TEXT}, 404, "model"),
    ]
    for body, status, param in cases:
        r = _post(simulator, body)
        assert r.status_code == status, (body, r.text)
        assert r.json()["error"]["param"] == param
    small = make_server(profile=Profile(name="s", instant=True, max_context=64))
    r = _post(small, {"model": small.model, "prompt": TEXT, "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
