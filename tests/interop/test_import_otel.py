"""``agentload trace import otel``: OTLP/JSON GenAI spans → a full-content trace.

Through the real CLI in a subprocess: our own export of a real generated trace (``-s quick``
against the simulator: an orchestrator and three sub-agents) with ``--content`` comes back with
its sessions, agent tree, calls, message texts, usage and times, and replays against the
simulator; the two real third-party captures (OpenInference, OpenLLMetry) import with the
messages, tools, usage and model their attributes hold; the OTLP/JSON forms the protobuf JSON
mapping allows import alike, what departs from it is counted; meaningless input is one line.
Expected values are computed from the inputs.
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # otel_helpers
sys.path.insert(0, str(Path(__file__).parents[1] / "record"))  # agents_helpers
sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))  # replay_traces

from agents_helpers import check_replays, validate
from otel_helpers import quick_trace
from replay_traces import agentic_trace

from agentload.interop.otel_in import looks_like_otel
from agentload.trace.schema import LLMCallRecord
from agentload.trace.trace import Trace, load_trace

SAMPLES = Path(__file__).parent / "samples_fullcontent"
OPENINFERENCE = SAMPLES / "otel_openinference.json"
OPENLLMETRY = SAMPLES / "otel_openllmetry_genai.json"


def agentload(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentload", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def import_otel(out: Path, *sources: Path) -> tuple[Trace, str]:
    """``trace import otel SOURCES -o OUT``: exit 0, the summary line, a valid trace; the
    trace and stderr."""
    done = agentload("trace", "import", "otel", *sources, "-o", out)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith(f"wrote {out}: "), done.stdout
    validate(out)
    trace = load_trace(out)
    assert trace.header.source is not None and trace.header.source.format == "otel"
    return trace, done.stderr


def one_line_error(*sources: Path, out: Path) -> str:
    """The import fails with exit 2 and one line on stderr, no traceback; that line."""
    done = agentload("trace", "import", "otel", *sources, "-o", out)
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert not out.exists()
    return lines[0]


# -- the OTLP/JSON the tests read, decoded independently of the importer ------------------------


def any_value(v: dict[str, Any]) -> Any:
    (kind, x), *_ = v.items()
    if kind == "intValue":
        return int(x)
    if kind == "arrayValue":
        return [any_value(e) for e in x.get("values", [])]
    return x


def spans(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every span of a request, with ``attrs`` decoded."""
    out = []
    for rs in doc["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                attrs = {kv["key"]: any_value(kv["value"]) for kv in sp.get("attributes", [])}
                out.append({**sp, "attrs": attrs})
    return out


def read_docs(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def llm_spans(path: Path) -> list[dict[str, Any]]:
    return [
        sp
        for doc in read_docs(path)
        for sp in spans(doc)
        if sp["attrs"].get("gen_ai.operation.name") == "chat"
        or sp["attrs"].get("openinference.span.kind") == "LLM"
    ]


def flat(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """``PREFIX.N.rest`` attributes as one dict per N."""
    by: dict[int, dict[str, Any]] = {}
    for k, v in attrs.items():
        if k.startswith(prefix):
            n, _, rest = k[len(prefix) :].partition(".")
            by.setdefault(int(n), {})[rest] = v
    return [by[n] for n in sorted(by)]


def only_call(trace: Trace) -> LLMCallRecord:
    (call,) = trace.calls.values()
    return call


def tool_names(trace: Trace, call: LLMCallRecord) -> list[str]:
    return [t["function"]["name"] for t in trace.tools(call)]


def text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def texts(messages: list[dict[str, Any]]) -> list[tuple[str, str, list[str], str]]:
    """Per message: role, text, the names of its tool calls, the id of the call it answers."""
    return [
        (
            m["role"],
            text(m.get("content")),
            [tc["function"]["name"] for tc in m.get("tool_calls") or ()],
            m.get("tool_call_id") or "",
        )
        for m in messages
    ]


# -- the round trip through our own exporter -----------------------------------------------------


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quick_trace(tmp_path_factory)


def export(trace: Path, out: Path, *extra: str) -> Path:
    done = agentload("trace", "export", "otel", trace, "-o", out, *extra)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def unix(trace: Trace, t: int) -> int:
    c = trace.header.clock
    return c.unix_ns + (t - c.mono_ns)


def test_our_export_with_content_comes_back(quick: Path, simulator: Any, tmp_path: Path) -> None:
    otlp = export(quick, tmp_path / "q.otlp.jsonl", "--content")
    src = load_trace(quick)
    got, err = import_otel(tmp_path / "back.agentload.jsonl.zst", otlp)
    assert "warning" not in err, err  # our exporter keeps to OTLP/JSON

    assert len(got.sessions) == len(src.sessions)
    assert len(got.calls) == len(src.calls)
    assert len(got.agents) == len(src.agents)
    # Calls are matched by their submit time on the wall clock (the import keeps Unix times).
    by_time = {c.timings.submit_ns: c for c in got.calls.values()}
    assert len(by_time) == len(got.calls)
    agent_of: dict[str, str] = {}  # source agent id -> imported agent id
    for c in src.calls.values():
        g = by_time[unix(src, c.timings.submit_ns)]
        assert agent_of.setdefault(c.agent_id, g.agent_id) == g.agent_id
        assert texts(got.messages(g)) == texts(src.messages(c)), c.id
        assert g.request.model == c.request.model
        assert tool_names(got, g) == tool_names(src, c)
        assert g.request.max_tokens == c.request.max_tokens
        assert g.request.stream == c.request.stream
        assert g.usage.prompt_tokens == src.prompt_tokens(c)
        assert g.usage.completion_tokens == c.usage.completion_tokens
        assert (g.usage.cached_tokens or 0) == (c.usage.cached_tokens or 0)
        assert g.response.finish_reason == c.response.finish_reason
        assert [t.name for t in g.response.tool_calls] == [t.name for t in c.response.tool_calls]
        assert g.timings.last_token_ns == unix(src, c.timings.last_token_ns or 0)
        if c.timings.first_token_ns is not None:  # from gen_ai.response.time_to_first_chunk
            assert g.timings.first_token_ns is not None
            ttft = c.timings.first_token_ns - c.timings.submit_ns
            assert abs((g.timings.first_token_ns - g.timings.submit_ns) - ttft) < 1000
        assert [x.seq for x in got.calls_of(g.agent_id)].index(g.seq) == [
            x.seq for x in src.calls_of(c.agent_id)
        ].index(c.seq)
    # The agent tree: every agent, its parent (the one that delegated to it), its role. A root
    # agent is the recorder's "agent"; a sub-agent gets its delegation's kind, as generate's.
    assert len(set(agent_of.values())) == len(src.agents)
    for sid, gid in agent_of.items():
        s, g = src.agents[sid], got.agents[gid]
        if s.parent_agent_id is None:
            assert g.parent_agent_id is None and g.role == "agent"
        else:
            assert g.parent_agent_id == agent_of[s.parent_agent_id]
            assert g.role == s.role
            delegation = got.tool_calls[g.parent_tool_call_id or ""]
            assert delegation.name == src.tool_calls[s.parent_tool_call_id or ""].name
    assert any(a.parent_agent_id for a in src.agents.values())  # there is a tree to check
    # tool_call records: one per call whose result a later request carried, as record makes them
    assert {t.name for t in got.tool_calls.values()} == {t.name for t in src.tool_calls.values()}
    assert all(t.observed_by == "proxy" for t in got.tool_calls.values())

    check_replays(
        tmp_path / "back.agentload.jsonl.zst", got, simulator.base_url, "agentload-sim",
        tmp_path / "replay",
    )  # fmt: skip


def test_an_export_without_content_is_one_line(quick: Path, tmp_path: Path) -> None:
    otlp = export(quick, tmp_path / "bare.otlp.jsonl")
    line = one_line_error(otlp, out=tmp_path / "x.agentload.jsonl.zst")
    assert f"{otlp}:line 1 resourceSpans[0].scopeSpans[0].spans[" in line
    assert "gen_ai.input.messages" in line and "--content" in line


def test_sessions_of_two_recordings_stay_apart(quick: Path, tmp_path: Path) -> None:
    """Session ids repeat across recordings (``s0`` in both hand-built traces): agentload's own
    spans are one session per OTel trace, so nothing merges."""
    a = agentic_trace(tmp_path / "a.agentload.jsonl.zst", sessions=2)
    b = agentic_trace(tmp_path / "b.agentload.jsonl.zst", sessions=2, variant=" b")
    files = [export(t, tmp_path / f"{t.name}.otlp.jsonl", "--content") for t in (a, b, quick)]
    got, _ = import_otel(tmp_path / "all.agentload.jsonl.zst", *files)
    sources = [load_trace(t) for t in (a, b, quick)]
    assert len(got.sessions) == sum(len(s.sessions) for s in sources) == 5
    assert len(got.calls) == sum(len(s.calls) for s in sources)


# -- the real third-party captures ---------------------------------------------------------------


def test_openinference_capture(tmp_path: Path) -> None:
    (sp,) = llm_spans(OPENINFERENCE)
    a = sp["attrs"]
    trace, err = import_otel(tmp_path / "oi.agentload.jsonl.zst", OPENINFERENCE)
    assert "warning" not in err, err  # enum names and string intValues are the JSON mapping's
    assert len(trace.sessions) == 1
    call = only_call(trace)
    want = [
        (m["message.role"], m["message.content"], [], "") for m in flat(a, "llm.input_messages.")
    ]
    assert texts(trace.messages(call)) == want
    params = json.loads(a["llm.invocation_parameters"])
    assert call.request.model == params["model"]
    assert call.request.max_tokens == params["max_tokens"]
    assert call.request.temperature == params["temperature"]
    schemas = [json.loads(t["tool.json_schema"]) for t in flat(a, "llm.tools.")]
    assert trace.tools(call) == schemas
    assert call.usage.prompt_tokens == a["llm.token_count.prompt"]
    assert call.usage.completion_tokens == a["llm.token_count.completion"]
    assert call.usage.cached_tokens == a["llm.token_count.prompt_details.cache_read"]
    (out,) = flat(a, "llm.output_messages.")
    calls = flat(out, "message.tool_calls.")
    assert [(t.id, t.name, json.loads(t.arguments)) for t in call.response.tool_calls] == [
        (
            c["tool_call.id"],
            c["tool_call.function.name"],
            json.loads(c["tool_call.function.arguments"]),
        )
        for c in calls
    ]
    assert call.response.finish_reason == a["llm.finish_reason"]
    assert call.timings.submit_ns == int(sp["startTimeUnixNano"])
    assert call.timings.last_token_ns == int(sp["endTimeUnixNano"])
    assert call.timings.first_token_ns is None  # the span does not say


def test_openllmetry_capture(tmp_path: Path) -> None:
    (sp,) = llm_spans(OPENLLMETRY)
    a = sp["attrs"]
    trace, err = import_otel(tmp_path / "ol.agentload.jsonl.zst", OPENLLMETRY)
    assert "warning" not in err, err
    assert len(trace.sessions) == 1
    call = only_call(trace)
    want = [
        (m["role"], "".join(p["content"] for p in m["parts"]), [], "")
        for m in json.loads(a["gen_ai.input.messages"])
    ]
    assert texts(trace.messages(call)) == want
    assert call.request.model == a["gen_ai.request.model"]
    assert call.request.max_tokens == a["gen_ai.request.max_tokens"]
    defs = json.loads(a["gen_ai.tool.definitions"])
    assert trace.tools(call) == [
        {"type": d["type"], "function": {k: d[k] for k in ("name", "description", "parameters")}}
        for d in defs
    ]
    assert call.usage.prompt_tokens == a["gen_ai.usage.input_tokens"]
    assert call.usage.completion_tokens == a["gen_ai.usage.output_tokens"]
    assert call.usage.cached_tokens == a["gen_ai.usage.cache_read.input_tokens"]
    (out,) = json.loads(a["gen_ai.output.messages"])
    parts = [p for p in out["parts"] if p["type"] == "tool_call"]
    assert [(t.id, t.name, json.loads(t.arguments)) for t in call.response.tool_calls] == [
        (p["id"], p["name"], p["arguments"]) for p in parts
    ]
    assert call.response.finish_reason == "tool_calls"  # the conventions' "tool_call"
    assert call.timings.submit_ns == int(sp["startTimeUnixNano"])


# -- OTLP/JSON forms, deviations, other attribute layouts ----------------------------------------


def _b64(hex_id: str) -> str:
    return base64.b64encode(bytes.fromhex(hex_id)).decode()


def test_protobuf_json_forms_import_alike_without_deviations(tmp_path: Path) -> None:
    """base64 ids, integer enums and int64s as numbers are the protobuf JSON mapping's own: the
    same trace, no warning."""
    doc = json.loads(OPENLLMETRY.read_text())
    alt = copy.deepcopy(doc)
    for rs in alt["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        sp[k] = _b64(sp[k])
                sp["kind"] = {"SPAN_KIND_INTERNAL": 1, "SPAN_KIND_CLIENT": 3}[sp["kind"]]
                sp["startTimeUnixNano"] = int(sp["startTimeUnixNano"])
                sp["endTimeUnixNano"] = int(sp["endTimeUnixNano"])
                for kv in sp["attributes"]:
                    if "intValue" in kv["value"]:
                        kv["value"]["intValue"] = int(kv["value"]["intValue"])
    path = tmp_path / "alt.jsonl"
    path.write_text(json.dumps(alt) + "\n")
    got, err = import_otel(tmp_path / "alt.agentload.jsonl.zst", path)
    assert "warning" not in err, err
    ref, _ = import_otel(tmp_path / "ref.agentload.jsonl.zst", OPENLLMETRY)
    a, b = only_call(got), only_call(ref)
    assert got.messages(a) == ref.messages(b)
    assert (a.usage, a.response, a.timings) == (b.usage, b.response, b.timings)
    assert list(got.sessions) == list(ref.sessions)  # the same trace id, hex or base64
    assert got.header.source is not None and got.header.source.deviations == {}


def test_departures_from_otlp_json_are_counted(tmp_path: Path) -> None:
    doc = json.loads(OPENLLMETRY.read_text())
    sp = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    sp["start_time_unix_nano"] = sp.pop("startTimeUnixNano")  # snake_case key
    sp["vendorExtra"] = {"x": 1}  # a key a Span does not have
    path = tmp_path / "dev.json"
    lines = [json.dumps(doc), '{"resourceSpans": [{"scopeSpans": [{"spans": [{"trace']
    path.write_text("\n".join(lines) + "\n")  # and a last line cut short
    got, err = import_otel(tmp_path / "dev.agentload.jsonl.zst", path)
    assert len(got.calls) == 1
    (warning,) = [line for line in err.splitlines() if "warning" in line]
    assert "3 deviations from the otel schema" in warning, warning
    assert got.header.source is not None
    dev = got.header.source.deviations
    assert dev == {
        "line: not JSON, skipped": 1,
        "resourceSpans[].scopeSpans[].spans[].start_time_unix_nano: snake_case key (OTLP/JSON: "
        "lowerCamelCase)": 1,
        "resourceSpans[].scopeSpans[].spans[].vendorExtra: extra key": 1,
    }, dev


def _span(
    trace_id: str, span_id: str, start: int, attrs: dict[str, Any], parent: str = ""
) -> dict[str, Any]:
    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        return {"stringValue": v}

    return {
        "traceId": trace_id,
        "spanId": span_id,
        "parentSpanId": parent,
        "name": "span",
        "kind": 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 500_000_000),
        "attributes": [{"key": k, "value": value(v)} for k, v in attrs.items()],
    }


def _request(*spans: dict[str, Any]) -> dict[str, Any]:
    return {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "test"}, "spans": list(spans)}]}]}


