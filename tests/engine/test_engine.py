"""The real engine itself: llama.cpp's llama-server with our Gemma 3 tool template
(scripts/llama-server.sh). These pin what the rest of the engine tests rely on: tools are
offered and parsed (without a tool-capable template llama.cpp silently ignores them), usage and
cached tokens are reported, and a prompt above the context is an overflow to generate's client
and to replay's client alike (one classifier, agentload.errortext)."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import orjson
import pytest

from agentload import contract
from agentload.agents.limits import SessionEnd
from agentload.agents.llm import ChatClient
from agentload.client.stream import StreamClient

pytestmark = pytest.mark.engine


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=120) as resp:
        out: dict[str, Any] = json.load(resp)
    return out


def _json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def test_tools_are_offered_and_calls_parsed(engine: Any) -> None:
    """With our template and `--jinja`, tool calls come back parsed into `tool_calls`, at
    least one with arguments that are a JSON object (the tiny model also emits calls cut off
    at max_tokens, with invalid JSON: what generate's harness must survive)."""
    body = {
        "model": engine.model,
        "messages": [
            {"role": "system", "content": "You are a coding agent. Use the tools."},
            {"role": "user", "content": "Find where the function parse_date is defined."},
        ],
        "tools": contract.tool_schemas(("search_code", "read_file")),
        "tool_choice": "required",
        "max_tokens": 160,
        "temperature": 0,
    }
    out = _post(engine.url, body)
    msg = out["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    assert calls, f"no tool call parsed: {msg!r}"
    assert {c["function"]["name"] for c in calls} <= {"search_code", "read_file"}
    assert any(_json_object(c["function"]["arguments"]) for c in calls), calls
    assert out["usage"]["prompt_tokens"] > 100  # the tool definitions are in the prompt


def test_history_with_tool_calls_renders(engine: Any) -> None:
    """A conversation carrying an assistant tool call and its tool result goes through the
    template and gets an answer (the shape every agent's second call has)."""
    body = {
        "model": engine.model,
        "messages": [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": "Read README.md."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read_file", "arguments": '{"path": "README.md"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "# demo\nA demo project."},
        ],
        "tools": contract.tool_schemas(("read_file",)),
        "max_tokens": 16,
        "temperature": 0,
    }
    out = _post(engine.url, body)
    assert out["choices"][0]["finish_reason"] in ("stop", "length", "tool_calls")
    assert out["usage"]["completion_tokens"] >= 1


def test_prefix_reuse_is_reported_as_cached_tokens(engine: Any) -> None:
    """The second of two requests sharing a long prefix reports cached prompt tokens."""
    text = " ".join(f"line {i}: the quick brown fox jumps over the lazy dog." for i in range(60))
    first = [{"role": "user", "content": text + "\nSummarise."}]
    base = {"model": engine.model, "max_tokens": 4, "temperature": 0}
    _post(engine.url, {**base, "messages": first})
    again = _post(
        engine.url,
        {
            **base,
            "messages": [
                *first,
                {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "Again."},
            ],
        },
    )
    cached = (again["usage"].get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    assert cached >= 0.8 * (again["usage"]["prompt_tokens"] - 40), again["usage"]


def _overflow_messages(engine: Any) -> list[dict[str, str]]:
    # Well above the context in any tokenizer: ~2 tokens per word, 1.5x the context in words.
    words = " ".join(f"w{i % 997}" for i in range(int(engine.ctx * 1.5)))
    return [{"role": "user", "content": words}]


async def test_overflow_ends_a_generate_session_as_context_limit(engine: Any) -> None:
    client = ChatClient(engine.url, model=engine.model, retries=0, call_timeout_s=120)
    try:
        with pytest.raises(SessionEnd) as info:
            await client.complete(
                {"model": engine.model, "messages": _overflow_messages(engine), "max_tokens": 4}
            )
    finally:
        await client.aclose()
    assert info.value.reason == "context_limit", info.value


async def test_overflow_is_a_context_overflow_to_replay(engine: Any) -> None:
    client = StreamClient(engine.url, timeout_s=120)
    try:
        body = {
            "model": engine.model,
            "messages": _overflow_messages(engine),
            "max_tokens": 4,
            "stream": True,
        }
        out = await client.chat(orjson.dumps(body))
    finally:
        await client.aclose()
    assert out.error_kind == "context_overflow", (out.status, out.error)
