"""Anthropic Messages as Claude Code speaks it today (issue 29): system messages mid-
conversation, every documented block type (and ones not yet documented) read into the chat form
with nothing lost, and the same assistant message from an answer as from the next history."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from agentload.errors import WireError
from agentload.trace.capture import assistant_message
from agentload.wire import reply_from_json, stream_reader, to_chat
from agentload.wire.reply import ShapeError

CACHE = {"type": "ephemeral"}
SYSTEM = [
    {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332", "cache_control": CACHE},
    {"type": "text", "text": "You are Claude Code, Anthropic's official CLI.", "cache_control": CACHE},
    {"type": "text", "text": "Here is useful information about the environment.", "cache_control": CACHE},
]  # fmt: skip
TOOLS = [
    {"name": n, "description": f"The {n} tool.", "input_schema": {"type": "object", "properties": {}}}
    for n in ("Agent", "Bash", "Edit", "Read", "Write")
] + [
    {"name": "ToolSearch", "description": "Find deferred tools.", "defer_loading": False,
     "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 5},
    {"type": "code_execution_20250825", "name": "code_execution"},
]  # fmt: skip
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
DOC = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "d"},
       "citations": {"enabled": True}, "cache_control": CACHE}  # fmt: skip
SEARCH = {"type": "search_result", "source": "https://x", "title": "X",
          "content": [{"type": "text", "text": "x"}], "citations": {"enabled": True}}  # fmt: skip


def claude_code_body() -> dict[str, Any]:
    """A request shaped as Claude Code 2.1.332 sends it (``POST /v1/messages?beta=true``)."""
    user_blocks: list[Any] = [
        {"type": "text", "text": f"<system-reminder>part {i}</system-reminder>"} for i in range(9)
    ]
    user_blocks.append({"type": "text", "text": "Fix the failing test.", "cache_control": CACHE})
    return {
        "model": "claude-opus-4-7",
        "max_tokens": 64000,
        "stream": True,
        "system": SYSTEM,
        "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": orjson.dumps({"device_id": "d", "session_id": "s"}).decode()},
        "tools": TOOLS,
        "messages": [
            {"role": "user", "content": user_blocks},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": "EqQBCkgIBx"},
                {"type": "text", "text": "Running it.", "citations": None},
                {"type": "tool_use", "id": "toolu_01", "name": "Bash",
                 "input": {"command": "pytest -x"}, "cache_control": CACHE},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_01", "content": [
                    {"type": "text", "text": "1 failed"}, IMAGE, DOC, SEARCH,
                    {"type": "tool_reference", "tool_name": "Grep"},
                ], "is_error": True, "cache_control": CACHE},
            ]},
            {"role": "system", "content": "Available agent types for the Agent tool: general."},
            {"role": "assistant", "content": [
                {"type": "redacted_thinking", "data": "EmwKAhgB"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search",
                 "input": {"query": "pytest"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "web_fetch_tool_result", "tool_use_id": "srvtoolu_2", "content": {}},
                {"type": "code_execution_tool_result", "tool_use_id": "s3", "content": {}},
                {"type": "bash_code_execution_tool_result", "tool_use_id": "s4", "content": {}},
                {"type": "text_editor_code_execution_tool_result", "tool_use_id": "s5", "content": {}},
                {"type": "tool_search_tool_result", "tool_use_id": "s6", "content": {}},
                {"type": "mcp_tool_use", "id": "mcptoolu_1", "name": "q", "server_name": "s", "input": {}},
                {"type": "mcp_tool_result", "tool_use_id": "mcptoolu_1", "content": [{"type": "text", "text": "r"}]},
                {"type": "container_upload", "file_id": "f"},
                {"type": "text", "text": "Found it."},
            ]},
            {"role": "system", "content": [{"type": "text", "text": "Reminder."}, IMAGE]},
            {"role": "user", "content": [IMAGE, DOC, SEARCH, {"type": "text", "text": "Go on."}]},
        ],
    }  # fmt: skip


def test_a_claude_code_request_reads_whole_system_messages_in_place() -> None:
    chat = to_chat("messages", claude_code_body())
    msgs = chat["messages"]
    assert [m["role"] for m in msgs] == [
        "system", "user", "assistant", "tool", "system", "assistant", "system", "user",
    ]  # fmt: skip
    assert msgs[0]["content"] == "\n\n".join(b["text"] for b in SYSTEM)
    assert msgs[1]["content"].endswith("part 8</system-reminder>\n\nFix the failing test.")
    assert msgs[2] == assistant_message(
        "[thinking]Running it.",
        [{"id": "toolu_01", "type": "function",
          "function": {"name": "Bash", "arguments": '{"command":"pytest -x"}'}}],
    )  # fmt: skip
    assert msgs[3] == {
        "role": "tool",
        "tool_call_id": "toolu_01",
        "content": "1 failed\n\n[image]\n\n[document]\n\n[search_result]\n\n[tool_reference]",
    }
    assert msgs[4] == {
        "role": "system",
        "content": "Available agent types for the Agent tool: general.",
    }
    assert msgs[5]["content"] == (
        "[redacted_thinking][server_tool_use][web_search_tool_result][web_fetch_tool_result]"
        "[code_execution_tool_result][bash_code_execution_tool_result]"
        "[text_editor_code_execution_tool_result][tool_search_tool_result][mcp_tool_use]"
        "[mcp_tool_result][container_upload]Found it."
    )
    assert "tool_calls" not in msgs[5]  # server tools ran on the server: no client call
    assert msgs[6] == {"role": "system", "content": "Reminder.\n\n[image]"}
    assert msgs[7] == {
        "role": "user",
        "content": "[image]\n\n[document]\n\n[search_result]\n\nGo on.",
    }
    names = [t["function"]["name"] for t in chat["tools"]]
    assert names == ["Agent", "Bash", "Edit", "Read", "Write", "ToolSearch"]  # server tools: none
    assert chat["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("choice", "want"),
    [({"type": "auto"}, "auto"), ({"type": "some_future_choice"}, None)],
)
def test_an_unknown_tool_choice_means_none(choice: dict[str, Any], want: Any) -> None:
    body = {"model": "m", "max_tokens": 9, "messages": [], "tools": TOOLS, "tool_choice": choice}
    assert to_chat("messages", body).get("tool_choice") == want


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"messages": {"role": "user"}}, "body.messages"),
        ({"messages": [{"role": "system", "content": 5}]}, "messages[0].content"),
        ({"messages": [{"role": "system", "content": ["x"]}]}, "messages[0].content[0]"),
        ({"messages": [{"role": "user", "content": [{"type": 3}]}]}, "messages[0].content[0].type"),
        ({"messages": [], "system": [{"text": "x"}]}, "system[0].type"),
    ],
)
def test_a_body_broken_in_shape_names_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ShapeError) as exc:
        to_chat("messages", body)
    assert isinstance(exc.value, WireError) and exc.value.field == field


ANSWER: dict[str, Any] = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-7",
    "content": [
        {"type": "thinking", "thinking": "", "signature": "sig"},
        {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
        {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
        {"type": "text", "text": "Per the docs, ", "citations": [{"type": "web_search_result_location", "url": "u"}]},
        {"type": "text", "text": "yes."},
        {"type": "tool_use", "id": "toolu_9", "name": "Read", "input": {"file_path": "/a"}},
    ],
    "stop_reason": "tool_use",
    "usage": {"input_tokens": 5, "output_tokens": 7},
}  # fmt: skip


def _events() -> bytes:
    def ev(name: str, **data: Any) -> bytes:
        return (
            b"event: "
            + name.encode()
            + b"\ndata: "
            + orjson.dumps({"type": name, **data})
            + b"\n\n"
        )

    out = [ev("message_start", message={**ANSWER, "content": [], "stop_reason": None})]
    for i, b in enumerate(ANSWER["content"]):
        start = (
            {**b, "text": ""} if b["type"] == "text" else {**b, "input": {}} if "input" in b else b
        )
        out.append(ev("content_block_start", index=i, content_block=start))
        if b["type"] == "text":
            out.append(
                ev("content_block_delta", index=i, delta={"type": "text_delta", "text": b["text"]})
            )
        elif "input" in b:
            args = orjson.dumps(b["input"]).decode()
            out.append(
                ev(
                    "content_block_delta",
                    index=i,
                    delta={"type": "input_json_delta", "partial_json": args},
                )
            )
        out.append(ev("content_block_stop", index=i))
    out.append(ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 7}))
    out.append(ev("message_stop"))
    return b"".join(out)  # fmt: skip


def test_an_answer_with_server_tools_reads_as_its_history_does() -> None:
    """JSON, stream and the next request's history give one assistant message."""
    r = reply_from_json("messages", ANSWER)
    s = stream_reader("messages")
    s.feed(_events())
    streamed = s.reply()
    assert (streamed.content, streamed.tool_calls) == (r.content, r.tool_calls)
    assert r.content == "[thinking][server_tool_use][web_search_tool_result]Per the docs, yes."
    history = {"model": "m", "max_tokens": 9, "messages": [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": ANSWER["content"]}]}  # fmt: skip
    assert to_chat("messages", history)["messages"][1] == assistant_message(r.content, r.tool_calls)
