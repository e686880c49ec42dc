"""Anthropic Messages read into the chat shape: requests (``to_chat``), answers
(``reply_from_json``) and the SSE reader (``Stream``), on hand-written Anthropic bodies."""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from agentload.errors import WireError
from agentload.trace.capture import assistant_message
from agentload.wire import messages, reply_from_json, stream_reader, to_chat
from agentload.wire.reply import WireReply

WEATHER = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
}


def chat(body: dict[str, Any]) -> dict[str, Any]:
    return to_chat("messages", {"model": "m", "max_tokens": 64, **body})


def test_system_as_a_string_or_blocks_is_one_system_message() -> None:
    one = chat({"system": "Be brief.", "messages": [{"role": "user", "content": "hi"}]})
    assert one["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    blocks = [
        {"type": "text", "text": "You are a coding agent."},
        {"type": "text", "text": "Repo: /src", "cache_control": {"type": "ephemeral"}},
    ]
    two = chat({"system": blocks, "messages": [{"role": "user", "content": "hi"}]})
    assert two["messages"][0] == {
        "role": "system",
        "content": "You are a coding agent.\n\nRepo: /src",
    }
    assert "system" not in chat({"messages": []}) and chat({"messages": []})["messages"] == []


def test_user_turn_tool_results_first_then_text() -> None:
    turn = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "24C"},
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": [{"type": "text", "text": "line 1"}, {"type": "text", "text": "line 2"}],
            },
            {"type": "tool_result", "tool_use_id": "toolu_3", "is_error": True, "content": "boom"},
            {"type": "tool_result", "tool_use_id": "toolu_4"},
            {"type": "text", "text": "Now compare.", "cache_control": {"type": "ephemeral"}},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "x"}},
            {"type": "document", "source": {"type": "text", "data": "doc"}},
        ],
    }
    assert chat({"messages": [turn]})["messages"] == [
        {"role": "tool", "tool_call_id": "toolu_1", "content": "24C"},
        {"role": "tool", "tool_call_id": "toolu_2", "content": "line 1\n\nline 2"},
        {"role": "tool", "tool_call_id": "toolu_3", "content": "boom"},
        {"role": "tool", "tool_call_id": "toolu_4", "content": ""},
        {"role": "user", "content": "Now compare.\n\n[image]\n\n[document]"},
    ]
    only_results = {"role": "user", "content": [turn["content"][0]]}  # type: ignore[index]
    assert [m["role"] for m in chat({"messages": [only_results]})["messages"]] == ["tool"]


def test_assistant_turn_text_joined_tool_use_dumped_other_blocks_placeholders() -> None:
    turn = {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm", "signature": "sig"},
            {"type": "redacted_thinking", "data": "xx"},
            {"type": "text", "text": "Let me "},
            {"type": "text", "text": "check."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Lisbon", "n": [1, 2]},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {"q": "x"},
            },
        ],
    }
    got = chat({"messages": [turn]})["messages"]
    assert got == [
        {
            "role": "assistant",
            "content": "[thinking][redacted_thinking]Let me check.[server_tool_use]",
            "tool_calls": [
                {
                    "id": "toolu_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Lisbon","n":[1,2]}'},
                },
                {
                    "id": "toolu_2",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": "{}"},
                },
            ],
        }
    ]
    calls_only = {"role": "assistant", "content": [turn["content"][4]]}  # type: ignore[index]
    assert chat({"messages": [calls_only]})["messages"][0]["content"] is None
    assert chat({"messages": [{"role": "assistant", "content": "ok"}]})["messages"] == [
        {"role": "assistant", "content": "ok"}
    ]


def test_unknown_block_types_map_to_their_placeholder() -> None:
    turns = [
        {
            "role": "user",
            "content": [{"type": "future_block", "x": 1}, {"type": "text", "text": "hi"}],
        },
        {"role": "assistant", "content": [{"type": "web_search_tool_result", "content": []}]},
    ]
    assert chat({"messages": turns})["messages"] == [
        {"role": "user", "content": "[future_block]\n\nhi"},
        {"role": "assistant", "content": "[web_search_tool_result]"},
    ]


