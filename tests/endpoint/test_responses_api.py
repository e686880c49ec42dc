"""``POST /v1/responses``: the real ``openai`` SDK and the OpenAI Agents SDK against the simulator."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import agents
import httpx
import openai
import pytest

from agentload.endpoint.policy.textgen import text_tokens
from agentload.endpoint.server.responses_api import ResponseIds, render_response_stream
from agentload.endpoint.server.sse import Reply
from agentload.trace.capture import assistant_message
from agentload.wire import reply_from_json, stream_reader, to_chat

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    },
    "strict": True,
}
QUESTION = "What is the weather like in Lisbon this weekend?"


@pytest.fixture
def c(simulator: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=simulator.base_url, api_key="x", max_retries=0) as client:
        yield client


def plain(items: str | list[Any]) -> str | list[Any]:
    """Input items as JSON (the SDK's output models dumped as it sends them)."""
    if isinstance(items, str):
        return items
    return [
        i.model_dump(mode="json", exclude_unset=True) if hasattr(i, "model_dump") else i
        for i in items
    ]


def count(text: str) -> int:
    return text_tokens().count(text)


def summary(output: list[Any]) -> list[tuple[Any, ...]]:
    """Output items without their per-response ids."""
    out: list[tuple[Any, ...]] = []
    for o in output:
        if o.type == "message":
            out.append(("message", o.role, o.status, [(c.type, c.text) for c in o.content]))
        else:
            out.append((o.type, o.call_id, o.name, o.arguments, o.status))
    return out


def first_turn(c: openai.OpenAI, model: str) -> tuple[Any, list[Any]]:
    """A user question with a function tool offered: the answer and the next turn's input."""
    r = c.responses.create(model=model, instructions="Be brief.", input=QUESTION, tools=[WEATHER])
    calls = [o for o in r.output if o.type == "function_call"]
    nxt: list[Any] = [{"role": "user", "content": QUESTION}, *r.output]
    nxt += [
        {"type": "function_call_output", "call_id": o.call_id, "output": "sunny"} for o in calls
    ]
    return r, nxt


def test_function_call_then_text_answer(simulator: Any, c: openai.OpenAI) -> None:
    r, nxt = first_turn(c, simulator.model)
    assert r.id.startswith("resp_") and r.object == "response" and r.status == "completed"
    calls = [o for o in r.output if o.type == "function_call"]
    assert calls, "a user turn with a tool offered gets a function call"
    for o in calls:
        assert o.id.startswith("fc_") and o.call_id.startswith("call_")
        assert o.name == "get_weather" and set(json.loads(o.arguments)) == {"city"}
    assert r.usage is not None
    want = count(r.output_text) + sum(count(o.arguments) for o in calls)
    assert r.usage.output_tokens == want
    assert r.usage.total_tokens == r.usage.input_tokens + r.usage.output_tokens
    assert r.usage.output_tokens_details.reasoning_tokens == 0

    r2 = c.responses.create(model=simulator.model, input=nxt, tools=[WEATHER])
    assert r2.status == "completed" and r2.output_text
    assert [o.type for o in r2.output] == ["message"]
    assert r2.usage is not None and r2.usage.input_tokens > r.usage.input_tokens


def test_answer_read_equals_the_next_requests_history(simulator: Any, c: openai.OpenAI) -> None:
    """The recording proxy's invariant, on the simulator's real answer as the SDK sends it back."""
    r, nxt = first_turn(c, simulator.model)
    read = reply_from_json("responses", r.model_dump(mode="json"))
    sent = c.responses.with_raw_response.create(model=simulator.model, input=nxt, tools=[WEATHER])
    body = json.loads(sent.http_request.content)
    history = to_chat("responses", body)["messages"]
    assert history[1] == assistant_message(read.content, read.tool_calls)
    assert history[1]["tool_calls"], "the first turn called the tool"


def test_stream_gives_the_same_output_as_non_streamed(simulator: Any, c: openai.OpenAI) -> None:
    _, nxt = first_turn(c, simulator.model)
    for inp in (QUESTION, nxt):
        kw: dict[str, Any] = dict(model=simulator.model, input=inp, tools=[WEATHER])
        if inp == QUESTION:
            kw["instructions"] = "Be brief."
        want = c.responses.create(**kw)
        with c.responses.stream(**kw) as s:
            deltas = "".join(e.delta for e in s if e.type == "response.output_text.delta")
            got = s.get_final_response()
        assert summary(got.output) == summary(want.output)
        assert deltas == want.output_text
        assert got.usage is not None and want.usage is not None
        assert got.usage.input_tokens == want.usage.input_tokens
        assert got.usage.output_tokens == want.usage.output_tokens


def test_raw_events_typed_and_numbered_and_read_by_the_wire_stream(
    simulator: Any, c: openai.OpenAI
) -> None:
    _, nxt = first_turn(c, simulator.model)
    for inp in (QUESTION, nxt):
        kinds = []
        for n, e in enumerate(
            c.responses.create(model=simulator.model, input=inp, tools=[WEATHER], stream=True)
        ):
            assert e.sequence_number == n
            kinds.append(e.type)
        assert kinds[:2] == ["response.created", "response.in_progress"]
        assert kinds[-1] == "response.completed"
        assert kinds.count("response.output_item.added") == kinds.count("response.output_item.done")

        body = {"model": simulator.model, "input": plain(inp), "tools": [WEATHER]}
        whole = httpx.post(f"{simulator.base_url}/responses", json=body, timeout=30).json()
        s = stream_reader("responses")
        with httpx.stream(
            "POST", f"{simulator.base_url}/responses", json={**body, "stream": True}, timeout=30
        ) as resp:
            assert resp.status_code == 200
            for chunk in resp.iter_raw(37):
                s.feed(chunk)
        got, want = s.reply(), reply_from_json("responses", whole)
        assert s.done and (got.content, got.tool_calls) == (want.content, want.tool_calls)
        assert got.finish_reason == want.finish_reason and got.usage == want.usage


def test_max_output_tokens_is_incomplete(simulator: Any, c: openai.OpenAI) -> None:
    r = c.responses.create(
        model=simulator.model, input="Tell me a long story.", max_output_tokens=3
    )
    assert r.status == "incomplete" and r.incomplete_details is not None
    assert r.incomplete_details.reason == "max_output_tokens"
    assert r.usage is not None and r.usage.output_tokens == 3 == count(r.output_text)
    events = list(
        c.responses.create(
            model=simulator.model, input="Tell me a long story.", max_output_tokens=3, stream=True
        )
    )
    last = events[-1]
    assert last.type == "response.incomplete"
    assert last.response.output_text == r.output_text


def test_same_reply_as_its_chat_translation(simulator: Any, c: openai.OpenAI) -> None:
    _, nxt = first_turn(c, simulator.model)
    for inp in (QUESTION, nxt):
        body = {"model": simulator.model, "input": inp, "tools": [WEATHER], "instructions": "Hi."}
        sent = c.responses.with_raw_response.create(**body)
        native = json.loads(sent.http_request.content)
        chat = httpx.post(
            f"{simulator.base_url}/chat/completions", json=to_chat("responses", native), timeout=30
        ).json()
        a = reply_from_json("responses", sent.parse().model_dump(mode="json"))
        b = reply_from_json("chat", chat)
        assert (a.content, a.tool_calls, a.finish_reason) == (
            b.content,
            b.tool_calls,
            b.finish_reason,
        )
        assert a.usage is not None and b.usage is not None
        assert a.usage["prompt_tokens"] == b.usage["prompt_tokens"]
        assert a.usage["completion_tokens"] == b.usage["completion_tokens"]


@pytest.mark.parametrize(
    ("kw", "field"),
    [
        (
            {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
            "input[0].call_id",
        ),
        ({"input": [{"role": 3, "content": "x"}]}, "input[0].role"),
        ({"input": "x", "tools": [{"type": "function", "parameters": {}}]}, "tools[0].name"),
        ({"input": []}, "input"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens"),
    ],
)
def test_bad_requests_are_400_naming_the_field(
    simulator: Any, c: openai.OpenAI, kw: dict[str, Any], field: str
) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        c.responses.create(model=simulator.model, **kw)
    assert err.value.status_code == 400
    body: Any = err.value.body
    assert body["message"].startswith(field + ":") or f"'{field}'" in body["message"], body
    assert body["param"] == field and body["type"] == "invalid_request_error"


def test_previous_response_id_continues_a_stored_response(simulator: Any, c: openai.OpenAI) -> None:
    """A request that continues a stored response gets the reply the whole conversation gets."""
    tools: Any = [{"type": "function", "name": "lookup", "description": "look a word up",
                   "parameters": {"type": "object", "properties": {"word": {"type": "string"}},
                                  "required": ["word"]}}]  # fmt: skip
    first = c.responses.create(model=simulator.model, input="Look up 'zephyr'.", tools=tools)
    (call,) = [o for o in first.output if o.type == "function_call"]
    result: Any = [{"type": "function_call_output", "call_id": call.call_id, "output": "a wind"}]
    cont = c.responses.create(
        model=simulator.model, previous_response_id=first.id, input=result, tools=tools
    )
    whole = c.responses.create(
        model=simulator.model,
        input=[{"role": "user", "content": "Look up 'zephyr'."},
               *[o.model_dump(exclude_none=True) for o in first.output], *result],
        tools=tools,
    )  # fmt: skip
    assert cont.previous_response_id == first.id
    assert cont.output_text == whole.output_text and cont.output_text
    assert cont.usage is not None and whole.usage is not None
    assert cont.usage.input_tokens == whole.usage.input_tokens
    with pytest.raises(openai.NotFoundError, match="no stored response"):
        c.responses.create(model=simulator.model, previous_response_id="resp_nope", input="x")
    unstored = c.responses.create(model=simulator.model, input="hello", store=False)
    with pytest.raises(openai.NotFoundError):
        c.responses.create(model=simulator.model, previous_response_id=unstored.id, input="x")


def test_unknown_model_is_404(simulator: Any, c: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        c.responses.create(model="nope", input="x")


# -- the OpenAI Agents SDK ----------------------------------------------------------------------


@pytest.mark.parametrize("streamed", [False, True])
def test_agents_sdk_runs_a_tool_to_a_final_output(simulator: Any, streamed: bool) -> None:
    agents.set_tracing_disabled(True)
    cities: list[str] = []

    @agents.function_tool
    def get_weather(city: str) -> str:
        """Weather for a city."""
        cities.append(city)
        return f"Sunny in {city}."

    async def run() -> Any:
        api = openai.AsyncOpenAI(base_url=simulator.base_url, api_key="x", max_retries=0)
        model = agents.OpenAIResponsesModel(model=simulator.model, openai_client=api)
        agent = agents.Agent(
            name="weather",
            instructions="Answer weather questions.",
            tools=[get_weather],
            model=model,
        )
        try:
            if not streamed:
                return await agents.Runner.run(agent, QUESTION)
            result = agents.Runner.run_streamed(agent, QUESTION)
            kinds = {e.type async for e in result.stream_events()}
            assert "raw_response_event" in kinds
            return result
        finally:
            await api.close()

    result = asyncio.run(run())
    assert isinstance(result.final_output, str) and result.final_output
    assert cities, "the agent called its tool"
    kinds = [type(i).__name__ for i in result.new_items]
    assert kinds[:2] == ["ToolCallItem", "ToolCallOutputItem"] and kinds[-1] == "MessageOutputItem"
    assert result.raw_responses[-1].usage.output_tokens == count(result.final_output)


def test_stream_render_paces_one_delta_event_per_token() -> None:
    reply = Reply(["Hel", "lo", "!"], [("call_1", "f", ['{"a"', ":1}"])], "tool_calls", 10, 5)
    r = render_response_stream(reply, ResponseIds("x1"), 0, "m", {"input": "hi"})
    data = [json.loads(e.split(b"\ndata: ", 1)[1]) for e in r.events]
    assert [d["sequence_number"] for d in data] == list(range(len(data)))
    assert all(
        e.startswith(b"event: " + d["type"].encode() + b"\n")
        for e, d in zip(r.events, data, strict=True)
    )
    assert len(r.token_pos) == 5 and r.token_pos == sorted(set(r.token_pos))
    deltas = [data[p - 1]["delta"] for p in r.token_pos]
    assert deltas == ["Hel", "lo", "!", '{"a"', ":1}"]
    assert data[-1]["type"] == "response.completed"
    assert [o["type"] for o in data[-1]["response"]["output"]] == ["message", "function_call"]
