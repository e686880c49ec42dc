"""The simulator speaking Google's Gemini API (``…/models/{model}:generateContent``): the same
reply as Chat Completions gives the same conversation, streamed as SSE with whole function
calls that carry ids, ``:countTokens``, the model list, Google's error shape, its API key
header."""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from agentload.endpoint.server import ServeOptions, SimulatorServer
from agentload.trace.capture import assistant_message
from agentload.wire import reply_from_json, stream_reader

TOOLS = [
    {
        "functionDeclarations": [
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "parametersJsonSchema": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                    "required": ["city", "days"],
                },
            }
        ]
    }
]
ASK = {
    "systemInstruction": {"parts": [{"text": "You are a weather assistant."}]},
    "contents": [{"role": "user", "parts": [{"text": "Weather in Lisbon this weekend?"}]}],
    "tools": TOOLS,
}


def _root(sim: Any) -> str:
    return str(sim.base_url).removesuffix("/v1")


def _post(sim: Any, method: str, body: dict[str, Any], version: str = "v1beta") -> httpx.Response:
    url = f"{_root(sim)}/{version}/models/{sim.model}:{method}"
    return httpx.post(url, json=body, timeout=30)


def test_generate_content_answers_as_chat_does(simulator: Any) -> None:
    """``:generateContent`` gives the reply ``/v1/chat/completions`` gives the same
    conversation; its function calls carry ids; usage counts every prompt token."""
    r = _post(simulator, "generateContent", ASK)
    assert r.status_code == 200, r.text
    answer = r.json()
    [cand] = answer["candidates"]
    assert cand["finishReason"] == "STOP" and answer["modelVersion"] == simulator.model
    calls = [p["functionCall"] for p in cand["content"]["parts"] if "functionCall" in p]
    assert calls and all(c["id"] and c["name"] == "get_weather" for c in calls)
    assert all(set(c["args"]) == {"city", "days"} for c in calls)
    usage = answer["usageMetadata"]
    assert usage["totalTokenCount"] == usage["promptTokenCount"] + usage["candidatesTokenCount"]
    chat = {
        "model": simulator.model,
        "messages": [
            {"role": "system", "content": "You are a weather assistant."},
            {"role": "user", "content": "Weather in Lisbon this weekend?"},
        ],
        "tools": [{"type": "function", "function": {
            "name": "get_weather", "description": "Weather for a city.",
            "parameters": TOOLS[0]["functionDeclarations"][0]["parametersJsonSchema"]}}],
    }  # fmt: skip
    same = httpx.post(simulator.base_url + "/chat/completions", json=chat, timeout=30).json()
    theirs = same["choices"][0]["message"]["tool_calls"]
    ours = reply_from_json("gemini", answer).tool_calls
    assert [c["function"] for c in ours] == [c["function"] for c in theirs]
    assert usage["promptTokenCount"] == same["usage"]["prompt_tokens"]


def test_the_stream_is_the_same_answer(simulator: Any) -> None:
    """``:streamGenerateContent?alt=sse``: ``data:`` events, a text part per token, each call
    whole, the usage and finish reason last; read back it is the non-streamed answer. Under
    ``/v1`` as under ``/v1beta``; without ``alt=sse``, a JSON array."""
    plain = reply_from_json("gemini", _post(simulator, "generateContent", ASK).json())
    url = f"{_root(simulator)}/v1/models/{simulator.model}:streamGenerateContent?alt=sse"
    r = httpx.post(url, json=ASK, timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [orjson.loads(e[len(b"data: ") :]) for e in r.content.split(b"\r\n\r\n") if e]
    assert all("usageMetadata" not in e for e in events[:-1])
    assert events[-1]["candidates"][0]["finishReason"] == "STOP"
    reader = stream_reader("gemini")
    reader.feed(r.content)
    streamed = reader.reply()
    assert reader.done and streamed.tool_calls == plain.tool_calls
    assert streamed.usage is not None and plain.usage is not None
    assert streamed.usage["prompt_tokens"] == plain.usage["prompt_tokens"]
    array = _post(simulator, "streamGenerateContent", ASK).json()
    assert (
        isinstance(array, list) and reply_from_json("gemini", array).tool_calls == plain.tool_calls
    )


def test_a_tool_loop_ends_in_text(simulator: Any) -> None:
    """The function responses go back (with the calls' ids) until the model answers in text."""
    body = dict(ASK, contents=list(ASK["contents"]))
    for _ in range(6):
        answer = _post(simulator, "generateContent", body).json()
        parts = answer["candidates"][0]["content"]["parts"]
        calls = [p["functionCall"] for p in parts if "functionCall" in p]
        if not calls:
            break
        body["contents"] += [
            {"role": "model", "parts": parts},
            {"role": "user", "parts": [
                {"functionResponse": {"id": c["id"], "name": c["name"],
                                      "response": {"output": "Sunny, 24C"}}} for c in calls]},
        ]  # fmt: skip
    assert not calls and parts[0]["text"]
    reply = reply_from_json("gemini", answer)
    assert assistant_message(reply.content, None)["content"] == parts[0]["text"]


def test_count_tokens_models_and_errors(simulator: Any) -> None:
    counted = _post(simulator, "countTokens", {"contents": ASK["contents"]})
    assert counted.status_code == 200 and counted.json()["totalTokens"] > 0
    wrapped = _post(simulator, "countTokens", {"generateContentRequest": ASK}).json()
    plain = _post(simulator, "generateContent", ASK).json()
    assert wrapped["totalTokens"] == plain["usageMetadata"]["promptTokenCount"]
    listed = httpx.get(_root(simulator) + "/v1beta/models", timeout=30).json()
    assert [m["name"] for m in listed["models"]] == [f"models/{simulator.model}"]
    one = httpx.get(f"{_root(simulator)}/v1beta/models/{simulator.model}", timeout=30)
    assert one.json()["supportedGenerationMethods"][0] == "generateContent"
    bad = _post(simulator, "generateContent", {"contents": [{"parts": [{"text": 5}]}]})
    assert bad.status_code == 400
    assert bad.json() == {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                    "message": "contents[0].parts[0].text: expected str, got int"}}  # fmt: skip
    url = f"{_root(simulator)}/v1beta/models/gemini-2.5-pro:generateContent"
    missing = httpx.post(url, json=ASK, timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    unknown = _post(simulator, "predict", ASK)
    assert unknown.status_code == 404 and "predict" in unknown.json()["error"]["message"]


def test_the_api_key_goes_in_x_goog_api_key() -> None:
    key = "gemini-sim-key-0123456789"
    with SimulatorServer("instant", serving=ServeOptions(api_key=key)) as srv:
        url = f"{_root(srv)}/v1beta/models/{srv.model}:generateContent"
        ok = httpx.post(url, json=ASK, headers={"x-goog-api-key": key}, timeout=30)
        assert ok.status_code == 200, ok.text
        wrong = httpx.post(url, json=ASK, headers={"x-goog-api-key": "nope"}, timeout=30)
        assert wrong.status_code == 401
        assert httpx.get(f"{_root(srv)}/v1beta/models", timeout=30).status_code == 401
        # x-goog-api-key is Gemini's header only
        other = httpx.post(srv.base_url + "/chat/completions", headers={"x-goog-api-key": key},
                           json={"model": srv.model, "messages": [{"role": "user", "content": "hi"}]})  # fmt: skip
        assert other.status_code == 401
