"""``agentload trace import dynamo``: NVIDIA Dynamo's request trace (``dynamo.request.trace.v1``),
as the real Dynamo 1.6.1 frontend wrote it (``samples_dynamo/``, made by its
``make_samples.py``; README.md there): each Dynamo session an agent, a child session
(``parent_session_id``) a sub-agent of its parent's agent, each tree one session; calls at
their recorded times with their token counts and block hashes; harness tool events as tool
calls the next call waits for; departures from the schema accepted and counted; bad input one
line and exit 2. The expected values are read from the sample files here, not from the
importer."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import one_line_exit_2, run, write_jsonl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentload.errors import AgentloadError
from agentload.interop.dynamo_import import import_dynamo
from agentload.interop.imports import detect_format
from agentload.replay.plan import build_plans
from agentload.trace import load_trace
from agentload.trace.stats import compute_stats
from agentload.trace.trace import Trace

sys.path.insert(0, str(Path(__file__).parents[1] / "reliability"))
from fuzz_strategies import damaged_lines

SAMPLES = Path(__file__).parent / "samples_dynamo"
JSONL = SAMPLES / "dynamo-request-trace.jsonl"  # the jsonl sink's file
SEGMENT = SAMPLES / "dynamo-request-trace.000000.jsonl.gz"  # the default jsonl_gz sink's
MS = 1_000_000


def _lines(path: Path) -> list[dict[str, Any]]:
    opener: Any = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def _events(path: Path) -> list[dict[str, Any]]:
    return [line["event"] for line in _lines(path)]


def _requests(events: list[dict[str, Any]], sid: str | None) -> list[dict[str, Any]]:
    """The request_end records of Dynamo session ``sid`` (None: without a session), in the
    order they were received."""
    rows = [e for e in events if e["event_type"] == "request_end"
            and (e.get("agent_context") or {}).get("session_id") == sid]  # fmt: skip
    return sorted(rows, key=lambda e: e["request"]["request_received_ms"])


def _import(
    src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str = "dynamo"
) -> tuple[Trace, str, str]:
    out = tmp_path / "dynamo.agentload.jsonl.zst"
    code, stdout, err = run(["trace", "import", fmt, str(src), "-o", str(out)], capsys)
    assert code == 0, err
    assert "Traceback" not in err
    code, vout, verr = run(["trace", "validate", str(out)], capsys)
    assert code == 0, vout + verr
    assert "content: imported from dynamo (" in vout and "block size 64), no message text" in vout
    return load_trace(out), stdout, err


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("agentload: warning: ")]


def test_the_real_trace_as_a_tree_of_agents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _events(JSONL)
    assert {e["schema"] for e in events} == {"dynamo.request.trace.v1"}
    trace, stdout, err = _import(JSONL, tmp_path, capsys)
    assert _warnings(err) == [] and err == ""
    src = trace.header.source
    assert src is not None and src.deviations == {} and src.records == len(events)
    assert (src.format, src.hash_id_scope, trace.header.block_size) == ("dynamo", "global", 64)
    # s1 (three turns) and its sub-agent s1-sub (two) are one session; s2 and the two requests
    # without a session (the readiness check of scripts/dynamo.sh, the last call) are their own
    assert stdout.strip() == (
        f"wrote {tmp_path / 'dynamo.agentload.jsonl.zst'}: 4 sessions, 5 agents, 8 calls from 1 "
        "dynamo file (block size 64)"
    )
    assert sorted(trace.sessions) == ["r0", "r1", "s1", "s2"]
    sub = trace.agents["s1-sub"]
    assert (sub.session_id, sub.parent_agent_id, sub.role) == ("s1", "s1", "subagent")
    assert trace.agents["s1"].parent_agent_id is None and trace.agents["s1"].role == "orchestrator"
    for sid in ("s1", "s1-sub", "s2"):
        rows = _requests(events, sid)
        calls = trace.calls_of(sid)
        assert [c.usage.prompt_tokens for c in calls] == [
            r["request"]["input_tokens"] for r in rows
        ]
        assert [c.request.max_tokens for c in calls] == [
            r["request"]["output_tokens"] for r in rows
        ]
        assert [c.usage.cached_tokens for c in calls] == [
            r["request"]["cached_tokens"] for r in rows
        ]
        assert [trace.blocks(c) for c in calls] == [
            [str(h) for h in r["request"]["replay"]["input_sequence_hashes"]] for r in rows
        ]
    alone = _requests(events, None)
    assert [c.usage.prompt_tokens for s in ("r0", "r1") for c in trace.calls_of(s)] == [
        r["request"]["input_tokens"] for r in alone
    ]
    assert trace.sessions["r0"].meta["request_id"] == alone[0]["request"]["request_id"]


def test_times_gaps_and_tools_are_the_recorded_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    events = _events(JSONL)
    trace, _, _ = _import(JSONL, tmp_path, capsys)
    t0 = min(e["request"]["request_received_ms"] for e in events if e.get("request"))
    assert trace.header.clock.unix_ns == t0 * MS  # the first request's wall time
    m = trace.header.clock.mono_ns
    rows = {c: r for s in ("s1", "s1-sub") for c, r in zip(
        [c.id for c in trace.calls_of(s)], _requests(events, s), strict=True)}  # fmt: skip
    for cid, r in rows.items():
        t, req = trace.calls[cid].timings, r["request"]
        assert t.submit_ns - m == (req["request_received_ms"] - t0) * MS
        assert t.last_token_ns - m == round(
            (req["request_received_ms"] - t0 + req["total_time_ms"]) * MS
        )
        assert t.first_token_ns - m == round(
            (req["request_received_ms"] - t0 + req["ttft_ms"]) * MS
        )
    # the recorded gap between the root's first two turns: the bash tool and the harness
    c0, c1, c2 = trace.calls_of("s1")
    gap = c1.timings.submit_ns - (c0.timings.last_token_ns or 0)
    req0, req1 = rows["s1.0"]["request"], rows["s1.1"]["request"]
    assert gap == round(
        (req1["request_received_ms"] - req0["request_received_ms"] - req0["total_time_ms"]) * MS
    )
    # the harness's tool events: one tool call each, its times the tool's own
    tools = {(e["agent_context"]["session_id"], e["tool"]["tool_call_id"]): e["tool"]
             for e in events if e["event_type"] in ("tool_end", "tool_error")}  # fmt: skip
    assert len(trace.tool_calls) == len(tools) == 3
    for (sid, call_id), tool in tools.items():
        tc = trace.tool_call("s1", call_id if sid == "s1" else f"{sid}/{call_id}")
        assert tc is not None and tc.agent_id == sid and tc.name == tool["tool_class"]
        assert tc.start_ns - m == (tool["started_at_unix_ms"] - t0) * MS
        assert tc.end_ns - m == (tool["ended_at_unix_ms"] - t0) * MS
        assert tc.error == tool.get("error_type")
    # each call waits for the tools its agent ran before it; the root's last turn for the
    # sub-agent, which its task tool ran (the sub-agent's delegate tool call)
    assert (c1.depends_on, c2.depends_on) == (["call_1"], ["call_2", "s1-sub"])
    assert trace.calls_of("s1-sub")[1].depends_on == ["s1-sub/call_1"]
    assert trace.agents["s1-sub"].parent_tool_call_id == "call_2"
    assert trace.tool_call("s1", "call_2").child_agent_id == "s1-sub"  # type: ignore[union-attr]
    assert [c.turn for c in trace.calls_of("s1")] == ["user", "tool", "tool"]
    assert [c.turn for c in trace.calls_of("s1-sub")] == ["brief", "tool"]


def test_replay_plans_the_recorded_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace, _, _ = _import(JSONL, tmp_path, capsys)
    plans = {p.session_id: p for p in build_plans([trace], salt_at="off")}
    assert sorted(plans) == ["r0", "r1", "s1", "s2"]
    s1 = plans["s1"].calls
    assert [e.pred for e in s1["s1-sub.0"].preds] == ["s1.1"]  # started after the root's turn 2
    assert sorted(e.pred for e in s1["s1.2"].preds) == ["s1-sub.1", "s1.1"]  # waits for it
    assert compute_stats(trace)["llm_calls"] == 8


def test_the_default_sink_s_segments_by_prefix_and_auto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default jsonl_gz sink's segment, named by the DYN_REQUEST_TRACE_OUTPUT_PATH prefix
    as Dynamo was given it, or by auto from the segment itself: the same run's tree."""
    events = _events(SEGMENT)
    trace, stdout, _ = _import(SAMPLES / "dynamo-request-trace", tmp_path, capsys)
    assert trace.header.source is not None and trace.header.source.files == [str(SEGMENT)]
    assert "4 sessions, 5 agents, 8 calls from 1 dynamo file" in stdout
    assert trace.agents["s1-sub"].parent_agent_id == "s1"
    for sid in ("s1", "s1-sub", "s2"):
        assert [c.usage.prompt_tokens for c in trace.calls_of(sid)] == [
            r["request"]["input_tokens"] for r in _requests(events, sid)
        ]
    out = tmp_path / "auto.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "auto", str(SEGMENT), "-o", str(out)], capsys)
    assert code == 0 and err.startswith("auto: dynamo (detected from "), err


