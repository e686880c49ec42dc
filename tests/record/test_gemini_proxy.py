"""Google's Gemini API through ``agentload record`` in front of the simulator: a streamed
``:streamGenerateContent?alt=sse`` call and a plain ``:generateContent`` one are recorded as
``gemini`` calls (the model and streaming read from the path, the body kept as sent), the
function responses of the next request close the calls as ``tool_call`` records,
``:countTokens`` is proxied and not recorded, a broken body is an ``unread_request`` event;
the trace validates, exports to Weka, Mooncake and OTel, and replays in the Gemini API."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent))  # agents_helpers

from agents_helpers import check_replays, cli, replayed_requests, validate

from agentload.cli import app
from agentload.options.engines import get_engine
from agentload.replay.bodies import BodyBuilder
from agentload.replay.plan import build_plans
from agentload.replay.salt import make_salt, salt_gemini
from agentload.trace.trace import Trace, load_trace
from agentload.wire import stream_reader, to_chat

KEY = "gemini-proxy-test-key-0123456789"
MODEL = "agentload-sim"
TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": name,
                "description": description,
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {arg: {"type": "string"}},
                    "required": [arg],
                },
            }
            for name, description, arg in (
                ("list_directory", "List the files of a directory.", "path"),
                ("read_file", "Read a file.", "path"),
                ("run_shell_command", "Run a shell command.", "command"),
            )
        ]
    }
]
FIRST = {
    "systemInstruction": {"parts": [{"text": "You are a coding agent working in /repo."}]},
    "contents": [{"role": "user", "parts": [{"text": "calc.py: add(2, 3) prints -1; fix it."}]}],
    "tools": TOOLS,
    "generationConfig": {"temperature": 1, "topK": 64, "thinkingConfig": {"includeThoughts": True}},
}


def _url(proxy: Any, method: str) -> str:
    return f"{proxy.url}/v1beta/models/{MODEL}:{method}"


def _record(proxy: Any) -> list[dict[str, Any]]:
    """Four requests through the proxy: a count, a streamed call, its results carried back
    as the API sends a turn (calls without ids) to a plain call, a broken body. The parts of
    the streamed answer."""
    headers = {"x-goog-api-key": KEY}
    with httpx.Client(headers=headers, timeout=60) as http:
        counted = http.post(_url(proxy, "countTokens"), json={"contents": FIRST["contents"]})
        assert counted.status_code == 200 and counted.json()["totalTokens"] > 0
        r = http.post(_url(proxy, "streamGenerateContent") + "?alt=sse", json=FIRST)
        assert r.status_code == 200, r.text
        reader = stream_reader("gemini")
        reader.feed(r.content)
        reply = reader.reply()
        assert reader.done and reply.tool_calls, reply
        parts = [{"text": reply.content}] if reply.content else []
        parts += [{"functionCall": {"name": c["function"]["name"],
                                    "args": json.loads(c["function"]["arguments"])}}
                  for c in reply.tool_calls]  # fmt: skip
        results = [{"functionResponse": {"name": c["function"]["name"],
                                         "response": {"output": f"out of {c['id']}"}}}
                   for c in reply.tool_calls]  # fmt: skip
        second = dict(FIRST, contents=[*FIRST["contents"], {"role": "model", "parts": parts},
                                       {"role": "user", "parts": results}])  # fmt: skip
        assert http.post(_url(proxy, "generateContent"), json=second).status_code == 200
        broken = http.post(_url(proxy, "generateContent"), json={"contents": 3})
        assert broken.status_code == 400 and broken.json()["error"]["status"] == "INVALID_ARGUMENT"
    return reply.tool_calls


def test_gemini_calls_are_recorded_exported_and_replayed(
    record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    proxy = record_proxy(upstream=simulator.base_url.removesuffix("/v1"))
    asked = _record(proxy)
    path = proxy.stop()
    validate(path)
    assert KEY.encode() not in path.read_bytes()
    trace = load_trace(path)
    first, second = sorted(trace.calls.values(), key=lambda c: c.timings.submit_ns)
    assert (first.request.api, second.request.api) == ("gemini", "gemini")
    assert (first.request.stream, second.request.stream) == (True, False)
    assert first.request.model == MODEL and first.request.temperature == 1
    assert trace.native_body(first) == FIRST  # as sent, topK and thinkingConfig included
    assert first.usage.prompt_tokens and first.timings.first_token_ns is not None
    assert second.agent_id == first.agent_id and second.seq == 1  # one agent, call after call
    assert [t.name for t in first.response.tool_calls] == [c["function"]["name"] for c in asked]
    tools = sorted(trace.tool_calls.values(), key=lambda t: t.start_ns)
    assert [t.llm_call_id for t in tools] == [first.id] * len(asked)
    assert [t.output_bytes for t in tools] == [len(f"out of {c['id']}") for c in asked]
    unread = [e for e in trace.events if e.kind == "unread_request"]
    assert len(unread) == 1 and unread[0].details["api"] == "gemini", trace.events
    # the exports read the chat form, whatever the API
    runner = CliRunner()
    for fmt, out in (("weka", "weka"), ("mooncake", "m.jsonl"), ("otel", "o.json")):
        done = runner.invoke(app, ["trace", "export", fmt, str(path), "-o", str(tmp_path / out)])
        assert done.exit_code == 0, (fmt, done.output)
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    assert len(lines) == 2
    check_replays(path, trace, simulator.base_url, MODEL, tmp_path / "replay")
    # --api chat: each call as its Chat Completions translation
    out = tmp_path / "as-chat"
    done = cli("replay", str(path), "--endpoint", simulator.base_url, "--model", MODEL,
               "--api", "chat", "--sessions", "1", "--start-at", "zero", "--out", str(out))  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["plan"]["apis"] == {"gemini": {"chat": 2}}
    assert [r["status"] for r in replayed_requests(results)] == [200, 200]
    _check_bodies(trace)


def _check_bodies(trace: Trace) -> None:
    """What replay sends of the first call in the Gemini API: the body as recorded, no model
    nor stream (the path names both), its length pinned in ``generationConfig`` (the rest of
    it kept), the engine's extras, the salt after the system instruction (``start``: in it)."""
    salt = make_salt("0" * 9, 7)
    for at in ("after-system", "start"):
        [plan] = build_plans([trace], salt_at=at)  # type: ignore[arg-type]
        call = plan.calls[plan.order[0]]
        call.use_api("gemini")
        body = json.loads(BodyBuilder("m", get_engine("vllm")).build(call, salt, "s"))
        assert "model" not in body and "stream" not in body
        config = body["generationConfig"]
        assert config == {**FIRST["generationConfig"], "maxOutputTokens": call.expected_tokens}
        assert body["ignore_eos"] is True and body["min_tokens"] == call.expected_tokens
        assert set(body) == {*FIRST, "ignore_eos", "min_tokens"} and body["tools"] == TOOLS
        chat = to_chat("gemini", body)["messages"]
        unsalted = to_chat("gemini", FIRST)["messages"]
        k = 1 if at == "after-system" else 0
        assert chat[k]["content"] == salt + unsalted[k]["content"]
        assert [m for i, m in enumerate(chat) if i != k] == [
            m for i, m in enumerate(unsalted) if i != k
        ]
    lone = {"contents": [{"role": "user", "parts": [{"inlineData": {"mimeType": "image/png"}}]}]}
    salted = salt_gemini(lone, "S", "start")  # no system instruction: the first content's text
    assert salted["contents"][0]["parts"] == [{"text": "S"}, *lone["contents"][0]["parts"]]
    assert lone["contents"][0]["parts"] == [{"inlineData": {"mimeType": "image/png"}}]
