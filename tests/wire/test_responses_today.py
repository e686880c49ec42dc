"""OpenAI Responses as Codex speaks it today (issue 29): every input/output item type, namespace
and hosted tools, read into the chat form with nothing lost; an answer reads as its history."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from agentload.trace.capture import assistant_message
from agentload.wire import reply_from_json, stream_reader, to_chat
from agentload.wire.reply import ShapeError

SPAWN = {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.",
         "strict": False, "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}}  # fmt: skip
SHELL = {"type": "function", "name": "shell", "description": "Run a command.", "strict": False,
         "parameters": {"type": "object", "properties": {"command": {"type": "array"}}}}  # fmt: skip
TOOLS: list[Any] = [
    SHELL,
    {"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.",
     "tools": [SPAWN, {**SPAWN, "name": "wait_agent"}]},
    {"type": "web_search", "external_web_access": False},
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch.",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
    {"type": "file_search", "vector_store_ids": ["vs_1"]},
    {"type": "mcp", "server_label": "s", "server_url": "https://s"},
    {"type": "image_generation"}, {"type": "code_interpreter", "container": {"type": "auto"}},
    {"type": "local_shell"}, {"type": "computer_use_preview", "display_width": 1, "display_height": 1,
                              "environment": "linux"},
]  # fmt: skip


def codex_body() -> dict[str, Any]:
    """A request shaped as Codex 0.171 sends it (``POST /v1/responses``)."""
    return {
        "model": "gpt-5.5-codex",
        "instructions": "You are Codex.",
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Fix it."}, {"type": "input_image", "image_url": "data:x"},
                {"type": "input_file", "file_id": "f"}, {"type": "some_part", "x": 1}]},
            {"type": "compaction", "encrypted_content": "gAAA"},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAB"},
            {"type": "message", "role": "assistant", "content": [
                {"type": "output_text", "text": "On it.", "annotations": []},
                {"type": "refusal", "refusal": " Not that."}]},
            {"type": "function_call", "call_id": "c1", "name": "spawn_agent",
             "namespace": "multi_agent_v1", "arguments": '{"task":"look"}'},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "local_shell_call", "call_id": "c3", "status": "completed",
             "action": {"type": "exec", "command": ["ls"]}},
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
            {"type": "mcp_call", "id": "mcp_1", "name": "q", "server_label": "s", "arguments": "{}", "output": "o"},
            {"type": "function_call_output", "call_id": "c1", "output": "agent started"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"},
            {"type": "local_shell_call_output", "call_id": "c3", "output": "a.py"},
            {"type": "agent_message", "content": [{"type": "input_text", "text": "Sub-agent: found it."}]},
            {"type": "computer_call", "call_id": "c4", "action": {"type": "screenshot"}},
            {"type": "computer_call_output", "call_id": "c4",
             "output": {"type": "computer_screenshot", "image_url": "data:y"}},
            {"type": "mcp_approval_response", "approval_request_id": "a", "approve": True},
            {"type": "item_reference", "id": "msg_0"},
        ],
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": True,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "stream": True,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": "019b-session",
        "client_metadata": {"originator": "codex_cli_rs"},
    }  # fmt: skip


def _fn(cid: str, name: str, args: Any) -> dict[str, Any]:
    text = args if isinstance(args, str) else orjson.dumps(args).decode()
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": text}}


def test_a_codex_request_loses_nothing() -> None:
    chat = to_chat("responses", codex_body())
    assert chat["messages"] == [
        {"role": "system", "content": "You are Codex."},
        {"role": "developer", "content": "<permissions>"},
        {"role": "user", "content": "Fix it.[image][file][some_part]"},
        {"role": "user", "content": "[compaction]"},
        {"role": "assistant", "content": "[reasoning]On it. Not that.[web_search_call][mcp_call]",
         "tool_calls": [_fn("c1", "spawn_agent", '{"task":"look"}'),
                        _fn("c2", "apply_patch", {"input": "*** Begin Patch"}),
                        _fn("c3", "local_shell", {"type": "exec", "command": ["ls"]})]},
        {"role": "tool", "tool_call_id": "c1", "content": "agent started"},
        {"role": "tool", "tool_call_id": "c2", "content": "Done!"},
        {"role": "tool", "tool_call_id": "c3", "content": "a.py"},
        {"role": "user", "content": "Sub-agent: found it."},
        {"role": "assistant", "content": None, "tool_calls": [_fn("c4", "computer", {"type": "screenshot"})]},
        {"role": "tool", "tool_call_id": "c4", "content": "[computer_screenshot]"},
        {"role": "user", "content": "[mcp_approval_response]"},
        {"role": "user", "content": "[item_reference]"},
    ]  # fmt: skip
    tools = {t["function"]["name"]: t["function"] for t in chat["tools"]}
    assert list(tools) == ["shell", "spawn_agent", "wait_agent", "apply_patch"]  # hosted: none
    assert tools["spawn_agent"]["parameters"] == SPAWN["parameters"]
    assert tools["apply_patch"]["parameters"]["properties"] == {"input": {"type": "string"}}
    assert chat["tool_choice"] == "auto" and chat["stream_options"] == {"include_usage": True}


def test_an_agent_message_keeps_its_role_and_text() -> None:
    items = [{"type": "agent_message", "role": "assistant", "text": "Final answer."},
             {"type": "agent_message", "role": "user", "content": "Your task: look."}]  # fmt: skip
    assert to_chat("responses", {"input": items})["messages"] == [
        {"role": "assistant", "content": "Final answer."},
        {"role": "user", "content": "Your task: look."},
    ]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"input": [{"type": "custom_tool_call", "name": "apply_patch", "input": "x"}]}, "input[0].call_id"),
        ({"input": [{"type": 7}]}, "input[0].type"),
        ({"input": [{"role": "user", "content": [{"type": "input_text"}]}]}, "input[0].content[0].text"),
        ({"input": "x", "tools": [{"type": "namespace", "name": "n", "tools": "spawn"}]}, "tools[0].tools"),
        ({"input": "x", "tools": [{"type": "namespace", "tools": [{"type": "function"}]}]}, "tools[0].tools[0].name"),
    ],
)  # fmt: skip
def test_a_body_broken_in_shape_names_the_field(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ShapeError) as exc:
        to_chat("responses", body)
    assert exc.value.field == field


ANSWER: dict[str, Any] = {
    "id": "resp_9",
    "object": "response",
    "status": "completed",
    "output": [
        {"id": "rs_9", "type": "reasoning", "summary": [], "encrypted_content": "gAAC"},
        {"id": "ws_9", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}},
        {"id": "msg_9", "type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "Patching.", "annotations": []}]},
        {"id": "ctc_9", "type": "custom_tool_call", "call_id": "call_p", "name": "apply_patch",
         "input": "*** Begin Patch\n*** End Patch", "status": "completed"},
        {"id": "fc_9", "type": "function_call", "call_id": "call_s", "name": "spawn_agent",
         "namespace": "multi_agent_v1", "arguments": '{"task":"t"}', "status": "completed"},
    ],
    "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
}  # fmt: skip


def _sse(final: dict[str, Any]) -> bytes:
    evs: list[dict[str, Any]] = [{"type": "response.created", "response": {**ANSWER, "output": []}}]
    for i, item in enumerate(ANSWER["output"]):
        start = {**item, "input": ""} if item["type"] == "custom_tool_call" else item
        evs.append({"type": "response.output_item.added", "output_index": i, "item": start})
        if item["type"] == "custom_tool_call":
            for piece in (item["input"][:7], item["input"][7:]):
                evs.append({"type": "response.custom_tool_call_input.delta", "output_index": i,
                            "item_id": item["id"], "delta": piece})  # fmt: skip
        if item["type"] == "message":
            evs.append({"type": "response.output_text.delta", "output_index": i,
                        "content_index": 0, "delta": "Patching."})  # fmt: skip
        evs.append({"type": "response.output_item.done", "output_index": i, "item": item})
    evs.append({"type": "response.completed", "response": final})
    return b"".join(
        b"event: " + e["type"].encode() + b"\ndata: " + orjson.dumps(e) + b"\n\n" for e in evs
    )


@pytest.mark.parametrize("final_lists_output", [True, False])
def test_an_answer_with_every_item_reads_as_its_history(final_lists_output: bool) -> None:
    r = reply_from_json("responses", ANSWER)
    assert r.content == "[reasoning][web_search_call]Patching."
    assert r.tool_calls == [
        _fn("call_p", "apply_patch", {"input": "*** Begin Patch\n*** End Patch"}),
        _fn("call_s", "spawn_agent", '{"task":"t"}'),
    ]
    final = ANSWER if final_lists_output else {k: v for k, v in ANSWER.items() if k != "output"}
    s = stream_reader("responses")
    carried = s.feed(_sse(final))
    streamed = s.reply()
    assert (streamed.content, streamed.tool_calls) == (r.content, r.tool_calls)
    assert carried == 5  # a text delta, two custom input deltas, two calls' starts
    nxt = {"input": [{"role": "user", "content": "go"}, *ANSWER["output"]]}
    assert to_chat("responses", nxt)["messages"][1] == assistant_message(r.content, r.tool_calls)
