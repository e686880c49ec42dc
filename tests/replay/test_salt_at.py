"""``--salt-at start|after-system|off``: where the salt goes, what is sent, what is shared
across sessions on the simulator, and what results.json says."""

from __future__ import annotations

import asyncio
import copy
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
from replay_helpers import run_cli, run_point
from replay_servers import ChatServer
from replay_traces import TOOLS, Shape, agentic_trace

from agentload.hashing import canonical_json, sha256_hex
from agentload.measure.compare import compare_results
from agentload.measure.results import load_results, write_results
from agentload.options.replay import ReplayConfig
from agentload.replay.plan import traffic_body
from agentload.replay.run import run_replay
from agentload.replay.salt import SaltAt, make_salt, salt_messages, salt_native, unsalt_messages
from agentload.tokenizer import ChatTokenCounter
from agentload.trace import load_trace

S = make_salt("123456789", 42)
SALT_LINE = re.compile(r"\[agentload-salt [0-9]{18}\]\n")

SYSTEM = {"role": "system", "content": "You are terse."}
DEVELOPER = {"role": "developer", "content": [{"type": "text", "text": "Use tools."}]}
USER = {"role": "user", "content": "hi"}
ASSISTANT = {"role": "assistant", "content": None, "tool_calls": []}


def _salted(messages: list[dict[str, Any]], at: SaltAt) -> list[dict[str, Any]]:
    original = copy.deepcopy(messages)
    out = salt_messages(messages, S, at)
    assert messages == original  # a copy: the recorded messages are never edited
    assert unsalt_messages(out) == messages  # and the round trip is exact
    return out


def test_chat_salt_placement_and_round_trip() -> None:
    msgs = [SYSTEM, DEVELOPER, USER, ASSISTANT]
    # start: in front of the first system message's text
    assert _salted(msgs, "start") == [{**SYSTEM, "content": S + "You are terse."}, *msgs[1:]]
    # after-system: after every leading system/developer message, in front of the first turn
    assert _salted(msgs, "after-system") == [
        SYSTEM,
        DEVELOPER,
        {**USER, "content": S + "hi"},
        ASSISTANT,
    ]
    # off: nothing
    assert _salted(msgs, "off") == msgs
    # the first turn's first text part; a list without one gets one inserted first
    parts = {"role": "user", "content": [{"type": "image_url"}, {"type": "text", "text": "q"}]}
    assert _salted([SYSTEM, parts], "after-system")[1]["content"] == [
        {"type": "image_url"},
        {"type": "text", "text": S + "q"},
    ]
    image = {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
    assert _salted([SYSTEM, image], "after-system")[1]["content"] == [
        {"type": "text", "text": S},
        *image["content"],
    ]
    # every message a system message: appended to the last one's text
    assert _salted([SYSTEM, DEVELOPER], "after-system") == [
        SYSTEM,
        {**DEVELOPER, "content": [{"type": "text", "text": "Use tools." + S}]},
    ]
    assert _salted([SYSTEM], "after-system") == [{**SYSTEM, "content": "You are terse." + S}]
    # no system message: both salted modes salt the first message
    assert (
        _salted([USER], "start")
        == _salted([USER], "after-system")
        == [{**USER, "content": S + "hi"}]
    )
    assert unsalt_messages([SYSTEM, USER]) == [SYSTEM, USER]  # nothing to undo


def test_native_salt_placement() -> None:
    body = {"system": "sys", "messages": [USER, {"role": "assistant", "content": "a"}]}
    out = salt_native("messages", body, S, "after-system")
    assert out["system"] == "sys" and out["messages"] == [
        {**USER, "content": S + "hi"},
        body["messages"][1],
    ]
    assert salt_native("messages", body, S, "start")["system"] == S + "sys"
    blocks = {"messages": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]}
    out = salt_native("messages", blocks, S, "after-system")
    assert (
        out["messages"][0]["content"] == [{"type": "text", "text": S + "q"}] and "system" not in out
    )
    assert salt_native("messages", body, S, "off") == body

    items = [
        {"role": "developer", "content": "d"},
        {"role": "user", "content": [{"type": "input_text", "text": "q"}]},
    ]
    resp = {"instructions": "i", "input": items}
    out = salt_native("responses", resp, S, "after-system")
    assert out["instructions"] == "i" and out["input"][0] == items[0]
    assert out["input"][1]["content"] == [{"type": "input_text", "text": S}, *items[1]["content"]]
    assert salt_native("responses", resp, S, "start")["instructions"] == S + "i"
    assert salt_native("responses", {"instructions": "i", "input": "x"}, S, "after-system") == {
        "instructions": "i",
        "input": S + "x",
    }
    assert resp["input"] is items and items[1]["content"][0]["text"] == "q"  # copies only


