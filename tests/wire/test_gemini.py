"""Google's Gemini API read into the chat form: the requests Gemini CLI 0.61.0 really sent
(``data/gemini_cli_0.61.0.json``, written against a capture server), the documented answer
shapes, and the same assistant message from an answer as from the next request's history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentload.errors import WireError
from agentload.trace.capture import assistant_message
from agentload.wire import (
    api_for_path,
    counts_tokens,
    gemini_target,
    reply_from_json,
    stream_reader,
    to_chat,
)
from agentload.wire.gemini import call_id
from agentload.wire.reply import ShapeError

CAPTURED = json.loads((Path(__file__).parent / "data" / "gemini_cli_0.61.0.json").read_text())
STREAM = "/v1beta/models/gemini-2.5-pro:streamGenerateContent"
PLAIN = "/v1beta/models/gemini-2.5-pro:generateContent"


def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(b"data: " + orjson.dumps(e) + b"\r\n\r\n" for e in events)


def _streamed(events: list[dict[str, Any]], step: int = 7) -> Any:
    """The reply of the events sent as SSE, fed ``step`` bytes at a time."""
    reader = stream_reader("gemini")
    data = _sse(events)
    for i in range(0, len(data), step):
        reader.feed(data[i : i + step])
    assert reader.done
    return reader.reply()


@pytest.mark.parametrize(
    ("path", "api"),
    [
        ("/v1beta/models/gemini-2.5-pro:generateContent", "gemini"),
        ("/v1beta/models/agentload-sim:streamGenerateContent", "gemini"),
        ("/v1/models/gemini-2.5-flash:generateContent", "gemini"),
        ("/gateway/google/v1beta/models/gemini-2.5-pro:streamGenerateContent", "gemini"),
        ("/v1beta/models/gemini-2.5-pro:countTokens", None),
        ("/v1beta/models/gemini-2.5-pro", None),
        ("/v1beta/models", None),
        ("/v1/models", None),
        ("/v1/messages", "messages"),
        ("/v1/chat/completions", "chat"),
    ],
)
def test_the_path_says_the_api(path: str, api: str | None) -> None:
    assert api_for_path(path) == api


def test_the_path_names_the_model_and_what_is_no_call() -> None:
    assert gemini_target(STREAM) == ("gemini-2.5-pro", "streamGenerateContent")
    assert gemini_target("/v1/chat/completions") is None
    assert counts_tokens("/v1beta/models/gemini-2.5-pro:countTokens")
    assert counts_tokens("/v1/messages/count_tokens")
    assert not counts_tokens(PLAIN)  # an LLM call
    assert not counts_tokens("/v1beta/models/text-embedding-004:embedContent")  # unread


def test_gemini_cli_first_request() -> None:
    """Gemini CLI's first request: the system instruction, one user turn of two parts (its
    session context, the prompt), its function declarations (``parametersJsonSchema``), its
    sampling; the model and streaming from the path it went to."""
    sent = CAPTURED["requests"][0]
    path = sent["path"].split("?")[0]
    chat = to_chat("gemini", sent["body"], path)
    assert chat["model"] == "agentload-sim" and chat["stream"] is True
    assert chat["stream_options"] == {"include_usage": True}
    system, user = chat["messages"]
    assert system["role"] == "system" and system["content"].startswith("You are Gemini CLI")
    parts = sent["body"]["contents"][0]["parts"]
    assert user == {"role": "user", "content": parts[0]["text"] + "\n\n" + parts[1]["text"]}
    decls = sent["body"]["tools"][0]["functionDeclarations"]
    assert [t["function"]["name"] for t in chat["tools"]] == [d["name"] for d in decls]
    assert chat["tools"][0]["function"]["parameters"] == decls[0]["parametersJsonSchema"]
    assert (chat["temperature"], chat["top_p"]) == (1, 0.95)
    assert "top_k" not in chat and "thinkingConfig" not in chat  # kept in the body as sent


def test_gemini_cli_carries_the_answer_back() -> None:
    """The second request: the model turn Gemini CLI built from the answer (its own call ids,
    the thought dropped, the text merged) and the function responses answering them."""
    sent = CAPTURED["requests"][1]
    chat = to_chat("gemini", sent["body"], STREAM)
    turn, *results = chat["messages"][2:]
    calls = sent["body"]["contents"][1]["parts"][1:]
    assert turn == assistant_message(
        "Reading both.",
        [
            {"id": c["functionCall"]["id"], "type": "function",
             "function": {"name": c["functionCall"]["name"],
                          "arguments": orjson.dumps(c["functionCall"]["args"]).decode()}}
            for c in calls
        ],
    )  # fmt: skip
    assert [r["tool_call_id"] for r in results] == [c["functionCall"]["id"] for c in calls]
    assert results[0] == {"role": "tool", "tool_call_id": calls[0]["functionCall"]["id"],
                          "content": "hi\n"}  # fmt: skip


def test_the_answer_reads_as_the_history_carries_it() -> None:
    """The capture server's answer (a thought, text in two events, two calls without ids): the
    streamed reply is the assistant message the next request's history reads as, when that
    history carries the model's turn as the API sent it (no ids: the same ids are made)."""
    events = CAPTURED["answer"]
    reply = _streamed(events)
    assert reply.content == "Reading both." and reply.finish_reason == "tool_calls"
    names = [c["function"]["name"] for c in reply.tool_calls]
    assert names == ["read_file", "list_directory"]
    assert reply.tool_calls[0]["id"] == call_id("read_file", {"file_path": "a.txt"}, 0)
    parts = [p for e in events for p in e["candidates"][0]["content"]["parts"]]
    history = {"contents": [{"role": "user", "parts": [{"text": "go"}]},
                            {"role": "model", "parts": parts}]}  # fmt: skip
    assert to_chat("gemini", history)["messages"][1] == assistant_message(
        reply.content, reply.tool_calls
    )
    assert reply.usage["prompt_tokens"] == 100 and reply.response_id == "r1"
    assert reply_from_json("gemini", events).tool_calls == reply.tool_calls  # a JSON array


