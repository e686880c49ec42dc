"""Byte-level SSE framing, exact lengths with max_tokens + ignore_eos, usage = our own count."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from agentload.endpoint.policy.textgen import text_tokens
from agentload.tokenizer import ChatTokenCounter

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "lookup",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}},
                "required": ["query"],
            },
        },
    }
]


def _events(raw: bytes) -> list[bytes]:
    assert raw.endswith(b"\n\n")
    return raw[:-2].split(b"\n\n")


def test_raw_sse_framing(simulator: Any) -> None:
    body = {
        "model": simulator.model,
        "messages": [{"role": "user", "content": "Find the lookup table for ports."}],
        "tools": TOOLS,
        "tool_choice": "required",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", simulator.base_url + "/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        raw = b"".join(r.iter_raw())
    events = _events(raw)
    assert all(e.startswith(b"data: ") and b"\n" not in e for e in events)
    assert events[-1] == b"data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    ids = {c["id"] for c in chunks}
    assert len(ids) == 1 and next(iter(ids)).startswith("chatcmpl-")
    assert all(
        c["object"] == "chat.completion.chunk" and c["model"] == simulator.model for c in chunks
    )
    assert all("usage" in c for c in chunks)  # include_usage: null on every chunk but the last
    first, *middle, finish, usage = chunks
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert first["usage"] is None
    assert finish["choices"][0] == {
        "index": 0,
        "delta": {},
        "logprobs": None,
        "finish_reason": "tool_calls",
    }
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] > 0
    deltas = [c["choices"][0]["delta"] for c in middle]
    calls = [d for d in deltas if "tool_calls" in d]
    head = calls[0]["tool_calls"][0]
    assert head["index"] == 0 and head["id"].startswith("call_") and head["type"] == "function"
    assert head["function"] == {"name": "lookup", "arguments": ""}
    frags = [d["tool_calls"][0]["function"]["arguments"] for d in calls[1:]]
    assert all(set(d["tool_calls"][0]) == {"index", "function"} for d in calls[1:])
    args = json.loads("".join(frags))
    assert isinstance(args["query"], str)
    content = "".join(d.get("content", "") for d in deltas if "content" in d)
    # One event per token: the fragment count equals the token counts.
    tok = text_tokens()
    assert len(frags) == tok.count("".join(frags))
    assert usage["usage"]["completion_tokens"] == tok.count(content) + tok.count("".join(frags))
    assert all(c["choices"][0]["finish_reason"] is None for c in [first, *middle])


@pytest.mark.parametrize("n", [1, 7, 16, 100, 1000])
@pytest.mark.parametrize("stream", [False, True])
def test_exact_length_with_ignore_eos(simulator: Any, n: int, stream: bool) -> None:
    body = {
        "model": simulator.model,
        "messages": [{"role": "user", "content": "Write a long essay about schedulers."}],
        "max_tokens": n,
        "ignore_eos": True,
        "stream": stream,
        "stream_options": {"include_usage": True} if stream else None,
        "tools": TOOLS,
    }
    r = httpx.post(simulator.base_url + "/chat/completions", json=body, timeout=30)
    assert r.status_code == 200
    if stream:
        chunks = [json.loads(e[6:]) for e in _events(r.content)[:-1]]
        text = "".join(
            c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
        )
        usage = chunks[-1]["usage"]
        finish = chunks[-2]["choices"][0]["finish_reason"]
        assert (
            sum(1 for c in chunks if c["choices"] and c["choices"][0]["delta"].get("content")) == n
        )
    else:
        data = r.json()
        text = data["choices"][0]["message"]["content"]
        usage = data["usage"]
        finish = data["choices"][0]["finish_reason"]
    assert finish == "length"
    assert usage["completion_tokens"] == n
    assert text_tokens().count(text) == n  # an independent count of what was sent


def test_max_tokens_truncates_and_min_tokens_pads(simulator: Any) -> None:
    msgs = [{"role": "user", "content": "Describe a compiler pipeline in detail, step by step."}]
    r = httpx.post(
        simulator.base_url + "/chat/completions",
        json={"model": simulator.model, "messages": msgs, "max_tokens": 5},
    ).json()
    assert r["usage"]["completion_tokens"] <= 5
    r = httpx.post(
        simulator.base_url + "/chat/completions",
        json={"model": simulator.model, "messages": msgs, "min_tokens": 900, "max_tokens": 950},
    ).json()
    assert 900 <= r["usage"]["completion_tokens"] <= 950
    assert r["usage"]["completion_tokens"] == text_tokens().count(
        r["choices"][0]["message"]["content"]
    )


def test_prompt_tokens_follow_the_framing_convention(simulator: Any) -> None:
    msgs = [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Name three sorting algorithms."},
    ]
    r = httpx.post(
        simulator.base_url + "/chat/completions",
        json={"model": simulator.model, "messages": msgs, "tools": TOOLS, "tool_choice": "none"},
    ).json()
    assert r["usage"]["prompt_tokens"] == ChatTokenCounter().count_prompt(msgs, TOOLS)


def test_extras_and_sampling_params_are_accepted(simulator: Any) -> None:
    body = {
        "model": simulator.model,
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "top_p": 0.9,
        "seed": 7,
        "n": 1,
        "stop": ["\n\n"],
        "top_k": 20,
        "repetition_penalty": 1.1,
        "min_p": 0.05,
        "presence_penalty": 0.0,
        "logit_bias": {},
        "user": "me",
        "parallel_tool_calls": True,
    }
    r = httpx.post(simulator.base_url + "/chat/completions", json=body)
    assert r.status_code == 200, r.text
    assert "\n\n" not in r.json()["choices"][0]["message"]["content"]
