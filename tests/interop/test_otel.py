"""`agentload trace export otel`: GenAI spans from a real generated trace, as an OTLP/JSON file
and over OTLP/HTTP to a real receiver that decodes them with opentelemetry-proto."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import zstandard
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "replay"))  # its hand-built traces

from otel_helpers import cli, quick_trace
from otlp_receiver import OTLPReceiver
from replay_traces import agentic_trace

from agentload.trace import load_trace
from agentload.trace.trace import Trace

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
CLIENT, INTERNAL = 3, 1  # OTLP SpanKind values


@pytest.fixture(scope="session")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quick_trace(tmp_path_factory)


@dataclass
class S:
    name: str
    trace_id: str
    span_id: str
    parent: str
    kind: int
    start: int
    end: int
    attrs: dict[str, Any]
    links: list[str]
    status: int


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


def spans_of(reqs: list[ExportTraceServiceRequest]) -> list[S]:
    out = []
    for req in reqs:
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for sp in ss.spans:
                    out.append(
                        S(
                            name=sp.name,
                            trace_id=sp.trace_id.hex(),
                            span_id=sp.span_id.hex(),
                            parent=sp.parent_span_id.hex(),
                            kind=sp.kind,
                            start=sp.start_time_unix_nano,
                            end=sp.end_time_unix_nano,
                            attrs={kv.key: _value(kv.value) for kv in sp.attributes},
                            links=[ln.span_id.hex() for ln in sp.links],
                            status=sp.status.code,
                        )
                    )
    return out


def _b64_ids(node: Any) -> None:
    """OTLP/JSON's hex ids back to the protobuf JSON mapping's base64 (for ParseDict)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("traceId", "spanId", "parentSpanId"):
                node[k] = base64.b64encode(bytes.fromhex(v)).decode()
            else:
                _b64_ids(v)
    elif isinstance(node, list):
        for v in node:
            _b64_ids(v)


def read_otlp_json(path: Path) -> tuple[list[dict[str, Any]], list[ExportTraceServiceRequest]]:
    docs = [json.loads(line) for line in path.read_text().splitlines()]
    reqs = []
    for doc in docs:
        copy = json.loads(json.dumps(doc))
        _b64_ids(copy)
        reqs.append(json_format.ParseDict(copy, ExportTraceServiceRequest()))
    return docs, reqs


def unix(trace: Trace, t: int) -> int:
    c = trace.header.clock
    return c.unix_ns + (t - c.mono_ns)