def test_a_response_without_id_answers_the_call_of_its_name() -> None:
    body = {
        "contents": [
            {"parts": [{"text": "go"}]},  # no role: the user's
            {"role": "model", "parts": [
                {"functionCall": {"name": "read_file", "args": {"path": "a"}}},
                {"functionCall": {"name": "read_file", "args": {"path": "b"}}},
                {"functionCall": {"name": "glob", "args": {}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "glob", "response": {"output": "a b"}}},
                {"functionResponse": {"name": "read_file", "response": {"output": "A"}}},
                {"functionResponse": {"name": "read_file", "response": {"error": 2, "x": 1}}},
                {"text": "and then?"},
            ]},
        ]
    }  # fmt: skip
    user, turn, *rest = to_chat("gemini", body)["messages"]
    assert user == {"role": "user", "content": "go"}
    ids = [c["id"] for c in turn["tool_calls"]]
    assert ids[0] != ids[1] and all(i.startswith("gc-") for i in ids)
    assert [m.get("tool_call_id") for m in rest] == [ids[2], ids[0], ids[1], None]
    assert [m["content"] for m in rest] == ["a b", "A", '{"error":2,"x":1}', "and then?"]


def test_parts_without_a_chat_form_read_as_placeholders() -> None:
    body = {
        "system_instruction": "Be brief.",  # snake_case and a plain string: both accepted
        "contents": [
            {"role": "user", "parts": [
                {"text": "look"},
                {"inline_data": {"mime_type": "image/png", "data": "iVBO"}},
                {"fileData": {"mimeType": "application/pdf", "fileUri": "gs://x"}},
                {"inlineData": {"mimeType": "audio/wav", "data": "UklG"}},
            ]},
            {"role": "model", "parts": [
                {"text": "secret plan", "thought": True},
                {"thoughtSignature": "c2ln"},
                {"executableCode": {"language": "PYTHON", "code": "1"}},
                {"text": "done"},
            ]},
        ],
    }  # fmt: skip
    system, user, model = to_chat("gemini", body)["messages"]
    assert system == {"role": "system", "content": "Be brief."}
    assert user["content"] == "look\n\n[image]\n\n[document]\n\n[audio]"
    assert model == {"role": "assistant", "content": "[executable_code]done"}


