"""The official openai client (sync and async) and LangChain parse everything we send."""

from __future__ import annotations

import json
from typing import Any

import openai
import pytest

from agentload.endpoint.policy.textgen import text_tokens

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city", "days"],
        },
    },
}
CLOCK = {
    "type": "function",
    "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
}
USER = [{"role": "user", "content": "What is the weather like in Lisbon this weekend?"}]


def count(text: str | None) -> int:
    return text_tokens().count(text or "")


def test_sync_non_stream_plain(simulator: Any) -> None:
    c = openai.OpenAI(base_url=simulator.base_url, api_key="x", max_retries=0)
    r = c.chat.completions.create(model=simulator.model, messages=USER)
    msg = r.choices[0].message
    assert msg.role == "assistant" and msg.content and not msg.tool_calls
    assert r.choices[0].finish_reason == "stop"
    assert r.usage is not None
    assert r.usage.completion_tokens == count(msg.content)
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


@pytest.mark.parametrize("choice", ["auto", "required", "named"])
def test_sync_tools_non_stream_and_stream(simulator: Any, choice: str) -> None:
    c = openai.OpenAI(base_url=simulator.base_url, api_key="x", max_retries=0)
    tc: Any = (
        {"type": "function", "function": {"name": "get_time"}} if choice == "named" else choice
    )
    kw: dict[str, Any] = dict(model=simulator.model, messages=USER, tools=[WEATHER, CLOCK])
    r = c.chat.completions.create(**kw, tool_choice=tc)
    calls = r.choices[0].message.tool_calls
    assert calls, "a user turn with tools offered gets a tool call"
    assert r.choices[0].finish_reason == "tool_calls"
    assert len({call.id for call in calls}) == len(calls)
    for call in calls:
        assert call.type == "function"
        args = json.loads(call.function.arguments)
        if call.function.name == "get_weather":
            assert isinstance(args["city"], str) and isinstance(args["days"], int)
    if choice == "named":
        assert [call.function.name for call in calls] == ["get_time"]
    assert r.usage is not None
    assert r.usage.completion_tokens == count(r.choices[0].message.content) + sum(
        count(call.function.arguments) for call in calls
    )
    # The same request streamed: the accumulated deltas give the same tool calls.
    stream = c.chat.completions.create(
        **kw, tool_choice=tc, stream=True, stream_options={"include_usage": True}
    )
    names: dict[int, str] = {}
    args_by: dict[int, str] = {}
    ids: dict[int, str] = {}
    usage = None
    finish = None
    for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            finish = ch.finish_reason or finish
            for d in ch.delta.tool_calls or ():
                if d.id:
                    ids[d.index] = d.id
                if d.function and d.function.name:
                    names[d.index] = d.function.name
                if d.function and d.function.arguments:
                    args_by[d.index] = args_by.get(d.index, "") + d.function.arguments
    assert finish == "tool_calls"
    assert [names[i] for i in sorted(names)] == [call.function.name for call in calls]
    assert [json.loads(args_by[i]) for i in sorted(args_by)] == [
        json.loads(call.function.arguments) for call in calls
    ]
    assert usage is not None and usage.completion_tokens == r.usage.completion_tokens


def test_tool_choice_none_and_tool_result_turn(simulator: Any) -> None:
    c = openai.OpenAI(base_url=simulator.base_url, api_key="x", max_retries=0)
    r = c.chat.completions.create(
        model=simulator.model, messages=USER, tools=[WEATHER], tool_choice="none"
    )
    assert not r.choices[0].message.tool_calls and r.choices[0].message.content
    # After a tool result, "auto" answers in text.
    first = c.chat.completions.create(
        model=simulator.model, messages=USER, tools=[WEATHER], tool_choice="required"
    )
    call = first.choices[0].message.tool_calls[0]  # type: ignore[index]
    follow = [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 C on both days."},
    ]
    r2 = c.chat.completions.create(model=simulator.model, messages=follow, tools=[WEATHER])
    assert r2.choices[0].message.content and not r2.choices[0].message.tool_calls


async def test_async_stream_and_non_stream(simulator: Any) -> None:
    c = openai.AsyncOpenAI(base_url=simulator.base_url, api_key="x", max_retries=0)
    r = await c.chat.completions.create(model=simulator.model, messages=USER, max_tokens=40)
    assert r.usage is not None and r.usage.completion_tokens <= 40
    stream = await c.chat.completions.create(
        model=simulator.model,
        messages=USER,
        stream=True,
        stream_options={"include_usage": True},
    )
    text = ""
    usage = None
    roles = []
    async for chunk in stream:
        if chunk.usage:
            usage = chunk.usage
        for ch in chunk.choices:
            roles.append(ch.delta.role)
            text += ch.delta.content or ""
    assert roles[0] == "assistant"
    assert usage is not None and usage.completion_tokens == count(text) > 0
    tools = await c.chat.completions.create(
        model=simulator.model, messages=USER, tools=[WEATHER], tool_choice="required"
    )
    assert tools.choices[0].message.tool_calls
    await c.close()


def test_langchain_stream_usage(simulator: Any) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(
        base_url=simulator.base_url, api_key="x", model=simulator.model, stream_usage=True
    )
    chunks = list(llm.stream("Summarise why prefix caching matters for agents."))
    total = chunks[0]
    for ch in chunks[1:]:
        total = total + ch
    assert total.usage_metadata is not None
    assert total.usage_metadata["output_tokens"] == count(str(total.content)) > 0
    assert total.usage_metadata["input_tokens"] > 0
    bound = llm.bind_tools([WEATHER], tool_choice="get_weather")
    msg = bound.invoke("weather in Oslo?")
    assert msg.tool_calls and msg.tool_calls[0]["name"] == "get_weather"
    assert msg.usage_metadata is not None and msg.usage_metadata["output_tokens"] > 0