@pytest.mark.parametrize("path", [JSONL, SEGMENT], ids=["jsonl", "jsonl_gz"])
def test_auto_tells_a_dynamo_trace_apart(path: Path) -> None:
    assert detect_format([path])[0] == "dynamo"


def test_deviations_are_accepted_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real lines, each request's cached_tokens null and input_tokens a string, a key
    Dynamo does not write, a record kind it does not write, a line that is no record, a bare
    record and a request_payload record: imported as the originals."""
    lines = _lines(JSONL)
    n = sum(1 for line in lines if line["event"]["event_type"] == "request_end")
    for line in lines:
        req = line["event"].get("request")
        if req is not None:
            req["cached_tokens"] = None
            req["input_tokens"] = str(req["input_tokens"])
            req["lora"] = "none"
    lines[1] = lines[1]["event"]  # bare, as the stderr sink writes it
    lines += [
        {"timestamp": 9, "event": {**lines[2]["event"], "event_type": "router_selection"}},
        {"verification": "trace-s3-uploader"},
        {"timestamp": 9, "event": {"schema": "dynamo.request.trace.v1",
                                   "event_type": "request_payload", "event_time_unix_ms": 1}},
    ]  # fmt: skip
    src = write_jsonl(tmp_path / "changed.jsonl", lines)
    trace, stdout, err = _import(src, tmp_path, capsys)
    assert trace.header.source is not None
    assert trace.header.source.deviations == {  # (a null cached_tokens: optional in Dynamo)
        "event: no record in the line, skipped": 1,
        "event_type: unknown record kind, skipped": 1,
        "request.input_tokens: number as string": n,
        "request.lora: extra key": n,
    }
    (line,) = _warnings(err)
    assert f"{2 * n + 2} deviations from the dynamo schema accepted" in line
    assert f"request.input_tokens: number as string \u00d7{n}" in line
    assert "; 1 request_payload records not read (content-free import)" in stdout
    records = [x.get("event", x) for x in lines]
    assert sorted(c.usage.prompt_tokens for c in trace.calls.values()) == sorted(
        int(r["request"]["input_tokens"]) for r in records if r.get("event_type") == "request_end"
    )
    assert len(trace.calls) == n and trace.agents["s1-sub"].parent_agent_id == "s1"
    assert all(c.usage.cached_tokens is None for c in trace.calls.values())


def _request_line(**changes: Any) -> dict[str, Any]:
    """The sample's first request of s1, with ``changes`` to its record (None: removed)."""
    line = next(x for x in _lines(JSONL) if (x["event"].get("agent_context") or {}).get(
        "session_id") == "s1" and x["event"]["event_type"] == "request_end")  # fmt: skip
    event = line["event"]
    for path, value in changes.items():
        *parents, key = path.split("__")
        d = event
        for p in parents:
            d = d[p]
        if value is None:
            del d[key]
        else:
            d[key] = value
    return line


