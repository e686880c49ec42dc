"""Replay of calls recorded in OpenAI Responses and Anthropic Messages: in their own API when
the target answers it (``--api auto``), else (or with ``--api chat``) as their Chat Completions
translation; ``results.json`` says which, and the digests cover what was sent."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import orjson
import pytest

from agentload.measure.results import ResultsDocument
from agentload.options.engines import get_engine
from agentload.options.replay import ReplayConfig
from agentload.replay.bodies import BodyBuilder
from agentload.replay.plan import build_plans
from agentload.replay.run import run_replay
from agentload.replay.salt import make_salt, salt_native
from agentload.trace.trace import load_trace

sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))

from faultserver import FaultPlan, FaultServer

_TOOLS = [
    {
        "name": "lookup",
        "description": "look a word up",
        "input_schema": {
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"],
        },
    }
]


@pytest.fixture
def recorded(record_proxy: Callable[..., Any], simulator: Any) -> Path:
    """A trace of two sessions through the proxy: a Messages tool loop (system blocks with
    cache_control) and a Responses tool loop."""
    rp = record_proxy(simulator.base_url)
    ac = anthropic.Anthropic(base_url=rp.url, api_key="x", max_retries=0)
    msgs: list[Any] = [{"role": "user", "content": "Look up 'serendipity' please."}]
    system = [
        {"type": "text", "text": "You look words up.", "cache_control": {"type": "ephemeral"}}
    ]
    for _ in range(3):
        with ac.messages.stream(
            model="agentload-sim", max_tokens=2048, system=system, messages=msgs, tools=_TOOLS
        ) as s:
            m = s.get_final_message()
        msgs.append(
            {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in m.content]}
        )
        uses = [b for b in m.content if b.type == "tool_use"]
        if not uses:
            break
        msgs.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": u.id, "content": "a happy accident"} for u in uses
        ]})  # fmt: skip
    oc = openai.OpenAI(base_url=rp.base_url, api_key="x", max_retries=0)
    tools: Any = [{"type": "function", "name": "lookup", "description": "look a word up",
                   "parameters": _TOOLS[0]["input_schema"]}]  # fmt: skip
    inp: list[Any] = [{"role": "user", "content": "Look up 'petrichor' please."}]
    for _ in range(3):
        r = oc.responses.create(
            model="agentload-sim", input=inp, tools=tools, instructions="Be brief.", stream=False
        )
        inp += [o.model_dump(exclude_none=True) for o in r.output]
        calls = [o for o in r.output if o.type == "function_call"]
        if not calls:
            break
        inp += [{"type": "function_call_output", "call_id": c.call_id, "output": "rain smell"}
                for c in calls]  # fmt: skip
    ac.close()  # its kept-alive connections (a replay's gc.collect would find them open)
    oc.close()
    return rp.stop()


def _replay(trace: Path, endpoint: str, api: str = "auto") -> ResultsDocument:
    cfg = ReplayConfig(
        traces=[str(trace)], endpoint=endpoint, model="agentload-sim", levels=[1], sessions=2,
        start_at="zero", gap_scale=0.0, api=api,
    )  # fmt: skip
    return asyncio.run(run_replay(cfg))


def _counts(trace: Path) -> dict[str, int]:
    t = load_trace(trace)
    out: dict[str, int] = {}
    for c in t.calls.values():
        out[c.request.api] = out.get(c.request.api, 0) + 1
    assert set(out) == {"messages", "responses"}
    return out


def test_a_target_that_speaks_the_api_gets_it(recorded: Path, simulator: Any) -> None:
    n = _counts(recorded)
    native = _replay(recorded, simulator.base_url)
    assert native.plan.apis == {api: {api: k} for api, k in n.items()}
    reqs = [r for p in native.points for r in p.requests]
    assert len(reqs) == sum(n.values())
    assert all(r.error is None for r in reqs)
    assert all(r.ttft_ns is not None and r.completion_tokens for r in reqs)
    again = _replay(recorded, simulator.base_url)
    assert again.digest_manifest == native.digest_manifest  # identical traffic, run to run
    chat = _replay(recorded, simulator.base_url, api="chat")
    assert chat.plan.apis == {api: {"chat": k} for api, k in n.items()}
    assert all(r.error is None for p in chat.points for r in p.requests)
    # What was sent differs between the two, and the digests say so.
    assert set(chat.digest_manifest) == set(native.digest_manifest)
    assert all(chat.digest_manifest[k] != native.digest_manifest[k] for k in chat.digest_manifest)


def test_a_target_that_does_not_speak_it_gets_the_chat_form(recorded: Path) -> None:
    n = _counts(recorded)
    srv = FaultServer(FaultPlan(model="agentload-sim")).start()
    try:
        res = _replay(recorded, srv.base_url)
    finally:
        srv.stop()
    assert res.plan.apis == {api: {"chat": k} for api, k in n.items()}
    posted = [t for m, t, _ in srv.requests if m == "POST"]
    # one probe of each API (404), then every call in chat
    assert sorted(t for t in posted if not t.endswith("/chat/completions")) == [
        "/v1/messages",
        "/v1/responses",
    ]
    assert sum(t.endswith("/chat/completions") for t in posted) >= sum(n.values())


@pytest.mark.parametrize("at", ["start", "after-system"])
def test_native_bodies_are_pinned_and_salted_in_their_own_fields(recorded: Path, at: str) -> None:
    (plan,) = [p for p in build_plans([load_trace(recorded)], salt_at=at) if any(  # type: ignore[arg-type]
        c.api == "messages" for c in p.calls.values())]  # fmt: skip
    call = next(c for c in plan.calls.values() if c.api == "messages")
    call.use_api("messages")
    salt = make_salt("0" * 9, 3)
    body = orjson.loads(BodyBuilder("m", get_engine("vllm")).build(call, salt, "s"))
    assert body["max_tokens"] == call.expected_tokens and body["model"] == "m"
    assert body["stream"] is True and "stream_options" not in body
    native = call.native or {}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    if at == "start":
        assert body["system"][0]["text"] == salt + "You look words up."
        assert body["messages"] == native["messages"]
    else:  # after the system prompt: in front of the first message's text
        assert body["system"] == native["system"]
        first, recorded_first = body["messages"][0], native["messages"][0]
        text = (
            first["content"] if isinstance(first["content"], str) else first["content"][0]["text"]
        )
        old = recorded_first["content"]
        assert text == salt + (old if isinstance(old, str) else old[0]["text"])
        assert body["messages"][1:] == native["messages"][1:]
    with pytest.raises(ValueError):
        call.use_api("responses")


def test_salt_native_puts_the_salt_where_the_system_text_is() -> None:
    s = "[agentload-salt 0000000001]\n"
    assert salt_native("messages", {"system": "sys"}, s)["system"] == s + "sys"
    assert salt_native("messages", {}, s)["system"] == s
    assert (
        salt_native("responses", {"instructions": "i", "input": "x"}, s)["instructions"] == s + "i"
    )
    assert salt_native("responses", {"input": "x"}, s)["input"] == s + "x"
    out = salt_native("responses", {"input": [{"role": "user", "content": "q"}]}, s)
    assert out["input"][0]["content"] == s + "q"


def test_previous_response_id_is_followed_and_replayed_as_the_whole_conversation(
    record_proxy: Callable[..., Any], simulator: Any
) -> None:
    """An agent that sends only its new items after ``previous_response_id``: the proxy records
    the conversation the server saw, as the agent's next call; replay sends that call as its
    chat form (no target holds the recording's responses), the first in Responses."""
    rp = record_proxy(simulator.base_url)
    oc = openai.OpenAI(base_url=rp.base_url, api_key="x", max_retries=0)
    tools: Any = [{"type": "function", "name": "lookup", "description": "look a word up",
                   "parameters": _TOOLS[0]["input_schema"]}]  # fmt: skip
    first = oc.responses.create(model="agentload-sim", input="Look up 'zephyr'.", tools=tools)
    (fc,) = [o for o in first.output if o.type == "function_call"]
    result: Any = [{"type": "function_call_output", "call_id": fc.call_id, "output": "a wind"}]
    second = oc.responses.create(
        model="agentload-sim", previous_response_id=first.id, input=result, tools=tools
    )
    assert second.output_text
    oc.close()
    path = rp.stop()
    t = load_trace(path)
    assert len(t.sessions) == len(t.agents) == 1
    a, b = sorted(t.calls.values(), key=lambda c: c.seq)
    assert (a.seq, b.seq) == (0, 1) and a.agent_id == b.agent_id
    assert b.messages[: len(a.messages)] == a.messages  # the whole conversation, not its tail
    assert len(b.messages) == len(a.messages) + 2  # + the reply, + the tool result
    (tc,) = t.tool_calls.values()
    assert tc.id == fc.call_id and tc.observed_by == "proxy" and b.depends_on == [tc.id]
    res = _replay(path, simulator.base_url)
    assert res.plan.apis == {"responses": {"responses": 1, "chat": 1}}
    assert all(r.error is None for p in res.points for r in p.requests)


def test_todays_claude_code_and_codex_bodies_are_recorded_and_replayed_as_sent(
    record_proxy: Callable[..., Any], simulator: Any
) -> None:
    """Issue 29: a Messages request with a system message mid-conversation and server-tool
    blocks, and a Responses request with namespace, custom and hosted tools, are recorded (the
    chat form with their placeholders, the body as sent) and replayed in their own API."""
    rp = record_proxy(simulator.base_url)
    cache = {"type": "ephemeral"}
    claude: dict[str, Any] = {
        "model": "agentload-sim", "max_tokens": 2048, "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": cache}],
        "thinking": {"type": "enabled", "budget_tokens": 1024, "display": "omitted"},
        "context_management": {"edits": []}, "tools": _TOOLS,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Look up 'kismet'."}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "", "signature": "sig"},
                {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}},
                {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
                {"type": "text", "text": "Searching."}]},
            {"role": "system", "content": "Available agent types: general-purpose."},
            {"role": "user", "content": [{"type": "text", "text": "Go on.", "cache_control": cache}]},
        ],
    }  # fmt: skip
    codex: dict[str, Any] = {
        "model": "agentload-sim", "instructions": "You are Codex.", "store": False, "stream": True,
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "<env>"}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]},
            {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done!"},
            {"type": "agent_message", "content": [{"type": "input_text", "text": "Sub-agent: ok."}]},
        ],
        "tools": [{"type": "namespace", "name": "multi_agent_v1", "description": "d", "tools": [
            {"type": "function", "name": "spawn_agent", "parameters": {"type": "object"}}]},
            {"type": "custom", "name": "apply_patch", "description": "Patch."},
            {"type": "web_search", "external_web_access": False}],
        "include": ["reasoning.encrypted_content"], "prompt_cache_key": "k",
        "client_metadata": {"originator": "codex_cli_rs"},
    }  # fmt: skip
    for path, body in (("/v1/messages?beta=true", claude), ("/v1/responses", codex)):
        r = httpx.post(rp.url + path, json=body, timeout=30)
        assert r.status_code == 200, r.text
    trace = rp.stop()
    t = load_trace(trace)
    calls = {c.request.api: c for c in t.calls.values()}
    assert set(calls) == {"messages", "responses"}
    m = t.messages(calls["messages"])
    assert [x["role"] for x in m] == ["system", "user", "assistant", "system", "user"]
    assert m[2]["content"] == "[thinking][server_tool_use][web_search_tool_result]Searching."
    r = t.messages(calls["responses"])
    assert [x["role"] for x in r] == ["system", "developer", "user", "assistant", "tool", "user"]
    assert [f["function"]["name"] for f in t.tools(calls["responses"]) or []] == [
        "spawn_agent",
        "apply_patch",
    ]
    for api, body in (("messages", claude), ("responses", codex)):
        assert t.native_body(calls[api]) == body  # as sent
    res = _replay(trace, simulator.base_url)
    assert res.plan.apis == {"messages": {"messages": 1}, "responses": {"responses": 1}}
    assert all(r.error is None for p in res.points for r in p.requests)