def test_tools_config_and_parameters() -> None:
    body = {
        "contents": [{"role": "user", "parts": [{"text": "x"}]}],
        "tools": [
            {"functionDeclarations": [
                {"name": "f", "description": "F.", "parameters": {
                    "type": "OBJECT", "properties": {"type": {"type": "STRING"}}}},
                {"name": "g"},
            ]},
            {"googleSearch": {}},
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["g"]}},
        "generationConfig": {"maxOutputTokens": 64, "stopSequences": ["END"], "seed": 3,
                             "candidateCount": 1, "responseMimeType": "application/json",
                             "topK": 40},
        "ignore_eos": True,
    }  # fmt: skip
    chat = to_chat("gemini", body, PLAIN)
    f, g = chat["tools"]
    assert f["function"]["parameters"] == {
        "type": "object",
        "properties": {"type": {"type": "string"}},
    }
    assert g["function"] == {"name": "g", "parameters": {"type": "object", "properties": {}}}
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "g"}}
    assert (chat["max_tokens"], chat["stop"], chat["seed"], chat["n"]) == (64, ["END"], 3, 1)
    assert chat["response_format"] == {"type": "json_object"} and chat["ignore_eos"] is True
    assert "stream" not in chat  # generateContent
    body["toolConfig"] = {"functionCallingConfig": {"mode": "NONE"}}
    assert to_chat("gemini", body)["tool_choice"] == "none"


def test_a_documented_answer() -> None:
    """``generateContent``'s answer: usage with thoughts and cached tokens; finish reasons."""
    answer = {
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "thinking...", "thought": True},
                {"text": "Let me read it."},
                {"functionCall": {"id": "fc-1", "name": "read_file", "args": {"path": "a"}}},
            ]},
            "finishReason": "STOP", "index": 0,
        }],
        "usageMetadata": {"promptTokenCount": 1200, "candidatesTokenCount": 30,
                          "thoughtsTokenCount": 12, "cachedContentTokenCount": 1024,
                          "totalTokenCount": 1242},
        "modelVersion": "gemini-2.5-pro", "responseId": "abc",
    }  # fmt: skip
    reply = reply_from_json("gemini", answer)
    assert reply.content == "Let me read it." and reply.finish_reason == "tool_calls"
    assert reply.tool_calls == [{"id": "fc-1", "type": "function",
                                 "function": {"name": "read_file", "arguments": '{"path":"a"}'}}]  # fmt: skip
    assert reply.usage == {
        "prompt_tokens": 1200, "completion_tokens": 42, "total_tokens": 1242,
        "prompt_tokens_details": {"cached_tokens": 1024},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }  # fmt: skip
    for reason, chat in (("MAX_TOKENS", "length"), ("SAFETY", "content_filter"),
                         ("STOP", "stop"), ("MALFORMED_FUNCTION_CALL", "MALFORMED_FUNCTION_CALL")):  # fmt: skip
        one = {"candidates": [{"content": {"parts": [{"text": "x"}]}, "finishReason": reason}]}
        assert reply_from_json("gemini", one).finish_reason == chat
    blocked = {"promptFeedback": {"blockReason": "SAFETY"}}
    assert reply_from_json("gemini", blocked).finish_reason == "content_filter"
    err = {"error": {"code": 429, "message": "Resource exhausted", "status": "RESOURCE_EXHAUSTED"}}
    assert reply_from_json("gemini", err).error == "Resource exhausted"