@pytest.mark.parametrize(
    ("native", "want"),
    [
        ({"type": "auto"}, "auto"),
        ({"type": "any"}, "required"),
        ({"type": "none"}, "none"),
        (
            {"type": "tool", "name": "get_weather"},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
)
def test_tool_choice(native: dict[str, Any], want: Any) -> None:
    got = chat({"messages": [], "tools": [WEATHER], "tool_choice": native})
    assert got["tool_choice"] == want
    assert "parallel_tool_calls" not in got


def test_tools_parameters_and_dropped_fields() -> None:
    body = {
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [WEATHER, {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}],
        "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
        "stop_sequences": ["\n\nHuman:"],
        "temperature": 0.5,
        "top_p": 0.9,
        "top_k": 5,
        "stream": True,
        "metadata": {"user_id": "u"},
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    got = chat(body)
    assert got == {
        "model": "m",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city.", "parameters": WEATHER["input_schema"]}}],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "stop": ["\n\nHuman:"],
        "temperature": 0.5,
        "top_p": 0.9,
        "stream": True,
        "stream_options": {"include_usage": True},
    }  # fmt: skip
    assert "stream_options" not in chat({"messages": [], "stream": False})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"messages": "hi"}, "body.messages: expected list, got str"),
        ({"messages": [{"content": "x"}]}, "messages[0].role: expected str, got NoneType"),
        ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content: expected str or list, got int"),
        ({"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": [{"type": "text", "text": "a"}, "b"]}]},
         "messages[1].content[1]: expected an object, got str"),
        ({"messages": [{"role": "user", "content": [{"text": "a"}]}]}, "messages[0].content[0].type: expected str, got NoneType"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]}, "messages[0].content[0].text: expected str, got int"),
        ({"messages": [{"role": "user", "content": [{"type": "tool_result"}]}]}, "messages[0].content[0].tool_use_id: expected str, got NoneType"),
        ({"messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 7}]}]},
         "messages[0].content[0].content: expected str or list, got int"),
        ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "x"}]}]},
         "messages[0].content[0].input: expected dict, got str"),
        ({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "input": {}}]}]},
         "messages[0].content[0].name: expected str, got NoneType"),
        ({"messages": [], "system": 5}, "system: expected str or list, got int"),
        ({"messages": [], "system": [{"type": "text"}]}, "system[0].text: expected str, got NoneType"),
        ({"messages": [], "tools": {}}, "body.tools: expected list, got dict"),
        ({"messages": [], "tools": [{"input_schema": {}}]}, "tools[0].name: expected str, got NoneType"),
        ({"messages": [], "tools": [{"name": "f", "input_schema": []}]}, "tools[0].input_schema: expected dict, got list"),
        ({"messages": [], "tool_choice": "auto"}, "tool_choice: expected an object, got str"),
        ({"messages": [], "tool_choice": {"type": "tool"}}, "tool_choice.name: expected str, got NoneType"),
        ({"messages": [], "stop_sequences": "x"}, "body.stop_sequences: expected list, got str"),
    ],
)  # fmt: skip
def test_bad_bodies_name_the_field(body: dict[str, Any], message: str) -> None:
    with pytest.raises(WireError) as exc:
        to_chat("messages", body)
    assert str(exc.value) == message


