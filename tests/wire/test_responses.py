"""OpenAI Responses read into the chat shape: requests, answers, streams, errors."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentload.errors import WireError
from agentload.trace.capture import assistant_message
from agentload.wire import reply_from_json, stream_reader, to_chat
from agentload.wire import responses as wire

WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    "strict": True,
}
ARGS = '{"city": "Lisbon"}'  # spaced as the model wrote it: kept byte for byte

# A non-streamed answer as OpenAI sends it: reasoning, two text parts, two calls.
ANSWER: dict[str, Any] = {
    "id": "resp_123",
    "object": "response",
    "created_at": 1,
    "status": "completed",
    "error": None,
    "incomplete_details": None,
    "model": "gpt-x",
    "output": [
        {"id": "rs_1", "type": "reasoning", "summary": []},
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [
                {"type": "output_text", "text": "Let me ", "annotations": []},
                {"type": "output_text", "text": "check.", "annotations": []},
            ],
        },
        {
            "id": "fc_1",
            "type": "function_call",
            "call_id": "call_a",
            "name": "get_weather",
            "arguments": ARGS,
            "status": "completed",
        },
        {
            "id": "fc_2",
            "type": "function_call",
            "call_id": "call_b",
            "name": "get_weather",
            "arguments": '{"city":"Porto"}',
            "status": "completed",
        },
    ],
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [WEATHER],
    "usage": {
        "input_tokens": 120,
        "input_tokens_details": {"cached_tokens": 64},
        "output_tokens": 30,
        "output_tokens_details": {"reasoning_tokens": 12},
        "total_tokens": 150,
    },
}


def test_string_input_instructions_and_sampling_fields() -> None:
    body = {
        "model": "gpt-x",
        "instructions": "Be brief.",
        "input": "Hi",
        "max_output_tokens": 50,
        "temperature": 0.2,
        "top_p": 0.9,
        "stream": True,
        "store": False,
        "reasoning": {"effort": "low"},
    }
    assert to_chat("responses", body) == {
        "model": "gpt-x",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 50,
        "temperature": 0.2,
        "top_p": 0.9,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    assert "stream_options" not in wire.to_chat({"model": "m", "input": "Hi"})


def test_message_items_by_role_and_content_parts() -> None:
    body = {
        "input": [
            {"role": "developer", "content": "Rules."},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "What is "},
                    {"type": "input_image", "image_url": "data:image/png;base64,AAAA"},
                    {"type": "input_text", "text": " this?"},
                ],
            },
            {"type": "some_future_item", "role": "nobody"},
        ]
    }
    assert wire.to_chat(body)["messages"] == [
        {"role": "developer", "content": "Rules."},
        {"role": "user", "content": "What is [image] this?"},
        {"role": "assistant", "content": "[some_future_item]"},
    ]


def test_assistant_text_and_calls_merge_into_one_turn_then_tool_messages() -> None:
    items = [
        {"role": "user", "content": "Weather?"},
        *copy.deepcopy(ANSWER["output"]),
        {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
        {
            "type": "function_call_output",
            "call_id": "call_b",
            "output": [{"type": "input_text", "text": "rain"}],
        },
        {"role": "assistant", "content": [{"type": "output_text", "text": "Sunny, then rain."}]},
        {"role": "user", "content": "Thanks"},
    ]
    msgs = wire.to_chat({"input": items})["messages"]
    assert msgs == [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "[reasoning]Let me check.",
            "tool_calls": [
                {
                    "id": "call_a",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": ARGS},
                },
                {
                    "id": "call_b",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Porto"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_b", "content": "rain"},
        {"role": "assistant", "content": "Sunny, then rain."},
        {"role": "user", "content": "Thanks"},
    ]


def test_calls_without_text_are_an_assistant_turn_with_content_none() -> None:
    items = [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]
    (msg,) = wire.to_chat({"input": items})["messages"]
    assert msg["content"] is None and msg["tool_calls"][0]["id"] == "c"


def test_answer_read_equals_the_next_requests_history() -> None:
    """The invariant the recording proxy follows an agent by."""
    r = reply_from_json("responses", ANSWER)
    from_answer = assistant_message(r.content, r.tool_calls)
    # The next request replays the output items as input (as the openai SDK and Codex do).
    nxt = {"input": [{"role": "user", "content": "Weather?"}, *ANSWER["output"]]}
    assert to_chat("responses", nxt)["messages"][1] == from_answer


def test_tools_function_only_and_tool_choice() -> None:
    body = {"input": "x", "tools": [WEATHER, {"type": "web_search"}, {"type": "file_search"}]}
    assert wire.to_chat(body)["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parameters": WEATHER["parameters"],
                "strict": True,
            },
        }
    ]


@pytest.mark.parametrize(
    ("choice", "chat"),
    [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        (
            {"type": "function", "name": "get_weather"},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
        ({"type": "web_search_preview"}, None),
    ],
)
def test_tool_choice_maps_to_chat(choice: Any, chat: Any) -> None:
    out = wire.to_chat({"input": "x", "tools": [WEATHER], "tool_choice": choice})
    assert out.get("tool_choice") == chat


def test_previous_response_id_is_named_and_messages_kept_as_given() -> None:
    body = {"input": [{"role": "user", "content": "more"}], "previous_response_id": "resp_9"}
    assert wire.previous_response_id(body) == "resp_9"
    assert wire.previous_response_id({"input": "x"}) is None
    assert wire.to_chat(body)["messages"] == [{"role": "user", "content": "more"}]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": 3}, "body.input:"),
        ({"input": ["hi"]}, "input[0]:"),
        ({"input": [{"role": 3, "content": "x"}]}, "input[0].role:"),
        ({"input": [{"role": "user", "content": 5}]}, "input[0].content:"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_text"}]}]},
            "input[0].content[0].text:",
        ),
        (
            {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]},
            "input[0].call_id:",
        ),
        (
            {"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]},
            "input[0].arguments:",
        ),
        ({"input": [{"type": "function_call_output", "output": "x"}]}, "input[0].call_id:"),
        ({"input": "x", "tools": [{"type": "function"}]}, "tools[0].name:"),
        ({"input": "x", "tools": {"type": "function"}}, "body.tools:"),
        ({"input": "x", "tool_choice": {"type": "function"}}, "body.tool_choice.name:"),
    ],
)
def test_bad_requests_name_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(WireError) as err:
        wire.to_chat(body)
    assert str(err.value).startswith(field), str(err.value)


def test_reply_from_json_text_calls_usage_finish() -> None:
    r = wire.reply_from_json(ANSWER)
    assert r.content == "[reasoning]Let me check."
    assert [c["id"] for c in r.tool_calls] == ["call_a", "call_b"]
    assert r.tool_calls[0]["function"] == {"name": "get_weather", "arguments": ARGS}
    assert r.finish_reason == "tool_calls"
    assert r.response_id == "resp_123"
    assert r.usage == {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 64},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    assert r.error is None


def test_reply_finish_reasons_and_errors() -> None:
    text_only = {**ANSWER, "output": ANSWER["output"][:2]}
    assert wire.reply_from_json(text_only).finish_reason == "stop"
    cut = {
        **text_only,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
    }
    assert wire.reply_from_json(cut).finish_reason == "length"
    failed = {
        **ANSWER,
        "status": "failed",
        "output": [],
        "error": {"code": "server_error", "message": "boom"},
    }
    r = wire.reply_from_json(failed)
    assert (r.error, r.finish_reason, r.content) == ("boom", None, None)
    body = {"error": {"message": "Invalid 'input[0]'", "type": "invalid_request_error"}}
    assert wire.reply_from_json(body).error == "Invalid 'input[0]'"
    with pytest.raises(WireError, match=r"^output\[0\]\.call_id:"):
        wire.reply_from_json({"output": [{"type": "function_call", "name": "f"}]})


# -- streams ------------------------------------------------------------------------------------


def _sse(events: list[dict[str, Any]]) -> bytes:
    out = b""
    for n, e in enumerate(events):
        e = {**e, "sequence_number": n}
        out += b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n"
    return out


def _answer_events(final: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The events OpenAI streams for ``ANSWER`` (deltas split differently from its parts)."""
    start = {**ANSWER, "status": "in_progress", "output": [], "usage": None}
    msg = {**ANSWER["output"][1], "status": "in_progress", "content": []}
    where = {"item_id": "msg_1", "output_index": 1, "content_index": 0}
    ev: list[dict[str, Any]] = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
        {"type": "response.output_item.added", "output_index": 0, "item": ANSWER["output"][0]},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "delta": "hmm"},
        {"type": "response.output_item.done", "output_index": 0, "item": ANSWER["output"][0]},
        {"type": "response.output_item.added", "output_index": 1, "item": msg},
        {
            "type": "response.content_part.added",
            **where,
            "part": {"type": "output_text", "text": ""},
        },
        {"type": "response.output_text.delta", **where, "delta": "Let "},
        {"type": "response.output_text.delta", **where, "delta": "me "},
        {"type": "response.output_text.done", **where, "text": "Let me "},
        {"type": "response.content_part.done", **where, "part": ANSWER["output"][1]["content"][0]},
        {"type": "response.content_part.added", **where, "content_index": 1, "part": {}},
        {"type": "response.output_text.delta", **where, "content_index": 1, "delta": "check."},
        {"type": "response.output_item.done", "output_index": 1, "item": ANSWER["output"][1]},
    ]
    for k, fc in enumerate(ANSWER["output"][2:], start=2):
        ev.append(
            {
                "type": "response.output_item.added",
                "output_index": k,
                "item": {**fc, "arguments": "", "status": "in_progress"},
            }
        )
        for piece in (fc["arguments"][:5], fc["arguments"][5:]):
            ev.append(
                {
                    "type": "response.function_call_arguments.delta",
                    "item_id": fc["id"],
                    "output_index": k,
                    "delta": piece,
                }
            )
        ev.append({"type": "response.output_item.done", "output_index": k, "item": fc})
    ev.append({"type": "response.completed", "response": final if final is not None else ANSWER})
    return ev