def test_the_stream_counts_token_bearing_events_and_ends_at_the_finish() -> None:
    reader = stream_reader("gemini")
    text = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Hel"}]}}]}
    empty = {"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}}]}
    last = {"candidates": [{"content": {"parts": [{"text": "lo"}]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 2}}  # fmt: skip
    assert reader.feed(_sse([text, empty])) == 1 and not reader.done
    assert reader.feed(_sse([last])) == 1 and reader.done
    reply = reader.reply()
    assert (reply.content, reply.finish_reason, reply.usage["total_tokens"]) == ("Hello", "stop", 7)
    bad = stream_reader("gemini")
    with pytest.raises(WireError, match="stream event: malformed JSON"):
        bad.feed(b"data: {nope\r\n\r\n")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({}, "body.contents"),
        ({"contents": {}}, "body.contents"),
        ({"contents": [{"role": "user"}]}, "contents[0].parts"),
        ({"contents": [{"parts": [{"text": "a"}, {"text": 5}]}]}, "contents[0].parts[1].text"),
        ({"contents": [{"parts": ["a"]}]}, "contents[0].parts[0]"),
        ({"contents": [{"role": 3, "parts": []}]}, "contents[0].role"),
        ({"contents": [{"role": "model", "parts": [{"functionCall": {"args": {}}}]}]},
         "contents[0].parts[0].functionCall.name"),
        ({"contents": [{"role": "model", "parts": [{"functionCall": {"name": "f", "args": [1]}}]}]},
         "contents[0].parts[0].functionCall.args"),
        ({"contents": [{"parts": [{"functionResponse": {"response": {}}}]}]},
         "contents[0].parts[0].functionResponse.name"),
        ({"contents": [], "generationConfig": 3}, "body.generationConfig"),
        ({"contents": [], "tools": [{"functionDeclarations": [{}]}]},
         "tools[0].functionDeclarations[0].name"),
        ({"contents": [], "systemInstruction": {"parts": [{"text": None}]}},
         "systemInstruction.parts[0].text"),
    ],
)  # fmt: skip
def test_a_broken_body_names_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ShapeError) as info:
        to_chat("gemini", body, PLAIN)
    assert info.value.field == field, str(info.value)


def test_a_broken_answer_names_the_field() -> None:
    with pytest.raises(ShapeError, match=r"candidates\[0\].content.parts\[0\].text"):
        reply_from_json("gemini", {"candidates": [{"content": {"parts": [{"text": 1}]}}]})
    with pytest.raises(ShapeError, match="body"):
        reply_from_json("gemini", "not an answer")


def test_a_response_whose_id_no_call_has_answers_the_call_of_its_name() -> None:
    """Gemini CLI's sub-agents (``invoke_agent``) carry a call the API sent without an id back
    without one, and answer it with an id of their own: the response still answers the call,
    whose id stays the one its answer was read with."""
    call = {"name": "read_file", "args": {"file_path": "/w/a.txt"}}
    body = {
        "contents": [
            {"role": "user", "parts": [{"text": "read a.txt"}]},
            {"role": "model", "parts": [{"functionCall": call}]},
            {"role": "user", "parts": [{"functionResponse": {
                "id": "6b6ecbf3-ba55-43b4-bcd5-9b8eb7e26f23#0-0", "name": "read_file",
                "response": {"output": "alpha beta\n"}}}]},
        ]
    }  # fmt: skip
    _, turn, result = to_chat("gemini", body)["messages"]
    answer = {"candidates": [{"content": {"role": "model", "parts": [{"functionCall": call}]}}]}
    cid = call_id("read_file", call["args"], 0)
    assert reply_from_json("gemini", answer).tool_calls[0]["id"] == cid
    assert turn["tool_calls"][0]["id"] == cid
    assert result == {"role": "tool", "tool_call_id": cid, "content": "alpha beta\n"}
    # an id that a call of the turn has still answers that call, whatever the names' order
    body["contents"][1]["parts"] = [
        {"functionCall": {**call, "id": "c1"}},
        {"functionCall": {**call, "id": "c2"}},
    ]
    body["contents"][2]["parts"][0]["functionResponse"]["id"] = "c2"
    assert to_chat("gemini", body)["messages"][2]["tool_call_id"] == "c2"
