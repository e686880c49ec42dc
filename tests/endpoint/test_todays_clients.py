"""The simulator serves today's clients (issue 29): Claude Code's ``/v1/messages`` requests with
system messages mid-conversation and every block type, Codex's ``/v1/responses`` requests with
namespace, custom and hosted tools and every item type, Chat Completions with every content
part; what it does not support is answered as the real servers word it. Over real HTTP."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest

from agentload.wire import reply_from_json, stream_reader

CACHE = {"type": "ephemeral"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"}}
READ = {"name": "Read", "description": "Read a file.", "input_schema": {
    "type": "object", "properties": {"file_path": {"type": "string"}}, "required": ["file_path"]}}  # fmt: skip


def claude_code(model: str, stream: bool) -> dict[str, Any]:
    """A request as Claude Code 2.1.332 sends it, a system notice mid-conversation."""
    return {
        "model": model, "max_tokens": 32000, "stream": stream,
        "system": [{"type": "text", "text": f"Part {i}.", "cache_control": CACHE} for i in range(3)],
        "thinking": {"type": "enabled", "budget_tokens": 31999, "display": "omitted"},
        "context_management": {"edits": [{"type": "clear_thinking_20251015", "keep": "all"}]},
        "metadata": {"user_id": orjson.dumps({"session_id": "s"}).decode()},
        "tools": [READ, {**READ, "name": "ToolSearch", "defer_loading": True},
                  {"type": "web_search_20250305", "name": "web_search", "max_uses": 5}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": f"<system-reminder>{i}</system-reminder>"}
                                         for i in range(9)] + [{"type": "text", "text": "Read a.py"}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": "EqQB"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "q"}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "Reading.", "citations": None},
                {"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"file_path": "a.py"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                {"type": "text", "text": "print(1)"}, IMAGE,
                {"type": "search_result", "source": "s", "title": "t", "content": []}]}]},
            {"role": "system", "content": "Available agent types for the Agent tool: general-purpose."},
            {"role": "user", "content": [{"type": "redacted_thinking", "data": "x"}, IMAGE,
                                         {"type": "text", "text": "Go on.", "cache_control": CACHE}]},
        ],
    }  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
def test_claude_code_with_a_system_message_mid_conversation_is_answered(
    simulator: Any, stream: bool
) -> None:
    url = simulator.base_url + "/messages?beta=true"
    r = httpx.post(url, json=claude_code(simulator.model, stream), timeout=30)
    assert r.status_code == 200, r.text
    if stream:
        reader = stream_reader("messages")
        reader.feed(r.content)
        assert reader.done and reader.reply().error is None
        got = reader.reply()
    else:
        got = reply_from_json("messages", r.json())
    assert got.content or got.tool_calls
    assert {c["function"]["name"] for c in got.tool_calls} <= {"Read", "ToolSearch"}


def test_a_broken_messages_body_is_worded_as_anthropic_words_it(simulator: Any) -> None:
    body = claude_code(simulator.model, False)
    body["messages"][0]["content"][3] = {"type": "text"}
    r = httpx.post(simulator.base_url + "/messages", json=body, timeout=30)
    assert r.status_code == 400
    assert r.json() == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages.0.content.3.text: Field required"}}  # fmt: skip


SPAWN = {"type": "function", "name": "spawn_agent", "description": "Start a sub-agent.",
         "strict": False, "parameters": {"type": "object", "properties": {"task": {"type": "string"}}}}  # fmt: skip
PATCH = {"type": "custom", "name": "apply_patch", "description": "Apply a patch.",
         "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}}  # fmt: skip


def codex(model: str, stream: bool, choice: Any = "auto") -> dict[str, Any]:
    """A request as Codex 0.171 sends it."""
    return {
        "model": model, "instructions": "You are Codex.", "stream": stream, "store": False,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<permissions>"}]},
            {"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": "Fix the test."}, {"type": "input_image", "image_url": "data:x"}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
            {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
            {"type": "function_call", "call_id": "c1", "name": "spawn_agent", "namespace": "multi_agent_v1",
             "arguments": '{"task":"look"}'},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call_output", "call_id": "c1", "output": "started"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"},
            {"type": "agent_message", "content": [{"type": "input_text", "text": "Sub-agent: found it."}]},
            {"type": "compaction", "encrypted_content": "gAAB"},
        ],
        "tools": [{"type": "namespace", "name": "multi_agent_v1", "description": "Sub-agents.", "tools": [SPAWN]},
                  PATCH, {"type": "web_search", "external_web_access": False}],
        "tool_choice": choice, "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "019b",
        "client_metadata": {"originator": "codex_cli_rs"},
    }  # fmt: skip


@pytest.mark.parametrize("stream", [False, True])
def test_codex_with_namespace_custom_and_hosted_tools_is_answered(
    simulator: Any, stream: bool
) -> None:
    body = codex(simulator.model, stream, {"type": "function", "name": "spawn_agent"})
    r = httpx.post(simulator.base_url + "/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text
    if stream:
        reader = stream_reader("responses")
        reader.feed(r.content)
        got = reader.reply()
    else:
        got = reply_from_json("responses", r.json())
    assert [c["function"]["name"] for c in got.tool_calls] == ["spawn_agent"]  # the inner name


@pytest.mark.parametrize("stream", [False, True])
def test_a_call_of_a_custom_tool_is_a_custom_tool_call(simulator: Any, stream: bool) -> None:
    body = codex(simulator.model, stream, {"type": "function", "name": "apply_patch"})
    r = httpx.post(simulator.base_url + "/responses", json=body, timeout=30)
    assert r.status_code == 200, r.text
    if stream:
        events = [
            orjson.loads(line[6:]) for line in r.text.split("\n") if line.startswith("data: ")
        ]
        final = events[-1]["response"]
        deltas = [e for e in events if e["type"] == "response.custom_tool_call_input.delta"]
        (done,) = [e for e in events if e["type"] == "response.custom_tool_call_input.done"]
        assert "".join(e["delta"] for e in deltas) == done["input"]
    else:
        final = r.json()
    (call,) = [o for o in final["output"] if o["type"] != "message"]
    assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch"
    assert isinstance(call["input"], str) and "arguments" not in call
    if stream:
        assert done["input"] == call["input"]


def test_a_broken_responses_body_is_worded_as_openai_words_it(simulator: Any) -> None:
    body = codex(simulator.model, False)
    del body["input"][5]["call_id"]
    r = httpx.post(simulator.base_url + "/responses", json=body, timeout=30)
    assert r.status_code == 400
    assert r.json() == {"error": {"message": "Missing required parameter: 'input[5].call_id'.",
                                  "type": "invalid_request_error", "param": "input[5].call_id",
                                  "code": "missing_required_parameter"}}  # fmt: skip
    body["input"] = 5
    err = httpx.post(simulator.base_url + "/responses", json=body, timeout=30).json()["error"]
    assert err["message"] == (
        "Invalid type for 'input': expected a string or a list, but got an integer instead."
    )
    assert (err["param"], err["code"]) == ("input", "invalid_type")


def test_chat_with_every_content_part_and_a_custom_tool(simulator: Any) -> None:
    fn = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}
    custom = {"type": "custom", "custom": {"name": "apply_patch", "description": "Patch."}}
    body = {
        "model": simulator.model,
        "messages": [
            {"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
            {"role": "user", "content": [
                {"type": "text", "text": "What is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBO", "detail": "low"}},
                {"type": "input_audio", "input_audio": {"data": "UklG", "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-1"}}]},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
            {"role": "user", "content": "Try again."},
        ],
        "tools": [fn, custom],
    }  # fmt: skip
    r = httpx.post(simulator.base_url + "/chat/completions", json=body, timeout=30)
    assert r.status_code == 200, r.text
    calls = r.json()["choices"][0]["message"].get("tool_calls") or []
    assert {c["function"]["name"] for c in calls} <= {"lookup"}  # no call to a custom tool
    body["tools"] = [fn, {"type": "web_search"}]
    bad = httpx.post(simulator.base_url + "/chat/completions", json=body, timeout=30)
    assert bad.status_code == 400
    assert bad.json()["error"] == {
        "message": "Invalid value: 'web_search'. Supported values are: 'function' and 'custom'.",
        "type": "invalid_request_error",
        "param": "tools[1].type",
        "code": "invalid_value",
    }
