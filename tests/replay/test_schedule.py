"""Closed-loop replay over real HTTP: gaps, parallel sub-agents, bodies, lengths, concurrency."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from replay_helpers import plans_of, run_point, shape_of
from replay_servers import Behaviour, ChatServer
from replay_traces import linear_trace

from agentload.client.stream import StreamClient
from agentload.hashing import canonical_json, sha256_hex
from agentload.measure.records import Phase
from agentload.options.engines import get_engine
from agentload.replay.bodies import BodyBuilder, unsalt_messages
from agentload.replay.modes import LEAD_NS
from agentload.replay.plan import traffic_body
from agentload.replay.schedule import PointRunner
from agentload.trace import load_trace

MS = 1_000_000
TOL_LATE = 250 * MS  # worst-case event-loop lag tolerated on a loaded shared CI box


async def test_recorded_gaps_are_kept_from_actual_completions(
    chat_server: ChatServer, trace_path: Path
) -> None:
    run, _ = await run_point(chat_server.base_url, [trace_path], start_at="zero", sessions=1)
    (plan,) = plans_of(trace_path)
    by_call = {r.call: r for r in run.requests}
    assert len(by_call) == len(plan.calls) and all(r.ok for r in run.requests)
    late = []
    for cid, call in plan.calls.items():
        r = by_call[cid]
        if not call.preds:
            continue
        # the schedule is exact: the latest predecessor completion plus its recorded gap
        due = max(by_call[e.pred].end_ns + e.gap_ns for e in call.preds)
        assert r.scheduled_ns == due, cid
        late.append(r.send_ns - due)
    # never early; late only by the event loop's lag (loose bound: CI boxes are shared)
    assert min(late) >= -MS and max(late) <= TOL_LATE
    assert sorted(late)[len(late) // 2] <= 30 * MS
    # the orchestrator's tool gap, measured on the target's timeline
    gap = by_call["s0-c1"].send_ns - by_call["s0-c0"].end_ns
    assert 150 * MS - MS <= gap <= 150 * MS + TOL_LATE
    assert by_call["s0-c1"].gap_ns is not None
    assert by_call["s0-c1"].recorded_gap_ns == 150 * MS


async def test_subagents_run_in_parallel_and_the_parent_waits(
    chat_server: ChatServer, trace_path: Path
) -> None:
    run, _ = await run_point(chat_server.base_url, [trace_path], start_at="zero", sessions=1)
    r = {x.call: x for x in run.requests}
    s1 = (r["s0-sub1-c0"].send_ns, r["s0-sub1-c1"].end_ns)
    s2 = (r["s0-sub2-c0"].send_ns, r["s0-sub2-c1"].end_ns)
    assert max(s1[0], s2[0]) < min(s1[1], s2[1]), "sub-agents did not overlap"
    assert abs(s1[0] - s2[0]) < 100 * MS
    assert r["s0-c2"].send_ns >= max(s1[1], s2[1]) + 80 * MS - MS


async def test_gap_scale_zero_removes_waits(chat_server: ChatServer, trace_path: Path) -> None:
    run, _ = await run_point(
        chat_server.base_url, [trace_path], start_at="zero", sessions=1, gap_scale=0.0
    )
    (s,) = run.sessions
    assert s.complete and (s.end_ns - s.start_ns) < 400 * MS  # recorded: 650 ms


async def test_bodies_are_the_recorded_requests(chat_server: ChatServer, trace_path: Path) -> None:
    run, _ = await run_point(chat_server.base_url, [trace_path], start_at="zero", sessions=2)
    trace = load_trace(trace_path)
    expected = {
        sha256_hex(canonical_json(traffic_body(trace, c, 8))): c for c in trace.calls.values()
    }
    salts = {}
    for seen in chat_server.seen:
        body = orjson.loads(seen.body)
        assert body["model"] == "test-model" and body["stream"] is True
        assert body["stream_options"] == {"include_usage": True}
        assert body["ignore_eos"] is True and body["min_tokens"] == body["max_tokens"] == 8
        # the default --salt-at after-system: the first message after the system prompt
        first_turn = next(m for m in body["messages"] if m["role"] != "system")
        salt = first_turn["content"].split("\n", 1)[0]
        assert salt.startswith("[agentload-salt ")
        body["messages"] = unsalt_messages(body["messages"])
        traffic = {
            k: v
            for k, v in body.items()
            if k not in ("model", "stream", "stream_options", "ignore_eos", "min_tokens")
        }
        digest = sha256_hex(canonical_json(traffic))
        call = expected[digest]  # KeyError = a body that is not a recorded request
        assert traffic["messages"] == trace.messages(call)
        salts.setdefault(salt, set()).add(call.session_id)
    assert len(salts) == 2, "each session instance has its own salt"
    digests = sorted(r.digest for r in run.requests)
    assert digests == sorted(list(expected) * 2)


async def test_no_salt_and_no_extras(chat_server: ChatServer, trace_path: Path) -> None:
    await run_point(
        chat_server.base_url,
        [trace_path],
        start_at="zero",
        sessions=2,
        salt_at="off",
        engine="openai",
    )
    bodies = [orjson.loads(s.body) for s in chat_server.seen]
    assert all("ignore_eos" not in b and "min_tokens" not in b for b in bodies)
    assert all("agentload-salt" not in orjson.dumps(b["messages"]).decode() for b in bodies)
    firsts = [s.body for s in chat_server.seen if b'"task 0"' in s.body and b'"tool"' not in s.body]
    assert len(firsts) == 2 and firsts[0] == firsts[1]


async def test_output_length_is_pinned(chat_server: ChatServer, trace_path: Path) -> None:
    run, _ = await run_point(chat_server.base_url, [trace_path], start_at="zero", sessions=1)
    assert all(r.completion_tokens == r.expected_tokens == 8 for r in run.requests)
    assert not any(r.mismatch for r in run.requests)
    assert all(len(r.itl_ns) == 7 for r in run.requests)


async def test_concurrency_is_reached_and_never_exceeded(
    chat_server: ChatServer, fast_trace: Path
) -> None:
    run, runner = await run_point(
        chat_server.base_url, [fast_trace], start_at="zero", sessions=9, concurrency=3
    )
    assert len(run.sessions) == 9 and all(s.complete for s in run.sessions)
    events = sorted(
        [(s.start_ns, 1) for s in run.sessions] + [(s.end_ns, -1) for s in run.sessions]
    )
    cur = peak = 0
    for _, d in events:
        cur += d
        peak = max(peak, cur)
    assert peak == 3 and runner.stats.max_active_sessions == 3
    assert {s.lane for s in run.sessions} == {0, 1, 2}
    assert {s.source for s in run.sessions} == {"s0", "s1"}  # round-robin over the pool


async def test_random_start_warms_up_then_measures(
    chat_server: ChatServer, trace_path: Path
) -> None:
    run, _ = await run_point(
        chat_server.base_url, [trace_path], start_at="random", sessions=3, concurrency=1, seed=3
    )
    first = run.sessions[0]
    assert first.joined_at_ns is not None and first.joined_at_ns > 0
    warm = [r for r in run.requests if r.phase == "warmup"]
    assert warm and all(r.session == 0 for r in warm)
    # warm-up only needs the prefill: it is sent with max_tokens 1
    assert all(r.expected_tokens == r.completion_tokens == 1 for r in warm)
    assert all(r.send_ns >= run.window.start_ns for r in run.requests if r.phase == "measured")
    assert run.window.start_ns >= max(r.end_ns for r in warm)
    assert all(s.joined_at_ns is None for s in run.sessions[1:])  # recycled: from zero


async def test_the_window_opens_after_the_queue_the_warm_up_built(
    make_server: Any, tmp_path: Path
) -> None:
    """A lane whose warm-up takes long (the first request the server gets waits 1 s for its
    first token) holds the window closed; the other lane, warm at once, sends call after call
    (each 0.2 s to its first token, no gaps). The window opens only once every request sent
    before the last warm-up ended has had its first token; opened at that end (as before),
    the other lane's call then in flight had not, and its wait was measured."""
    srv = make_server(Behaviour(ttft_s=0.2, fail={0: "stall"}, stall_s=1.0))
    path = tmp_path / "lin.agentload.jsonl.zst"
    trace = await asyncio.to_thread(linear_trace, path, sessions=2, calls=40, out_tokens=4)
    run, _ = await run_point(
        srv.base_url, [trace], start_at="random", concurrency=2, gap_scale=0.0, duration_s=0.5
    )
    w = run.window.start_ns
    warm = [r for r in run.requests if r.phase == Phase.WARMUP]
    assert len(warm) == 2
    warm_end = max(r.end_ns for r in warm)  # the slow lane's warm-up: the last to end
    assert warm_end >= 1000 * MS
    queued = [r for r in run.requests if r.send_ns < warm_end and r.phase != Phase.WARMUP]
    # the warm lane had a call in flight without its first token when the last warm-up
    # ended: a window opened then would have measured its wait
    assert any(r.first_ns is not None and r.first_ns > warm_end for r in queued)
    late = [r for r in queued if (r.first_ns if r.first_ns is not None else r.end_ns) > w]
    assert not late, f"sent before the last warm-up ended, first token after the window: {late}"
    assert w > warm_end
    assert all(r.send_ns >= w for r in run.requests if r.phase == Phase.MEASURED)


