"""Every record type goes through the real writer and comes back equal from the reader."""

from __future__ import annotations

import datetime
from pathlib import Path

import orjson
import pytest
import zstandard

from agentload.errors import SchemaVersionError, TraceFormatError
from agentload.trace import (
    SCHEMA,
    AgentRecord,
    BlobRecord,
    EventRecord,
    Header,
    LLMCallRecord,
    PrefixInfo,
    RequestParams,
    ResponseRecord,
    SessionRecord,
    Timings,
    ToolCallRecord,
    ToolCallRef,
    TraceWriter,
    Usage,
    load_trace,
    read_trace,
)
from agentload.trace.events import EventKind

from .conftest import header

SUFFIXES = [".agentload.jsonl.zst", ".jsonl"]


def all_records() -> list[object]:
    msg = {"role": "user", "content": "hello ünïcode \u2603 <|im_end|>"}
    return [
        SessionRecord(
            id="s1", start_ns=1, workspace="stdlib:email", sandbox="docker", meta={"k": 1}
        ),
        AgentRecord(id="a1", session_id="s1", role="orchestrator", start_ns=2),
        AgentRecord(
            id="a2",
            session_id="s1",
            parent_agent_id="a1",
            parent_tool_call_id="t1",
            role="code_search",
            context_policy="fresh",
            start_ns=3,
            end_ns=30,
        ),
        BlobRecord(id="b" * 32, kind="message", content=msg, tokens=9),
        BlobRecord(id="c" * 32, kind="tools", content=[{"type": "function"}]),
        BlobRecord(id="d" * 32, kind="text", content="plain text"),
        LLMCallRecord(
            id="c1",
            session_id="s1",
            agent_id="a1",
            seq=0,
            request=RequestParams(
                model="m",
                max_tokens=64,
                temperature=0.5,
                top_p=0.9,
                seed=3,
                tools="c" * 32,
                tool_choice="auto",
                stream=True,
                extra={"ignore_eos": True},
            ),
            messages=["b" * 32],
            response=ResponseRecord(
                content="b" * 32,
                text_len=5,
                tool_calls=[ToolCallRef(id="t1", name="delegate", arguments='{"kind":"x"}')],
                finish_reason="tool_calls",
            ),
            usage=Usage(
                prompt_tokens=10,
                completion_tokens=4,
                cached_tokens=8,
                prompt_tokens_ours=11,
                completion_tokens_ours=4,
            ),
            timings=Timings(
                submit_ns=100, first_token_ns=150, last_token_ns=190, chunk_offsets_ns=[50, 70, 90]
            ),
            depends_on=["t0", "a0"],
            prefix=PrefixInfo(base=None, base_blocks=0, blocks=["0123456789abcdef"]),
            error=None,
        ),
        ToolCallRecord(
            id="t1",
            session_id="s1",
            agent_id="a1",
            llm_call_id="c1",
            name="delegate",
            arguments={"kind": "x"},
            start_ns=200,
            end_ns=300,
            exit_code=0,
            timed_out=False,
            output_bytes=12,
            output_tokens=3,
            truncated=True,
            sandbox_id="ctr-1",
            error=None,
            child_agent_id="a2",
        ),
        EventRecord(kind="retry", ns=5, session_id="s1", agent_id="a1", details={"attempt": 2}),
        SessionRecord(id="s1", start_ns=1, end_ns=400, end_reason="done", eval_passed=True),
    ]


def dump(rec: object) -> dict[str, object]:
    return rec.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize("suffix", SUFFIXES)
async def test_every_record_type_round_trips(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"run{suffix}"
    recs = all_records()
    async with TraceWriter(path, header()) as w:
        for r in recs:
            await w.write(r)  # type: ignore[arg-type]
    reader = read_trace(path)
    back = list(reader)
    assert reader.truncated is None
    assert isinstance(back[0], Header)
    assert [dump(r) for r in back[1 : 1 + len(recs)]] == [dump(r) for r in recs]
    assert {r.type for r in back} == {
        "header",
        "session",
        "agent",
        "blob",
        "llm_call",
        "tool_call",
        "event",
    }
    # The writer closes the file with its trace_end event.
    assert isinstance(back[-1], EventRecord) and back[-1].kind == EventKind.TRACE_END
    assert len(back) == len(recs) + 2
    if suffix.endswith(".zst"):
        assert path.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    else:
        assert orjson.loads(path.read_bytes().split(b"\n")[0])["type"] == "header"
    trace = load_trace(path)
    assert trace.sessions["s1"].end_reason == "done"  # the end record updates the start
    assert trace.agents["a2"].parent_agent_id == "a1"
    assert trace.messages(trace.calls["c1"])[0]["content"].startswith("hello ünïcode")
    assert trace.tools(trace.calls["c1"]) == [{"type": "function"}]
    assert trace.blocks(trace.calls["c1"]) == ["0123456789abcdef"]


async def test_header_fields_present(tmp_path: Path) -> None:
    path = tmp_path / "h.agentload.jsonl.zst"
    h = header(
        endpoint="https://user:hunter2@api.example.com:8443/v1?api_key=abcdef&x=1",
        scenario_config={"name": "unit"},
    )
    async with TraceWriter(path, h):
        pass
    data = zstandard.ZstdDecompressor().decompressobj().decompress(path.read_bytes())
    raw = orjson.loads(data.split(b"\n")[0])
    assert raw["type"] == "header"
    assert raw["schema"] == SCHEMA == "agentload.trace/1.3"
    for key in (
        "tool_version",
        "created_at",
        "clock",
        "tokenizer",
        "endpoint",
        "model",
        "scenario",
        "scenario_hash",
        "seed",
        "host",
        "block_size",
    ):
        assert key in raw, key
    created = datetime.datetime.fromisoformat(raw["created_at"])
    assert created.utcoffset() == datetime.timedelta(0)
    assert raw["clock"]["unix_ns"] > 1_600_000_000 * 10**9 and raw["clock"]["mono_ns"] > 0
    assert set(raw["host"]) >= {"python", "os", "cpu_count"}
    assert raw["tokenizer"] == "o200k_base" and raw["seed"] == 7 and raw["model"] == "agentload-sim"
    # Credentials are stripped from the endpoint URL.
    assert raw["endpoint"] == "https://***@api.example.com:8443/v1?api_key=***&x=***"
    assert b"hunter2" not in data and b"abcdef" not in data


def write_plain(path: Path, lines: list[dict[str, object]]) -> None:
    path.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))