@pytest.mark.parametrize(
    ("changes", "expect"),
    [
        ({"request": None}, "line 2: request: missing"),
        ({"event_time_unix_ms": None}, "line 2: event_time_unix_ms: missing"),
        ({"request__input_tokens": "many"}, "line 2 request: input_tokens: expected an integer"),
        ({"request__input_tokens": None, "request__replay": None},
         "line 2 request: input_tokens: missing (an integer)"),
        ({"request__output_tokens": -1}, "line 2 request: output_tokens: expected an integer >= 0"),
        ({"request__replay__input_sequence_hashes": [1, 2, 3, 4, 5]},
         "line 2 request.replay: input_sequence_hashes: 5 block ids do not fit 207 input tokens "
         "at block size 64 (at most 4)"),
        ({"request__request_received_ms": 1e30}, "line 2 request: request_received_ms: 1e+30 is out of range"),
        ({"agent_context": [1]}, "line 2: agent_context: expected an object"),
        ({"request__replay__trace_block_size": 16},
         "line 2 request.replay: trace_block_size: 16 differs from 64 of an earlier record"),
        ({"agent_context__parent_session_id": "s1"},
         "line 2 agent_context: parent_session_id: sessions are each other's parents (s1 -> s1)"),
        ({"agent_context__parent_session_id": "other"},
         "line 3 agent_context: parent_session_id: 'other' for session 's1'"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any], expect: str
) -> None:
    first = _lines(JSONL)[0]
    bad = _request_line(**changes)
    lines = [first, bad]
    if "other" in str(changes):  # the same session with its parent first and then another
        lines = [first, _request_line(agent_context__parent_session_id="s0"), bad]
    src = write_jsonl(tmp_path / "bad.jsonl", lines)
    out = tmp_path / "bad.agentload.jsonl.zst"
    line = one_line_exit_2(["trace", "import", "dynamo", str(src), "-o", str(out)], capsys)
    assert f"bad.jsonl:{expect}" in line, line
    assert not out.exists()


def test_broken_and_empty_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "x.agentload.jsonl.zst")
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(JSONL.read_bytes()[:-20])
    n = len(_lines(JSONL))
    line = one_line_exit_2(["trace", "import", "dynamo", str(cut), "-o", out], capsys)
    assert f"cut.jsonl:line {n}: invalid JSON (the file ends inside it" in line
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    line = one_line_exit_2(["trace", "import", "dynamo", str(empty), "-o", out], capsys)
    assert line.endswith("empty.jsonl: no records (an empty file)")
    tools = write_jsonl(tmp_path / "tools.jsonl", [x for x in _lines(JSONL)
                                                   if x["event"]["event_type"] != "request_end"])  # fmt: skip
    line = one_line_exit_2(["trace", "import", "dynamo", str(tools), "-o", out], capsys)
    assert line.endswith("tools.jsonl: no request_end records")
    line = one_line_exit_2(["trace", "import", "dynamo", str(tmp_path / "none"), "-o", out], capsys)
    assert line.endswith("none: no such file or directory")