async def test_duration_bounds_the_run(chat_server: ChatServer, fast_trace: Path) -> None:
    run, _ = await run_point(
        chat_server.base_url, [fast_trace], start_at="zero", duration_s=0.6, concurrency=2
    )
    assert 0.59 <= run.window.seconds <= 1.2
    assert len(run.sessions) >= 4
    assert max(r.send_ns for r in run.requests) <= run.window.end_ns + 5 * MS


async def test_arrival_rate_starts_sessions_as_poisson(
    chat_server: ChatServer, fast_trace: Path
) -> None:
    run, _ = await run_point(
        chat_server.base_url, [fast_trace], start_at="zero", arrival_rate=20.0, sessions=6
    )
    assert len(run.sessions) == 6 and all(s.complete for s in run.sessions)
    starts = sorted(s.start_ns for s in run.sessions)
    assert starts[-1] > starts[0]


@pytest.mark.parametrize(
    ("engine", "min_tokens"), [("dynamo", True), ("llamacpp", False), ("vllm", True)]
)
async def test_engine_presets_shape_the_extras(
    chat_server: ChatServer, trace_path: Path, engine: str, min_tokens: bool
) -> None:
    await run_point(chat_server.base_url, [trace_path], start_at="zero", sessions=1, engine=engine)
    body = orjson.loads(chat_server.seen[0].body)
    # ignore_eos at the top level (Dynamo reads it there; nvext.ignore_eos is deprecated)
    assert body["ignore_eos"] is True and "ignore_eos" not in body.get("nvext", {})
    # llama.cpp has no min_tokens: max_tokens (its n_predict) and ignore_eos pin the length
    assert ("min_tokens" in body) is min_tokens
    if min_tokens:
        assert body["min_tokens"] == body["max_tokens"]
    # Dynamo alone gets its request extension: the expected output length, and the serving
    # worker and timing asked back
    if engine == "dynamo":
        assert body["nvext"] == {
            "agent_hints": {"osl": body["max_tokens"]},
            "extra_fields": ["worker_id", "timing"],
        }
    else:
        assert "nvext" not in body