def good_header() -> dict[str, object]:
    return dump(header())


def test_unknown_schema_major_is_refused_with_a_clear_message(tmp_path: Path) -> None:
    path = tmp_path / "future.jsonl"
    h = good_header() | {"schema": "agentload.trace/2"}
    write_plain(path, [h, {"type": "event", "kind": "note", "ns": 1}])
    with pytest.raises(SchemaVersionError) as err:
        list(read_trace(path))
    msg = str(err.value)
    assert "future.jsonl:1" in msg and "agentload.trace/2" in msg and "agentload.trace/1" in msg
    # A minor version of the known major is read.
    write_plain(path, [good_header() | {"schema": "agentload.trace/1.3"}])
    assert len(list(read_trace(path))) == 1


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (
            [{"type": "event", "kind": "x", "ns": 1}],
            "f.jsonl:1: the first record must be the header",
        ),
        ([{"type": "header", "schema": "other/1"}], "f.jsonl:1: header.schema: expected"),
        (
            [
                "H",
                {
                    "type": "llm_call",
                    "id": "c",
                    "session_id": "s",
                    "agent_id": "a",
                    "seq": 0,
                    "request": {"model": "m"},
                    "messages": [],
                    "timings": {"submit_ns": 1},
                    "usage": {"prompt_tokens": "many", "prompt_tokens_ours": 3},
                },
            ],
            "f.jsonl:2: llm_call.usage.prompt_tokens: Input should be a valid integer",
        ),
        (["H", {"type": "nope"}], "f.jsonl:2: "),
        (["H", {"kind": "x"}], "f.jsonl:2: type: missing"),
        (["H", ["not", "an", "object"]], "f.jsonl:2: a record must be a JSON object"),
        (["H", "H"], "f.jsonl:2: a second header record"),
    ],
)
def test_bad_records_name_file_line_and_field(
    tmp_path: Path, lines: list[object], expected: str
) -> None:
    path = tmp_path / "f.jsonl"
    write_plain(path, [good_header() if x == "H" else x for x in lines])  # type: ignore[misc]
    with pytest.raises(TraceFormatError) as err:
        list(read_trace(path))
    assert str(err.value).startswith(expected), str(err.value)


def test_bad_json_line_in_the_middle_is_an_error_not_truncation(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(orjson.dumps(good_header()) + b"\n{not json\n" + b'{"type":"event"}\n')
    with pytest.raises(TraceFormatError, match=r"f.jsonl:2: not valid JSON"):
        list(read_trace(path))


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(TraceFormatError, match="empty file"):
        list(read_trace(empty))
    with pytest.raises(TraceFormatError, match="cannot open"):
        list(read_trace(tmp_path / "missing.jsonl"))
    with pytest.raises(TraceFormatError, match="no header"):
        load_trace(empty)


def test_blank_lines_are_skipped_and_line_numbers_are_physical(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(orjson.dumps(good_header()) + b"\n\n\n" + b'{"type":"event","kind":1}\n')
    with pytest.raises(TraceFormatError, match=r"f.jsonl:4: event.kind"):
        list(read_trace(path))


def test_an_end_reason_is_read_as_its_kind_and_an_unknown_one_as_it_is(tmp_path: Path) -> None:
    """``session.end_reason`` is an ``EndReason`` (the trace format's vocabulary); a reason a
    newer writer added is kept as its string, not refused (liberal reading)."""
    from agentload.trace.schema import EndReason

    path = tmp_path / "reasons.jsonl"
    write_plain(
        path,
        [
            good_header(),
            {"type": "session", "id": "s1", "start_ns": 1, "end_ns": 5, "end_reason": "done"},
            {"type": "session", "id": "s2", "start_ns": 1, "end_ns": 5, "end_reason": "moved_on"},
        ],
    )
    sessions = load_trace(path).sessions
    assert sessions["s1"].end_reason is EndReason.DONE
    assert sessions["s2"].end_reason == "moved_on"
    assert not isinstance(sessions["s2"].end_reason, EndReason)