def check_genai_tree(trace: Trace, spans: list[S], *, content: bool) -> None:
    """Span names, kinds, parent links, attributes and timestamps against the trace."""
    by_id = {s.span_id: s for s in spans}
    assert len(by_id) == len(spans)  # span ids unique
    roots = [s for s in spans if not s.parent]
    assert [r.name for r in roots] == [f"invoke_workflow {trace.header.scenario}"]
    assert all(s.parent in by_id for s in spans if s.parent)  # every parent is in the export
    assert len({s.trace_id for s in spans}) == len(trace.sessions) == 1
    root = roots[0]
    assert root.attrs["gen_ai.operation.name"] == "invoke_workflow"
    assert root.attrs["gen_ai.conversation.id"] == "s0-0"
    sess = trace.sessions["s0-0"]
    assert sess.end_ns is not None
    assert (root.start, root.end) == (unix(trace, sess.start_ns), unix(trace, sess.end_ns))

    agents = {s.attrs["gen_ai.agent.id"]: s for s in spans if s.name.startswith("invoke_agent")}
    chats = {s.attrs["agentload.llm_call.id"]: s for s in spans if s.name.startswith("chat ")}
    tools = {s.attrs["gen_ai.tool.call.id"]: s for s in spans if s.name.startswith("execute_tool")}
    assert len(agents) + len(chats) + len(tools) + 1 == len(spans)
    assert set(agents) == set(trace.agents)
    assert set(chats) == set(trace.calls)
    assert set(tools) == set(trace.tool_calls)

    children = 0
    for aid, a in trace.agents.items():
        sp = agents[aid]
        assert sp.name == f"invoke_agent {a.role}" and sp.kind == INTERNAL
        assert sp.attrs["gen_ai.operation.name"] == "invoke_agent"
        assert sp.attrs["gen_ai.agent.name"] == a.role
        assert sp.attrs["gen_ai.provider.name"] == "openai"
        assert sp.start == unix(trace, a.start_ns)
        if a.parent_tool_call_id is None:
            assert sp.parent == root.span_id
        else:  # a sub-agent hangs under the execute_tool span of the delegate call
            children += 1
            parent = by_id[sp.parent]
            assert parent.name == "execute_tool delegate"
            assert parent.attrs["gen_ai.tool.call.id"] == a.parent_tool_call_id
            assert by_id[parent.parent].attrs["gen_ai.agent.id"] == a.parent_agent_id
            assert parent.start <= sp.start and sp.end <= parent.end
    assert children >= 3

    for cid, c in trace.calls.items():
        sp = chats[cid]
        t, u = c.timings, c.usage
        assert sp.name == f"chat {c.request.model}" and sp.kind == CLIENT
        assert by_id[sp.parent].attrs["gen_ai.agent.id"] == c.agent_id
        assert sp.attrs["gen_ai.operation.name"] == "chat"
        assert sp.attrs["gen_ai.provider.name"] == "openai"
        assert sp.attrs["gen_ai.request.model"] == c.request.model
        assert sp.attrs["gen_ai.request.max_tokens"] == c.request.max_tokens
        assert sp.attrs["gen_ai.response.finish_reasons"] == [c.response.finish_reason]
        assert sp.attrs["gen_ai.usage.input_tokens"] == u.prompt_tokens
        assert sp.attrs["gen_ai.usage.output_tokens"] == u.completion_tokens
        assert sp.attrs["gen_ai.usage.cache_read.input_tokens"] == u.cached_tokens
        assert t.first_token_ns is not None and t.last_token_ns is not None
        ttft = sp.attrs["gen_ai.response.time_to_first_chunk"]
        assert ttft == pytest.approx((t.first_token_ns - t.submit_ns) / 1e9)
        assert (sp.start, sp.end) == (unix(trace, t.submit_ns), unix(trace, t.last_token_ns))
        assert ("gen_ai.input.messages" in sp.attrs) is content
        assert ("gen_ai.output.messages" in sp.attrs) is content

    for tid, tc in trace.tool_calls.items():
        sp = tools[tid]
        assert sp.name == f"execute_tool {tc.name}" and sp.kind == INTERNAL
        assert sp.attrs["gen_ai.operation.name"] == "execute_tool"
        assert sp.attrs["gen_ai.tool.name"] == tc.name
        assert by_id[sp.parent].attrs["gen_ai.agent.id"] == tc.agent_id
        assert sp.links == [chats[tc.llm_call_id].span_id]  # the chat that asked for it
        assert (sp.start, sp.end) == (unix(trace, tc.start_ns), unix(trace, tc.end_ns))
        assert ("gen_ai.tool.call.arguments" in sp.attrs) is content