async def test_dynamo_sessions_are_per_agent_under_their_parents(
    chat_server: ChatServer, trace_path: Path
) -> None:
    """With a parent header (the dynamo preset), each agent of a session instance is a
    session of its own: the orchestrator's is the instance's id, each sub-agent's is
    INSTANCE/AGENT and names the orchestrator's as its parent."""
    preset = get_engine("dynamo")
    await run_point(
        chat_server.base_url,
        [trace_path],
        start_at="zero",
        sessions=1,
        engine="dynamo",
        session_header=preset.session_header,
        parent_header=preset.parent_header,
    )
    pairs = {
        (s.headers["x-dynamo-session-id"], s.headers.get("x-dynamo-parent-session-id"))
        for s in chat_server.seen
    }
    roots = {sid for sid, parent in pairs if parent is None}
    assert len(roots) == 1, pairs  # one orchestrator per instance
    (root,) = roots
    children = {sid for sid, parent in pairs if parent == root}
    assert len(children) == 2 and all(c.startswith(root + "/") for c in children), pairs
    assert len(pairs) == 3  # every call named its agent's session, nothing else
    # the neighbour: a session header alone (--session-header) names the instance on every call
    chat_server.seen.clear()
    await run_point(
        chat_server.base_url,
        [trace_path],
        start_at="zero",
        sessions=1,
        session_header="X-Session-Id",
    )
    ids = {s.headers["x-session-id"] for s in chat_server.seen}
    assert len(ids) == 1 and "/" not in next(iter(ids)), ids  # one instance, all its agents
    assert not any("x-dynamo-parent-session-id" in s.headers for s in chat_server.seen)