T0 = 1_800_000_000_000_000_000


def test_a_conversation_across_traces_is_one_session_in_the_older_flat_layout(
    tmp_path: Path,
) -> None:
    """Two OTel traces (a chat app: one per user turn) with one ``session.id``: one session, the
    second call continuing the first agent; OpenLLMetry's flattened gen_ai.prompt/completion."""
    first = {
        "llm.request.type": "chat",
        "session.id": "conv-42",
        "gen_ai.request.model": "m1",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "Weather in Oslo?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.finish_reason": "tool_calls",
        "gen_ai.completion.0.tool_calls.0.id": "call_1",
        "gen_ai.completion.0.tool_calls.0.name": "weather",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Oslo"}',
        "llm.request.functions.0.name": "weather",
        "llm.request.functions.0.parameters": '{"type": "object"}',
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 7,
    }
    second = {
        **{k: v for k, v in first.items() if not k.startswith("gen_ai.completion")},
        "gen_ai.prompt.2.role": "assistant",
        "gen_ai.prompt.2.tool_calls.0.id": "call_1",
        "gen_ai.prompt.2.tool_calls.0.name": "weather",
        "gen_ai.prompt.2.tool_calls.0.arguments": '{"city": "Oslo"}',
        "gen_ai.prompt.3.role": "tool",
        "gen_ai.prompt.3.tool_call_id": "call_1",
        "gen_ai.prompt.3.content": "4 degrees, rain",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.content": "4 °C and rain.",
        "gen_ai.completion.0.finish_reason": "stop",
    }
    path = tmp_path / "turns.jsonl"
    turn = {"gen_ai.operation.name": "invoke_agent", "session.id": "conv-42"}
    reqs = [  # each turn an agent span of its own: the agent is still one
        _request(
            _span("a" * 32, "0" * 15 + "1", T0, turn),
            _span("a" * 32, "1" * 16, T0, first, parent="0" * 15 + "1"),
        ),
        _request(
            _span("b" * 32, "0" * 15 + "2", T0 + 2_000_000_000, turn),
            _span("b" * 32, "2" * 16, T0 + 2_000_000_000, second, parent="0" * 15 + "2"),
        ),
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in reqs))
    got, _ = import_otel(tmp_path / "turns.agentload.jsonl.zst", path)
    assert len(got.sessions) == 1 and len(got.agents) == 1
    c0, c1 = sorted(got.calls.values(), key=lambda c: c.seq)
    assert (c0.seq, c1.seq, c0.agent_id) == (0, 1, c1.agent_id)
    assert texts(got.messages(c1)) == [
        ("system", "Be brief.", [], ""),
        ("user", "Weather in Oslo?", [], ""),
        ("assistant", "", ["weather"], ""),
        ("tool", "4 degrees, rain", [], "call_1"),
    ]
    assert [t.name for t in c0.response.tool_calls] == ["weather"]
    assert tool_names(got, c0) == ["weather"]
    assert (c0.usage.prompt_tokens, c0.usage.completion_tokens) == (30, 7)
    (tool,) = got.tool_calls.values()  # from the result the second request carries
    assert (tool.name, tool.start_ns, tool.end_ns) == (
        "weather",
        c0.timings.last_token_ns,
        T0 + 2_000_000_000,
    )