@settings(
    max_examples=60,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_a_damaged_trace_imports_or_is_one_error(
    data: st.DataObject, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The real file damaged by the fuzz suites' strategies (bytes flipped, lines cut, dropped,
    duplicated, values replaced by hostile ones): a trace that loads, or one line."""
    work = tmp_path_factory.mktemp("dynamo")
    body, note = data.draw(damaged_lines(JSONL.read_bytes()), label="damage")
    src = work / "damaged.jsonl"
    src.write_bytes(body)
    out = work / "out.agentload.jsonl.zst"
    try:
        import_dynamo([src], out)
    except AgentloadError as exc:
        text = str(exc)
        assert text and "\n" not in text, (note, text)
        assert not out.exists(), note
    else:
        load_trace(out)


def test_tools_without_an_end_or_a_request_of_their_session(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tool whose tool_end was lost lasts no time; one of a session that made no request, or
    run before its session's first request, has no call to belong to: both counted."""
    lines = [x for x in _lines(JSONL) if not (x["event"]["event_type"] == "tool_end"
             and x["event"]["tool"]["tool_call_id"] == "call_1")]  # fmt: skip
    start = next(x for x in lines if x["event"]["event_type"] == "tool_start")
    early = json.loads(json.dumps(start))
    early["event"]["tool"].update(tool_call_id="early", started_at_unix_ms=1)
    alone = json.loads(json.dumps(start))
    alone["event"]["agent_context"] = {"session_id": "s9", "parent_session_id": "s8"}
    src = write_jsonl(tmp_path / "tools.jsonl", [*lines, early, alone])
    trace, stdout, _ = _import(src, tmp_path, capsys)
    assert "4 sessions, 5 agents, 8 calls" in stdout
    assert "; 1 tool calls before any request of their session left out" in stdout
    assert "; 1 tool calls of sessions without requests left out" in stdout
    assert "; 3 tool calls without a tool_end kept as lasting no time" in stdout  # (all three)
    tc = trace.tool_call("s1", "call_1")
    assert tc is not None and tc.start_ns == tc.end_ns
    assert trace.calls_of("s1")[1].depends_on == ["call_1"]  # (it ended before the next call)