# -- answers ---------------------------------------------------------------------------------
ANSWER: dict[str, Any] = {
    "id": "msg_01abc",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [
        {"type": "thinking", "thinking": "The user wants weather.", "signature": "sig"},
        {"type": "text", "text": "Checking Lisbon "},
        {"type": "text", "text": "and Porto."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Lisbon", "days": 2}},
        {"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": {"city": "Porto", "days": 2}},
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "usage": {"input_tokens": 12, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 100, "output_tokens": 40},
}  # fmt: skip

WANT = WireReply(
    content="[thinking]Checking Lisbon and Porto.",
    tool_calls=[
        {"id": "toolu_01", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Lisbon","days":2}'}},
        {"id": "toolu_02", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Porto","days":2}'}},
    ],
    finish_reason="tool_calls",
    usage={
        "prompt_tokens": 142,
        "completion_tokens": 40,
        "total_tokens": 182,
        "prompt_tokens_details": {"cached_tokens": 100},
        "cache_creation_tokens": 30,
    },
    response_id="msg_01abc",
)  # fmt: skip


def test_reply_from_json_reads_text_tools_finish_and_usage() -> None:
    assert reply_from_json("messages", ANSWER) == WANT


@pytest.mark.parametrize(
    ("stop", "finish"),
    [("end_turn", "stop"), ("stop_sequence", "stop"), ("max_tokens", "length"),
     ("tool_use", "tool_calls"), ("refusal", "content_filter"), (None, None)],
)  # fmt: skip
def test_stop_reasons_in_chat_words(stop: str | None, finish: str | None) -> None:
    obj = {"content": [{"type": "text", "text": "x"}], "stop_reason": stop}
    got = reply_from_json("messages", obj)
    assert got.finish_reason == finish and got.usage is None and got.content == "x"


def test_error_body_and_broken_answer() -> None:
    err = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    assert reply_from_json("messages", err) == WireReply(error="Overloaded")
    with pytest.raises(WireError, match=r"^body.content: expected list, got NoneType$"):
        reply_from_json("messages", {"id": "msg_1"})
    with pytest.raises(WireError, match=r"^content\[0\].type: expected str, got int$"):
        reply_from_json("messages", {"content": [{"type": 1}]})


def test_answer_then_history_gives_the_same_assistant_message() -> None:
    """The invariant: the assistant turn read from the answer equals the one read back from the
    next request, which carries the answer's content blocks as history."""
    r = reply_from_json("messages", ANSWER)
    results = [
        {"type": "tool_result", "tool_use_id": c["id"], "content": "sunny"} for c in r.tool_calls
    ]
    nxt = {
        "messages": [
            {"role": "user", "content": "Weather in Lisbon and Porto?"},
            {"role": "assistant", "content": ANSWER["content"]},
            {"role": "user", "content": results},
        ]
    }  # fmt: skip
    history = chat(nxt)["messages"]
    assert history[1] == assistant_message(r.content, r.tool_calls)
    assert [m["tool_call_id"] for m in history[2:]] == ["toolu_01", "toolu_02"]
    streamed = feed_all(sse(STREAM_EVENTS)).reply()
    assert assistant_message(streamed.content, streamed.tool_calls) == history[1]


# -- the stream ------------------------------------------------------------------------------
def ev(kind: str, **data: Any) -> tuple[str, dict[str, Any]]:
    return kind, {"type": kind, **data}


def delta(index: int, **d: Any) -> tuple[str, dict[str, Any]]:
    return ev("content_block_delta", index=index, delta=d)


# The stream of ANSWER, as Anthropic sends it (thinking first, tool input in JSON fragments).
STREAM_EVENTS = [
    ev("message_start", message={"id": "msg_01abc", "type": "message", "role": "assistant", "content": [],
       "model": "claude-x", "stop_reason": None, "stop_sequence": None,
       "usage": {"input_tokens": 12, "cache_creation_input_tokens": 30, "cache_read_input_tokens": 100, "output_tokens": 1}}),
    ev("ping"),
    ev("content_block_start", index=0, content_block={"type": "thinking", "thinking": "", "signature": ""}),
    delta(0, type="thinking_delta", thinking="The user wants weather."),
    delta(0, type="signature_delta", signature="sig"),
    ev("content_block_stop", index=0),
    ev("content_block_start", index=1, content_block={"type": "text", "text": ""}),
    delta(1, type="text_delta", text="Checking Lisbon "),
    ev("content_block_stop", index=1),
    ev("content_block_start", index=2, content_block={"type": "text", "text": ""}),
    delta(2, type="text_delta", text="and "),
    delta(2, type="text_delta", text="Porto."),
    ev("content_block_stop", index=2),
    ev("content_block_start", index=3, content_block={"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {}}),
    delta(3, type="input_json_delta", partial_json=""),
    delta(3, type="input_json_delta", partial_json='{"city": "Lis'),
    delta(3, type="input_json_delta", partial_json='bon", "days": 2}'),
    ev("content_block_stop", index=3),
    ev("content_block_start", index=4, content_block={"type": "tool_use", "id": "toolu_02", "name": "get_weather", "input": {}}),
    delta(4, type="input_json_delta", partial_json='{"city":"Porto","days":2}'),
    ev("content_block_stop", index=4),
    ev("some_future_event", x=1),
    ev("message_delta", delta={"stop_reason": "tool_use", "stop_sequence": None}, usage={"output_tokens": 40}),
    ev("message_stop"),
]  # fmt: skip


def sse(events: list[tuple[str, dict[str, Any]]], crlf: bool = False) -> bytes:
    nl = b"\r\n" if crlf else b"\n"
    return b"".join(
        b"event: " + k.encode() + nl + b"data: " + orjson.dumps(d) + nl + nl for k, d in events
    )


def feed_all(raw: bytes, sizes: list[int] | None = None) -> messages.Stream:
    s = stream_reader("messages")
    assert isinstance(s, messages.Stream)
    at = 0
    for n in sizes or [len(raw)]:
        s.feed(raw[at : at + n])
        at += n
    s.feed(raw[at:])
    return s


def test_stream_gives_the_reply_of_the_same_answer_in_any_chunking() -> None:
    raw = sse(STREAM_EVENTS)
    whole = feed_all(raw)
    assert whole.done and whole.reply() == WANT
    assert feed_all(raw, [1] * len(raw)).reply() == WANT
    rng = random.Random(7)
    for _ in range(20):
        sizes = [rng.randint(1, 40) for _ in range(len(raw) // 10)]
        assert feed_all(raw, sizes).reply() == WANT
    assert feed_all(sse(STREAM_EVENTS, crlf=True), [3] * (len(raw) // 3)).reply() == WANT


def test_stream_counts_output_bearing_events() -> None:
    s = stream_reader("messages")
    counts = [s.feed(sse([e])) for e in STREAM_EVENTS]
    kinds = [k if k != "content_block_delta" else d["delta"]["type"] for k, d in STREAM_EVENTS]
    bearing = {k for k, n in zip(kinds, counts, strict=True) if n}
    assert bearing == {"content_block_start", "thinking_delta", "text_delta", "input_json_delta"}
    assert counts[:2] == [0, 0]  # message_start and ping: nothing generated yet
    assert counts[kinds.index("signature_delta")] == 0
    assert counts[14] == 0  # an empty partial_json
    assert sum(counts) == 12  # 5 block starts, 1 thinking, 3 text, 3 argument deltas


def test_stream_error_event_malformed_event_and_cut_stream() -> None:
    s = stream_reader("messages")
    s.feed(sse(STREAM_EVENTS[:8]))
    s.feed(sse([ev("error", error={"type": "overloaded_error", "message": "Overloaded"})]))
    r = s.reply()
    assert r.error == "Overloaded" and r.content == "[thinking]Checking Lisbon " and not s.done
    cut = stream_reader("messages")
    cut.feed(sse(STREAM_EVENTS[:16]))  # inside the first tool call's arguments
    call = cut.reply().tool_calls[0]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Lis'}
    with pytest.raises(WireError, match="stream event content_block_delta: malformed JSON"):
        stream_reader("messages").feed(b"event: content_block_delta\ndata: {nope\n\n")
    odd = stream_reader("messages")  # an index of the wrong type names no block
    assert (
        odd.feed(
            sse([ev("content_block_delta", index=[1], delta={"type": "text_delta", "text": "x"})])
        )
        == 1
    )
    assert odd.reply().content is None
    with pytest.raises(WireError, match="stream event ping: expected an object, got list"):
        stream_reader("messages").feed(b"event: ping\ndata: []\n\n")


def test_stream_usage_from_message_delta_overrides_start() -> None:
    s = stream_reader("messages")
    s.feed(sse([STREAM_EVENTS[0]]))
    assert s.reply().usage is not None and s.reply().usage["completion_tokens"] == 1  # type: ignore[index]
    late = ev("message_delta", delta={"stop_reason": "end_turn"},
              usage={"input_tokens": 12, "cache_read_input_tokens": None, "output_tokens": 9})  # fmt: skip
    s.feed(sse([late]))
    r = s.reply()
    assert r.finish_reason == "stop" and r.usage is not None
    assert r.usage["completion_tokens"] == 9 and r.usage["prompt_tokens"] == 142