def test_a_directory_skips_what_is_not_otlp(tmp_path: Path) -> None:
    d = tmp_path / "dir"
    d.mkdir()
    (d / "a.json").write_text(OPENLLMETRY.read_text())
    (d / "notes.json").write_text('{"hello": "world"}')
    (d / "b.jsonl").write_text(json.dumps(json.loads(OPENINFERENCE.read_text())) + "\n")
    got, err = import_otel(tmp_path / "dir.agentload.jsonl.zst", d)
    assert len(got.calls) == 2 and len(got.sessions) == 2
    assert got.header.source is not None
    assert got.header.source.deviations == {"file: not OTLP/JSON, skipped": 1}
    assert "warning" in err


def test_meaningless_input_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "x.agentload.jsonl.zst"
    bad = tmp_path / "bad.json"
    bad.write_text("not json at all")
    assert one_line_error(bad, out=out).startswith(f"agentload: error: {bad}: not JSON")
    bad.write_text('{"traces": []}\n')
    assert "line 1: resourceSpans: missing" in one_line_error(bad, out=out)
    bad.write_text(json.dumps(_request(_span("c" * 32, "3" * 16, T0, {"http.method": "GET"}))))
    assert "no LLM call spans" in one_line_error(bad, out=out)
    chat = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": "[{]"}
    bad.write_text(json.dumps(_request(_span("c" * 32, "3" * 16, T0, chat))))
    line = one_line_error(bad, out=out)
    assert f"{bad}:line 1 resourceSpans[0].scopeSpans[0].spans[0]: gen_ai.input.messages: " in line
    assert "not JSON" in line
    no_text = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"}
    bad.write_text(json.dumps(_request(_span("c" * 32, "3" * 16, T0, no_text))))
    assert "gen_ai.input.messages: no request messages" in one_line_error(bad, out=out)
    bad.write_text(json.dumps(_request(_span("xyz", "3" * 16, T0, no_text))))
    assert "traceId: expected a 16-byte id" in one_line_error(bad, out=out)
    assert "no such file" in one_line_error(tmp_path / "missing.json", out=out)


def test_looks_like_otel() -> None:
    assert looks_like_otel(json.loads(OPENLLMETRY.read_text()))
    assert looks_like_otel({"resourceSpans": []})
    assert not looks_like_otel({"sessionId": "x"})
    assert not looks_like_otel({"resourceSpans": {}})


def test_an_llm_span_around_another_is_one_call(tmp_path: Path) -> None:
    """A framework's LLM span around its client's (two instrumentations of one call): the
    inner one is the call."""
    messages = json.dumps([{"role": "user", "parts": [{"type": "text", "content": "Hi there"}]}])
    outer = {"openinference.span.kind": "LLM", "llm.input_messages.0.message.role": "user",
             "llm.input_messages.0.message.content": "Hi there", "llm.model_name": "outer"}  # fmt: skip
    inner = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "inner",
             "gen_ai.input.messages": messages}  # fmt: skip
    path = tmp_path / "nested.json"
    req = _request(
        _span("d" * 32, "4" * 16, T0, outer),
        _span("d" * 32, "5" * 16, T0 + 1_000_000, inner, parent="4" * 16),
    )
    path.write_text(json.dumps(req, indent=1))  # a pretty-printed document, not JSON Lines
    got, _ = import_otel(tmp_path / "nested.agentload.jsonl.zst", path)
    call = only_call(got)
    assert call.request.model == "inner"
    assert call.timings.submit_ns == T0 + 1_000_000
    assert texts(got.messages(call)) == [("user", "Hi there", [], "")]
    assert got.header.source is not None and "nested" in got.header.source.derived