def _shared_and_rest(body: dict[str, Any]) -> tuple[bytes, list[dict[str, Any]]]:
    """(bytes of the tools and the leading system messages, the messages after them)."""
    msgs = body["messages"]
    k = next(i for i, m in enumerate(msgs) if m["role"] != "system")
    return orjson.dumps([body.get("tools"), msgs[:k]]), msgs[k:]


@pytest.mark.parametrize("at", ["start", "after-system", "off"])
async def test_salt_modes_send_what_they_claim(
    chat_server: ChatServer, trace_path: Path, at: SaltAt
) -> None:
    await run_point(chat_server.base_url, [trace_path], start_at="zero", sessions=2, salt_at=at)
    trace = load_trace(trace_path)
    recorded = {
        sha256_hex(canonical_json(traffic_body(trace, c, 8))): c for c in trace.calls.values()
    }
    by_call: dict[str, list[dict[str, Any]]] = {}
    salts: dict[str, set[str]] = {}
    for seen in chat_server.seen:
        body = orjson.loads(seen.body)
        text = orjson.dumps(body["messages"]).decode()
        found = SALT_LINE.findall(text.replace("\\n", "\n"))
        assert len(found) == (0 if at == "off" else 1)
        traffic = {"messages": unsalt_messages(body["messages"])}
        traffic |= {k: v for k, v in body.items() if k in ("tools", "temperature", "max_tokens")}
        call = recorded[sha256_hex(canonical_json(traffic))]  # the recorded request, salt removed
        by_call.setdefault(call.id, []).append(body)
        for salt in found:
            salts.setdefault(salt, set()).add(call.id)
    assert len(by_call) == 7 and all(len(b) == 2 for b in by_call.values())  # 2 instances each
    for a, b in by_call.values():
        shared_a, rest_a = _shared_and_rest(a)
        shared_b, rest_b = _shared_and_rest(b)
        if at == "after-system":
            # the tools and the system prompt are byte-equal across instances; the salt sits
            # right after them, in front of the first turn's text, one per instance
            assert shared_a == shared_b
            assert SALT_LINE.match(rest_a[0]["content"]) and SALT_LINE.match(rest_b[0]["content"])
            assert rest_a[0]["content"][:40] != rest_b[0]["content"][:40]
            assert orjson.dumps(rest_a[1:]) == orjson.dumps(rest_b[1:])
        elif at == "start":
            # the first system message already differs: it starts with the salt
            assert orjson.dumps(a["tools"]) == orjson.dumps(b["tools"])
            first_a, first_b = a["messages"][0], b["messages"][0]
            assert first_a["role"] == "system" and SALT_LINE.match(first_a["content"])
            assert first_a["content"] != first_b["content"]
        else:
            assert orjson.dumps(a) == orjson.dumps(b)  # replicas send identical bytes
    # one salt per instance, carried by every call of every agent of it
    assert len(salts) == (0 if at == "off" else 2)
    assert all(ids == set(by_call) for ids in salts.values())