def test_otlp_json_file_follows_the_genai_conventions(quick: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.otlp.jsonl"
    res = cli("trace", "export", "otel", str(quick), "-o", str(out))
    assert res.code == 0, res.out
    assert "spans in 1 OTLP traces" in res.out
    docs, reqs = read_otlp_json(out)
    assert len(docs) == 1  # one ExportTraceServiceRequest per session, one per line
    (scope_spans,) = docs[0]["resourceSpans"][0]["scopeSpans"]
    assert scope_spans["schemaUrl"] == "https://opentelemetry.io/schemas/1.41.0"
    for sp in scope_spans["spans"]:  # OTLP/JSON: hex ids, integer enums
        assert HEX32.match(sp["traceId"]) and HEX16.match(sp["spanId"])
        assert "parentSpanId" not in sp or HEX16.match(sp["parentSpanId"])
        assert isinstance(sp["kind"], int)
    trace = load_trace(quick)
    check_genai_tree(trace, spans_of(reqs), content=False)


def test_two_exports_of_one_trace_are_equal(quick: Path, tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for out in (a, b):
        assert cli("trace", "export", "otel", str(quick), "-o", str(out)).code == 0
    assert a.read_bytes() == b.read_bytes()


def test_otlp_http_reaches_a_real_receiver(quick: Path, tmp_path: Path) -> None:
    with OTLPReceiver() as rx:
        res = cli("trace", "export", "otel", str(quick), "--otlp-endpoint", rx.url)
    assert res.code == 0, res.out
    assert f"{rx.url}: sent" in res.out
    assert rx.paths == ["/v1/traces"] and rx.content_types == ["application/x-protobuf"]
    check_genai_tree(load_trace(quick), spans_of(rx.requests), content=False)
    # The file holds exactly what went over the wire.
    out = tmp_path / "t.json"
    assert cli("trace", "export", "otel", str(quick), "-o", str(out)).code == 0
    assert read_otlp_json(out)[1] == rx.requests


def test_content_only_with_the_flag(quick: Path, tmp_path: Path) -> None:
    out = tmp_path / "c.json"
    res = cli("trace", "export", "otel", str(quick), "-o", str(out), "--content")
    assert res.code == 0, res.out
    trace = load_trace(quick)
    spans = spans_of(read_otlp_json(out)[1])
    check_genai_tree(trace, spans, content=True)
    for sp in spans:
        if sp.name.startswith("chat "):
            c = trace.calls[sp.attrs["agentload.llm_call.id"]]
            sent = trace.messages(c)
            msgs = json.loads(sp.attrs["gen_ai.input.messages"])
            assert [m["role"] for m in msgs] == [m["role"] for m in sent]
            assert msgs[0]["parts"] == [{"type": "text", "content": sent[0]["content"]}]
            for m, s in zip(msgs, sent, strict=True):
                if s["role"] == "tool":
                    assert m["parts"][0]["type"] == "tool_call_response"
                    assert m["parts"][0]["id"] == s["tool_call_id"]
            (answer,) = json.loads(sp.attrs["gen_ai.output.messages"])
            assert answer["role"] == "assistant"
            assert answer["finish_reason"] == c.response.finish_reason
            calls = [p for p in answer["parts"] if p["type"] == "tool_call"]
            assert [p["id"] for p in calls] == [t.id for t in c.response.tool_calls]
            assert all(isinstance(p["arguments"], dict) for p in calls)
            names = [d["name"] for d in json.loads(sp.attrs["gen_ai.tool.definitions"])]
            assert "delegate" in names or "read_file" in names
        if sp.name.startswith("execute_tool"):
            tc = trace.tool_calls[sp.attrs["gen_ai.tool.call.id"]]
            assert json.loads(sp.attrs["gen_ai.tool.call.arguments"]) == tc.arguments
            results = [
                b.content["content"]
                for b in trace.blobs.values()
                if b.kind == "message" and b.content.get("tool_call_id") == tc.id
            ]
            assert results and sp.attrs["gen_ai.tool.call.result"] == results[0]


def test_a_redacted_trace_exports_without_content(quick: Path, tmp_path: Path) -> None:
    red = tmp_path / "r.agentload.jsonl.zst"
    assert cli("trace", "redact", str(quick), "-o", str(red)).code == 0
    out = tmp_path / "r.json"
    res = cli("trace", "export", "otel", str(red), "-o", str(out), "--content")
    assert res.code == 0, res.out
    assert "content-free trace: its spans carry no message content" in res.out
    spans = spans_of(read_otlp_json(out)[1])
    for sp in spans:
        assert not any(k.startswith(("gen_ai.input", "gen_ai.output")) for k in sp.attrs)
        assert "gen_ai.tool.call.arguments" not in sp.attrs
    redacted = load_trace(red)
    n = 1 + len(redacted.agents) + len(redacted.calls) + len(redacted.tool_calls)
    assert len(spans) == n
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == len(redacted.calls)
    assert sum(s.attrs["gen_ai.usage.input_tokens"] for s in chats) == sum(
        redacted.prompt_tokens(c) for c in redacted.calls.values()
    )


def test_a_receiver_that_refuses_is_one_line(quick: Path) -> None:
    with OTLPReceiver(status=400) as rx:
        line = cli("trace", "export", "otel", str(quick), "--otlp-endpoint", rx.url).one_line()
    assert rx.url in line and "export of session 1 failed" in line and "400" in line


def test_bad_arguments_are_one_line(quick: Path, tmp_path: Path) -> None:
    line = cli("trace", "export", "otel", str(quick), "--otlp-endpoint", "ftp://x/y").one_line()
    assert "--otlp-endpoint ftp://x/y: not an http(s) URL" in line
    both = cli("trace", "export", "otel", str(quick), "-o", str(tmp_path / "x"),
               "--otlp-endpoint", "http://127.0.0.1:9/v1/traces")  # fmt: skip
    assert "give one of them" in both.one_line()
    assert "-o/--out" in cli("trace", "export", "otel", str(quick)).one_line()
    line = cli("trace", "export", "otel", str(quick), "-o", str(tmp_path)).one_line()
    assert "a directory" in line


def test_a_damaged_trace_is_one_line(quick: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.agentload.jsonl"
    with zstandard.open(quick, "rb") as f:
        rows = f.read().splitlines()
    call = next(i for i, r in enumerate(rows) if b'"type":"llm_call"' in r)
    rows[call] = rows[call].replace(b'"seq":', b'"seq":"x",  "_":', 1)
    bad.write_bytes(b"\n".join(rows) + b"\n")
    line = cli("trace", "export", "otel", str(bad), "-o", str(tmp_path / "o.json")).one_line()
    assert f"bad.agentload.jsonl:{call + 1}" in line and "seq" in line
    assert not (tmp_path / "o.json").exists()


def test_without_the_otel_packages_one_line_says_what_to_install(
    quick: Path, tmp_path: Path
) -> None:
    block = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ImportError(name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "from agentload.cli import main\n"
        "sys.argv = ['agentload', *sys.argv[1:]]\n"
        "main()\n"
    )
    out = tmp_path / "o.json"
    proc = subprocess.run(
        [sys.executable, "-c", block, "trace", "export", "otel", str(quick), "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "pip install 'agentload[otel]'" in line
    assert not out.exists()


def test_one_line_per_session_and_per_trace(quick: Path, tmp_path: Path) -> None:
    two = agentic_trace(tmp_path / "two.agentload.jsonl.zst", sessions=2)
    red = tmp_path / "r.agentload.jsonl.zst"
    assert cli("trace", "redact", str(quick), "-o", str(red)).code == 0
    out = tmp_path / "all.json"
    res = cli("trace", "export", "otel", str(two), str(quick), str(red), "-o", str(out))
    assert res.code == 0, res.err
    assert "in 4 OTLP traces" in res.out and "from 3 agentload trace(s)" in res.out
    docs, reqs = read_otlp_json(out)
    assert len(docs) == 4
    per_line = [spans_of([r]) for r in reqs]
    for spans in per_line:  # each line: one trace, one root
        assert len({s.trace_id for s in spans}) == 1
        assert len([s for s in spans if not s.parent]) == 1
    trace_ids = [spans[0].trace_id for spans in per_line]
    assert len(set(trace_ids)) == 4  # the redacted copy is another trace than its original
    t = load_trace(two)
    convs = [{s.attrs.get("gen_ai.conversation.id") for s in spans} - {None} for spans in per_line]
    assert convs[:2] == [{"s0"}, {"s1"}]
    for spans, sid in zip(per_line[:2], ("s0", "s1"), strict=True):
        chats = [s for s in spans if s.name.startswith("chat ")]
        assert len(chats) == sum(1 for c in t.calls.values() if c.session_id == sid)
