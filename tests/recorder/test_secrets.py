"""API keys and Authorization headers never reach the trace file."""

from __future__ import annotations

from pathlib import Path

import pytest
import zstandard

from agentload.hashing import content_id
from agentload.masking import scrub_bytes, scrub_json
from agentload.tokenizer import ChatTokenCounter
from agentload.trace import (
    CallCapture,
    EventRecord,
    ObservedCall,
    Timings,
    ToolCallRecord,
    TraceWriter,
    load_trace,
)
from agentload.trace.validate import validate_trace

from .conftest import header

SECRETS = [
    "sk-proj-AbCdEfGhIjKlMnOpQrStUv0123456789",
    "sk-ant-api03-zyxwvutsrqponmlk98765",
    "sk-0123456789abcdefghijKLMN",
    "eyJhbGciOiJIUzI1NiJ9.bearer-token-value",
    "hunter2-password-value",
    "query-key-ABCDEFGH12345",
    "header-api-key-777777777",
]


def raw_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if not path.name.endswith(".zst"):
        return data
    out = b""
    while data:
        d = zstandard.ZstdDecompressor().decompressobj()
        out += d.decompress(data)
        data = d.unused_data
    return out


@pytest.mark.parametrize("suffix", [".agentload.jsonl.zst", ".jsonl"])
async def test_keys_and_authorization_headers_never_reach_the_file(
    tmp_path: Path, suffix: str
) -> None:
    path = tmp_path / f"secret{suffix}"
    h = header(
        endpoint=f"https://admin:{SECRETS[4]}@llm.example.com/v1?api_key={SECRETS[5]}",
        scenario_config={
            "endpoint": {"api_key": SECRETS[6], "headers": {"X-Api-Key": "zzzzzzzzzz"}}
        },
    )
    async with TraceWriter(path, h) as w:
        cap = CallCapture(w, ChatTokenCounter("o200k_base"))
        body = {
            "model": "m",
            "messages": [
                {"role": "system", "content": f"Use the key {SECRETS[0]} to call the API."},
                {"role": "user", "content": f"My Anthropic key is {SECRETS[1]} and {SECRETS[2]}"},
                {"role": "user", "content": f"curl -H 'Authorization: Bearer {SECRETS[3]}' x"},
            ],
            "extra_headers": {"Authorization": f"Bearer {SECRETS[3]}", "api-key": SECRETS[6]},
            "api_key": SECRETS[6],
            "stream": True,
        }
        rec = await cap.record(
            ObservedCall(
                call_id="c0",
                session_id="s",
                agent_id="a",
                seq=0,
                body=body,
                content=f"I will use {SECRETS[0]}",
                tool_calls=None,
                finish_reason="stop",
                usage=None,
                timings=Timings(submit_ns=1),
            )
        )
        await w.write(
            ToolCallRecord(
                id="t",
                session_id="s",
                agent_id="a",
                llm_call_id="c0",
                name="run_tests",
                arguments={"env": f"OPENAI_API_KEY={SECRETS[2]}", "password": SECRETS[4]},
                start_ns=1,
                end_ns=2,
            )
        )
        await w.write(
            EventRecord(
                kind="error", ns=3, details={"headers": {"authorization": f"Basic {SECRETS[4]}"}}
            )
        )
    assert rec.usage.prompt_tokens_ours > 0
    raw = raw_bytes(path)
    for secret in SECRETS:
        assert secret.encode() not in raw, secret
    assert b"zzzzzzzzzz" not in raw
    assert raw.count(b"[REDACTED]") >= len(SECRETS)
    # The file stays a valid trace, with everything else intact.
    trace = load_trace(path)
    assert trace.truncated is None
    assert trace.header.endpoint == "https://***@llm.example.com/v1?api_key=***"
    msgs = trace.messages(trace.calls["c0"])
    assert msgs[0]["content"] == "Use the key [REDACTED] to call the API."
    assert trace.tool_calls["t"].name == "run_tests"
    # Scrubbed before hashing: every blob's id is the hash of what the file holds.
    for bid, blob in trace.blobs.items():
        assert content_id(blob.content) == bid
    assert validate_trace(path).counts["blob"] >= 4


async def test_a_scrubbed_message_keeps_one_id_across_calls(tmp_path: Path) -> None:
    path = tmp_path / "t.agentload.jsonl.zst"
    async with TraceWriter(path, header()) as w:
        cap = CallCapture(w, ChatTokenCounter("o200k_base"))
        history = [{"role": "user", "content": f"key {SECRETS[0]}"}]
        recs = []
        for seq in range(2):
            recs.append(
                await cap.record(ObservedCall(call_id=f"c{seq}", session_id="s", agent_id="a", seq=seq, body={"model": "m", "messages": list(history)}, content=f"ok {seq}", tool_calls=None, finish_reason="stop", usage=None, timings=Timings(submit_ns=1)))
            )  # fmt: skip
            history += [
                {"role": "assistant", "content": f"ok {seq}"},
                {"role": "user", "content": "go"},
            ]
    # the second call's history names the first call's (scrubbed) message and reply by their ids
    assert recs[1].messages[:2] == [recs[0].messages[0], recs[0].response.content]
    assert recs[1].prefix is not None and recs[1].prefix.base == "c0"
    trace = load_trace(path)
    assert trace.messages(trace.calls["c1"])[0]["content"] == "key [REDACTED]"
    validate_trace(path)


def test_scrubber_leaves_ordinary_text_alone() -> None:
    text = (
        b'{"content":"task-management-system-for-disks; ask-question-before-exit; '
        b'the token count is 12; Basic authentication is described in RFC 7617"}'
    )
    assert scrub_bytes(text) == text


def test_scrub_json_returns_clean_values_unchanged() -> None:
    clean = {"role": "user", "content": "nothing to hide"}
    assert scrub_json(clean) is clean
    assert scrub_json({"api_key": SECRETS[6]}) == {"api_key": "[REDACTED]"}