def test_salt_modes_share_across_sessions_on_the_simulator(simulator: Any, tmp_path: Path) -> None:
    """On the simulator (instant profile: nothing evicted), cached ≤ ceiling for every request
    in every mode; with after-system a later instance's agents' first calls find the tools and
    the system prompt another instance cached (cross-session hits); with start only what
    precedes the salt — the tool schemas, the system message's framing and the salt's head."""
    shape = Shape(tool_gap_s=0.01, child_gap_s=0.01, post_gap_s=0.01)
    trace = agentic_trace(tmp_path / "t.jsonl", sessions=2, shape=shape)
    counter = ChatTokenCounter("o200k_base")
    # more than start's salt leaves in front of it: the tool schemas, and a system message
    # holding only the salt line (its framing, and the whole salt)
    before_salt = len(counter.ids_for_tools(TOOLS)) + len(
        counter.ids_for_message({"role": "system", "content": S})
    )
    cross: dict[str, int] = {}
    for at in ("start", "after-system", "off"):
        cfg = ReplayConfig(
            traces=[str(trace)],
            endpoint=simulator.base_url,
            model=simulator.model,
            start_at="zero",
            levels=[2],
            sessions=6,
            salt_at=at,  # type: ignore[arg-type]
        )
        res = asyncio.run(run_replay(cfg))
        assert res.salt_at == at
        (p,) = res.points
        reqs = [r for r in p.requests if r.ok and r.cached_tokens is not None]
        assert len(reqs) == 6 * 7
        assert all(r.cached_tokens <= r.ceiling_tokens for r in reqs), at
        assert all(r.within_ceiling_tokens is not None for r in reqs)
        hits = {
            id(r): r.cached_tokens - min(r.cached_tokens, r.within_ceiling_tokens or 0)
            for r in reqs
        }
        agg = p.aggregates.kv_hits
        assert agg is not None and agg.cross_session_tokens is not None
        measured = [r for r in reqs if r.phase == "measured"]
        assert agg.cross_session_tokens == sum(hits[id(r)] for r in measured)
        assert (
            agg.within_session_tokens
            == sum(r.cached_tokens for r in measured) - agg.cross_session_tokens
        )
        cross[at] = sum(hits.values())
        # instances 2..5 start after an instance finished (2 lanes), so after both recorded
        # sessions' orchestrators sent their first call
        later_firsts = [
            r for r in reqs if r.turn_depth == 0 and r.session >= 2 and r.agent.endswith("-orch")
        ]
        assert later_firsts
        if at == "start":
            assert all(hits[id(r)] <= before_salt for r in reqs)
        else:
            # everything up to the salt (after-system), the whole prompt (off) was cached
            assert all(r.cached_tokens == r.ceiling_tokens for r in later_firsts)
            assert all(hits[id(r)] > before_salt for r in later_firsts)
    assert cross["after-system"] > cross["start"]
    # unsalted, replicas share whole prompts: more across sessions than after-system's prefix
    assert cross["off"] > cross["after-system"]


def test_results_json_names_the_mode_and_reads_older_files(
    simulator: Any, trace_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["replay", str(trace_path), "--endpoint", simulator.base_url, "--model", simulator.model]
    argv += ["--start-at", "zero", "--sessions", "1"]
    assert run_cli([*argv, "--salt-at", "start", "--out", str(tmp_path / "a")]) == 0
    assert run_cli([*argv, "--no-salt", "--out", str(tmp_path / "b")]) == 0
    out = capsys.readouterr().out
    assert "cached " in out and "cross-session" in out
    doc = orjson.loads((tmp_path / "a" / "results.json").read_bytes())
    assert doc["salt_at"] == doc["config"]["salt_at"] == "start" and "salt" not in doc["config"]
    hits = doc["points"][0]["aggregates"]["kv_hits"]
    assert set(hits) >= {"within_session_tokens", "cross_session_tokens", "cached_tokens"}
    assert "within_session_tokens" in doc["points"][0]["aggregates"]["kv_survival"][0]
    a, b = load_results(tmp_path / "a"), load_results(tmp_path / "b")
    assert b.salt_at == b.config.salt_at == "off"
    lines, _ = compare_results(a, b)
    assert "note: salt_at differs (A start, B off)" in lines
    # a file written before --salt-at: config.salt true was the salt at the start
    old = dict(doc, config={k: v for k, v in doc["config"].items() if k != "salt_at"})
    del old["salt_at"]
    for flag, mode in ((True, "start"), (False, "off")):
        old["config"]["salt"] = flag
        (tmp_path / "old").mkdir(exist_ok=True)
        (tmp_path / "old" / "results.json").write_bytes(orjson.dumps(old))
        res = load_results(tmp_path / "old")
        assert res.salt_at == res.config.salt_at == mode and res.config.salt is flag
        assert write_results(res, tmp_path / "old2")  # and it is written back in the new form
        assert orjson.loads((tmp_path / "old2" / "results.json").read_bytes())["salt_at"] == mode


def test_config_salt_flag() -> None:
    base = {"traces": ["t"], "endpoint": "http://x/v1", "model": "m"}
    assert ReplayConfig.model_validate(base).salt_at == "after-system"
    assert ReplayConfig.model_validate({**base, "salt": False}).salt_at == "off"
    assert ReplayConfig.model_validate({**base, "salt": False, "salt_at": "off"}).salt_at == "off"
    with pytest.raises(ValueError, match="contradicts"):
        ReplayConfig.model_validate({**base, "salt": False, "salt_at": "start"})