def _feed(raw: bytes, sizes: list[int]) -> tuple[Any, int]:
    s = stream_reader("responses")
    carried, at, k = 0, 0, 0
    while at < len(raw):
        n = sizes[k % len(sizes)] if sizes else len(raw)
        carried += s.feed(raw[at : at + n])
        at, k = at + n, k + 1
    return s, carried


@given(st.lists(st.integers(1, 97), max_size=12))
def test_stream_in_any_chunk_split_equals_the_json_answer(sizes: list[int]) -> None:
    raw = (
        _sse(_answer_events(None)).replace(b"\n", b"\r\n")
        if len(sizes) % 3 == 1
        else _sse(_answer_events(None))
    )
    s, carried = _feed(raw, sizes)
    assert s.reply() == wire.reply_from_json(ANSWER)
    assert s.done
    # 3 text deltas, 2 call names, 4 argument deltas carried output
    assert carried == 9


def test_stream_without_output_in_the_final_response_is_built_from_the_deltas() -> None:
    final = {k: v for k, v in ANSWER.items() if k != "output"}
    s, _ = _feed(_sse(_answer_events(final)), [13])
    assert s.reply() == wire.reply_from_json(ANSWER)


def test_stream_incomplete_and_error_events() -> None:
    cut = {
        **ANSWER,
        "status": "incomplete",
        "incomplete_details": {"reason": "max_output_tokens"},
        "output": ANSWER["output"][:2],
    }
    events = [*_answer_events(cut)[:14], {"type": "response.incomplete", "response": cut}]
    s, _ = _feed(_sse(events), [40])
    assert (s.reply().content, s.reply().finish_reason, s.reply().tool_calls) == (
        "[reasoning]Let me check.",
        "length",
        [],
    )
    s, _ = _feed(
        _sse([*events[:8], {"type": "error", "code": "server_error", "message": "overloaded"}]), []
    )
    r = s.reply()
    assert (r.content, r.error, r.response_id, r.finish_reason) == (
        "[reasoning]Let ",
        "overloaded",
        "resp_123",
        None,
    )
    with pytest.raises(WireError, match="malformed JSON"):
        stream_reader("responses").feed(b"event: response.created\ndata: {nope\n\n")
