"""``POST /v1/messages`` through Anthropic's own SDK: tools, a tool loop, streaming, usage,
errors, the API key header, and the same reply as Chat Completions gives the same conversation."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from agentload.endpoint.server import ServeOptions, SimulatorServer
from agentload.trace.capture import assistant_message
from agentload.wire import reply_from_json, stream_reader, to_chat

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"],
    },
}
SYSTEM = [
    {"type": "text", "text": "You are a weather assistant.", "cache_control": {"type": "ephemeral"}}
]
ASK = [{"role": "user", "content": "What is the weather like in Lisbon this weekend?"}]


@pytest.fixture
def client(simulator: Any) -> Iterator[Callable[..., anthropic.Anthropic]]:
    """Makes SDK clients of the session simulator (closed at teardown)."""
    made: list[anthropic.Anthropic] = []

    def make(**kw: Any) -> anthropic.Anthropic:
        root = simulator.base_url.removesuffix("/v1")
        made.append(anthropic.Anthropic(base_url=root, api_key="x", max_retries=0, **kw))
        return made[-1]

    yield make
    for c in made:
        c.close()


def create(c: anthropic.Anthropic, sim: Any, msgs: list[Any], **kw: Any) -> anthropic.types.Message:
    return c.messages.create(
        model=sim.model, max_tokens=8192, system=SYSTEM, messages=msgs, tools=[WEATHER], **kw
    )  # type: ignore[arg-type]


def blocks(m: anthropic.types.Message) -> list[dict[str, Any]]:
    """The content blocks' fields (a streamed message's text blocks are ``ParsedTextBlock``,
    with a ``parsed_output`` the non-streamed ``TextBlock`` lacks)."""
    return [{k: v for k, v in b.model_dump().items() if k != "parsed_output"} for b in m.content]


def test_tool_use_then_tool_result_loop_ends_in_text(
    simulator: Any, client: Callable[..., anthropic.Anthropic]
) -> None:
    c = client()
    msgs: list[Any] = list(ASK)
    first = create(c, simulator, msgs)
    assert first.id.startswith("msg_") and first.type == "message" and first.role == "assistant"
    assert first.stop_reason == "tool_use" and first.model == simulator.model
    uses = [b for b in first.content if b.type == "tool_use"]
    assert uses and all(b.name == "get_weather" for b in uses)
    assert all(isinstance(b.input, dict) and set(b.input) == {"city", "days"} for b in uses)
    u = first.usage
    assert u.input_tokens > 0 and u.output_tokens > 0
    assert u.cache_read_input_tokens is not None and u.cache_creation_input_tokens == 0
    m, turns = first, 1
    while m.stop_reason == "tool_use" and turns < 6:
        msgs.append({"role": "assistant", "content": m.content})
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": "Sunny, 24C both days"}
            for b in m.content
            if b.type == "tool_use"
        ]
        msgs.append({"role": "user", "content": results})
        m, turns = create(c, simulator, msgs), turns + 1
    assert m.stop_reason == "end_turn" and turns >= 2
    assert [b.type for b in m.content] == ["text"] and m.content[0].text  # type: ignore[union-attr]


def test_stream_final_message_equals_the_non_streamed_answer(
    simulator: Any, client: Callable[..., anthropic.Anthropic]
) -> None:
    c = client()
    plain = create(c, simulator, ASK)
    with c.messages.stream(
        model=simulator.model,
        max_tokens=8192,
        system=SYSTEM,
        messages=ASK,
        tools=[WEATHER],  # type: ignore[arg-type]
    ) as s:
        kinds = [e.type for e in s]
        final = s.get_final_message()
    assert blocks(final) == blocks(plain) and final.id != plain.id
    assert final.stop_reason == plain.stop_reason == "tool_use"
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "input_json" in kinds and "content_block_stop" in kinds
    assert final.usage.output_tokens == plain.usage.output_tokens
    fu, pu = final.usage, plain.usage
    assert fu.input_tokens + (fu.cache_read_input_tokens or 0) == pu.input_tokens + (
        pu.cache_read_input_tokens or 0
    )
    assert (fu.cache_read_input_tokens or 0) > 0  # the same prompt again: a prefix-cache hit
    text = [{"role": "user", "content": "Say something about the sea."}]
    with c.messages.stream(model=simulator.model, max_tokens=200, messages=text) as s:  # type: ignore[arg-type]
        pieces = list(s.text_stream)
        msg = s.get_final_message()
    assert len(pieces) > 1 and "".join(pieces) == msg.content[0].text  # type: ignore[union-attr]
    assert msg.stop_reason == "end_turn"


def test_max_tokens_and_stop_sequences(
    simulator: Any, client: Callable[..., anthropic.Anthropic]
) -> None:
    c = client()
    text = [{"role": "user", "content": "Tell me a long story about the sea."}]
    m = c.messages.create(model=simulator.model, max_tokens=5, messages=text)  # type: ignore[arg-type]
    assert m.stop_reason == "max_tokens" and m.usage.output_tokens == 5
    full = c.messages.create(model=simulator.model, max_tokens=400, messages=text)  # type: ignore[arg-type]
    words = full.content[0].text.split()  # type: ignore[union-attr]
    assert full.stop_reason == "end_turn" and len(words) > 3
    cut = c.messages.create(
        model=simulator.model,
        max_tokens=400,
        messages=text,
        stop_sequences=[words[2]],  # type: ignore[arg-type]
    )
    said = full.content[0].text  # type: ignore[union-attr]
    assert cut.content[0].text == said[: said.find(words[2])]  # type: ignore[union-attr]
    assert cut.stop_reason == "end_turn"  # the simulator does not say a stop sequence cut it


def test_the_same_reply_as_its_chat_translation(
    simulator: Any, client: Callable[..., anthropic.Anthropic]
) -> None:
    """One conversation, one reply: a Messages request and its ``to_chat`` form sent to
    ``/v1/chat/completions`` get the same text and tool calls."""
    native: dict[str, Any] = {"model": simulator.model, "max_tokens": 8192, "system": SYSTEM, "messages": ASK, "tools": [WEATHER]}  # fmt: skip
    m = client().messages.create(**native)
    ours = reply_from_json("messages", m.model_dump())
    with openai.OpenAI(base_url=simulator.base_url, api_key="x", max_retries=0) as oc:
        r = oc.chat.completions.create(**to_chat("messages", native))
    theirs = reply_from_json("chat", r.model_dump())
    assert ours.tool_calls and ours.tool_calls == theirs.tool_calls
    assert ours.content == theirs.content and ours.finish_reason == theirs.finish_reason
    assert ours.usage is not None and theirs.usage is not None
    assert ours.usage["prompt_tokens"] == theirs.usage["prompt_tokens"]
    assert ours.usage["completion_tokens"] == theirs.usage["completion_tokens"]


def test_what_the_sdk_sends_back_reads_as_the_answer(
    simulator: Any, client: Callable[..., anthropic.Anthropic]
) -> None:
    """The invariant on real bytes: the answer (raw JSON and raw SSE) and the next request the
    SDK builds from it give one assistant message."""
    sent: list[bytes] = []
    hook = {"request": [lambda req: sent.append(req.read())]}
    c = client(http_client=anthropic.DefaultHttpxClient(event_hooks=hook))
    raw = c.messages.with_raw_response.create(
        model=simulator.model,
        max_tokens=8192,
        system=SYSTEM,
        messages=ASK,
        tools=[WEATHER],  # type: ignore[arg-type]
    )
    answer = reply_from_json("messages", json.loads(raw.http_response.content))
    m = raw.parse()
    results = [{"type": "tool_result", "tool_use_id": b.id, "content": "ok"} for b in m.content if b.type == "tool_use"]  # fmt: skip
    create(
        c,
        simulator,
        [*ASK, {"role": "assistant", "content": m.content}, {"role": "user", "content": results}],
    )
    history = to_chat("messages", orjson.loads(sent[-1]))["messages"]
    assert history[2] == assistant_message(answer.content, answer.tool_calls)
    body = {"model": simulator.model, "max_tokens": 8192, "system": SYSTEM, "messages": ASK, "tools": [WEATHER], "stream": True}  # fmt: skip
    with httpx.stream("POST", simulator.base_url + "/messages", json=body) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        chunks = list(resp.iter_raw())
    whole, bytewise = stream_reader("messages"), stream_reader("messages")
    data = b"".join(chunks)
    # every block start and every delta (one per token, none empty) carries output
    bearing = data.count(b"event: content_block_start") + data.count(b"event: content_block_delta")
    assert sum(whole.feed(ch) for ch in chunks) == bearing > 2
    for i in range(len(data)):
        bytewise.feed(data[i : i + 1])
    for s in (whole, bytewise):
        r = s.reply()
        assert s.done and r.error is None
        assert (r.content, r.tool_calls, r.finish_reason) == (
            answer.content,
            answer.tool_calls,
            answer.finish_reason,
        )
        assert r.usage is not None and answer.usage is not None
        assert r.usage["prompt_tokens"] == answer.usage["prompt_tokens"]


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"role": "user", "content": 3}], "messages.0.content: Input should be a valid string or a valid list"),
        ([{"role": "user", "content": [{"type": "text", "text": 3}]}], "messages.0.content.0.text: Input should be a valid string"),
        ([{"role": "user", "content": [{"type": "tool_result"}]}], "messages.0.content.0.tool_use_id: Field required"),
    ],
)  # fmt: skip
def test_bad_requests_are_anthropic_errors(
    simulator: Any, client: Callable[..., anthropic.Anthropic], messages: list[Any], message: str
) -> None:
    with pytest.raises(anthropic.BadRequestError) as exc:
        client().messages.create(model=simulator.model, max_tokens=10, messages=messages)
    assert exc.value.status_code == 400 and message in exc.value.message
    assert exc.value.body == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": message},
    }


def test_other_errors_keep_their_status_in_anthropic_shape(
    simulator: Any, client: Callable[..., anthropic.Anthropic]
) -> None:
    c = client()
    with pytest.raises(anthropic.NotFoundError) as nf:
        c.messages.create(model="claude-nope", max_tokens=10, messages=ASK)  # type: ignore[arg-type]
    assert nf.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert "claude-nope" in nf.value.body["error"]["message"]  # type: ignore[index]
    r = httpx.post(
        simulator.base_url + "/messages", json={"model": simulator.model, "messages": ASK}
    )
    assert r.status_code == 400 and r.json()["error"]["message"] == "max_tokens: field required"
    r = httpx.post(simulator.base_url + "/messages", content=b"{not json")
    assert r.status_code == 400 and r.json()["type"] == "error"
    choice = {"type": "tool", "name": "nope"}
    with pytest.raises(anthropic.BadRequestError, match="not one of the offered tools"):
        create(c, simulator, ASK, tool_choice=choice)


def test_x_api_key_is_accepted_on_messages() -> None:
    key = "sk-ant-sim-0123456789"
    with SimulatorServer("instant", serving=ServeOptions(api_key=key)) as srv:
        root = srv.base_url.removesuffix("/v1")
        with anthropic.Anthropic(base_url=root, api_key=key, max_retries=0) as ok:
            m = ok.messages.create(model=srv.model, max_tokens=3, messages=ASK)  # type: ignore[arg-type]
        assert m.usage.output_tokens == 3
        with (
            anthropic.Anthropic(base_url=root, api_key="sk-wrong", max_retries=0) as bad,
            pytest.raises(anthropic.AuthenticationError),
        ):
            bad.messages.create(model=srv.model, max_tokens=3, messages=ASK)  # type: ignore[arg-type]
        chat = {"model": srv.model, "messages": ASK}
        r = httpx.post(srv.base_url + "/chat/completions", json=chat, headers={"x-api-key": key})
        assert r.status_code == 401  # x-api-key opens /v1/messages only