async def test_a_stop_before_a_scheduled_request_went_sends_nothing(
    chat_server: ChatServer, trace_path: Path
) -> None:
    """A call's task wakes ``LEAD_NS`` early and waits at its connection for the waker to
    write it: a stop in those last milliseconds cancels it unsent and unrecorded, while a
    request that went is kept to its end."""
    client = StreamClient(chat_server.base_url, timeout_s=30.0, max_connections=4)
    try:
        runner = PointRunner(
            client,
            plans_of(trace_path),
            BodyBuilder("test-model", get_engine("vllm")),
            shape_of(start_at="zero", sessions=1),
        )
        inst = runner.source.next(False)
        assert inst is not None
        first = next(c for c in inst.plan.calls.values() if not c.preds)
        body = runner.body(inst, first, Phase.MEASURED)
        went = await runner.send_at(inst, first, runner.clock(), lambda: None, body)
        assert went is not None and len(runner.records) == 1  # due at once: sent

        due = runner.clock() + LEAD_NS // 2  # inside the lead: awake, waiting at the gate
        task = asyncio.create_task(runner.send_at(inst, first, due, lambda: None, body))
        await asyncio.sleep(0.001)
        runner.stop()
        assert await task is None
        await asyncio.sleep(LEAD_NS / 1e9)  # past its due time: nothing went later either
        assert len(chat_server.seen) == 1 and len(runner.records) == 1
        assert runner.stats.inflight == 0 and not runner.inflight
        await runner.waker.aclose()
    finally:
        await client.aclose()


async def test_a_point_builds_records_that_validate_as_they_are(
    chat_server: ChatServer, trace_path: Path
) -> None:
    """A running point builds its records without validating them (``records.unchecked``):
    every field is there, and validating each again (as a results.json reader does) gives the
    same record, written the same way."""
    import dataclasses

    from pydantic import TypeAdapter

    from agentload.measure.records import RequestRecord, SessionResult

    run, _ = await run_point(chat_server.base_url, [trace_path], start_at="random", sessions=3)
    assert run.requests and run.sessions
    for cls, recs in ((RequestRecord, run.requests), (SessionResult, run.sessions)):
        adapter = TypeAdapter(cls)
        for rec in recs:
            fields = {f.name: getattr(rec, f.name) for f in dataclasses.fields(rec)}
            again = cls(**fields)
            assert again == rec
            assert adapter.dump_json(again) == adapter.dump_json(rec)
    assert any(r.itl_ns for r in run.requests)
    assert {r.phase for r in run.requests} >= {Phase.WARMUP, Phase.MEASURED}


def test_an_unchecked_record_takes_its_defaults_and_keywords_only() -> None:
    from agentload.measure.records import SessionResult, unchecked

    build = unchecked(SessionResult)
    kw = {"session": 1, "source": "s", "lane": 0, "start_ns": 0, "end_ns": 5}
    kw |= {"joined_at_ns": None, "complete": True, "requests": 2, "warmup_requests": 0}
    rec = build(**kw)
    assert rec == SessionResult(**kw)
    assert rec.eval_passed is None
    with pytest.raises(TypeError):
        build(1)
    with pytest.raises(TypeError, match="nope"):
        build(**kw, nope=1)
    with pytest.raises(TypeError, match="session"):
        build(**{k: v for k, v in kw.items() if k != "session"})  # a required field left out
