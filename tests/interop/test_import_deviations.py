"""Liberal in what the importers accept: each kind of deviation from a format's schema that loses
no meaning (a null, a missing field with a default, a number as a string, an integral float, an
extra key) imports, is counted by field and kind in one warning line and in the header's
``source.deviations``; what leaves a file without meaning stays a one-line error."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from cli_helpers import one_line_exit_2, run, write_jsonl
from test_import_mooncake import LINES
from test_import_tracelab import rows
from test_import_weka import conv_a, conv_b

from agentload.interop.content_free import (
    EXTRA_KEY,
    NULL,
    STRING_NUMBER,
    At,
    Deviations,
)
from agentload.interop.weka import import_weka
from agentload.trace import load_trace
from agentload.trace.trace import Trace


def _import(
    fmt: str, src: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[Trace, list[str]]:
    out = tmp_path / f"{fmt}.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", fmt, str(src), "-o", str(out)], capsys)
    assert code == 0, err
    warnings = [line for line in err.splitlines() if line.startswith("agentload: warning: ")]
    assert len(warnings) == len(err.strip().splitlines()), err  # nothing but the warning
    return load_trace(out), warnings


def _weka(tmp_path: Path, capsys: pytest.CaptureFixture[str], *convs: Any) -> tuple[Trace, str]:
    folder = tmp_path / "weka"
    folder.mkdir()
    for i, conv in enumerate(convs):
        (folder / f"c{i}.json").write_bytes(orjson.dumps(conv))
    trace, warnings = _import("weka", folder, tmp_path, capsys)
    return trace, "\n".join(warnings)


def _deviations(trace: Trace) -> dict[str, int]:
    assert trace.header.source is not None
    return trace.header.source.deviations


def test_a_file_that_keeps_to_the_schema_imports_without_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # conv_b has "duration_ms": null: the schema allows it (an async sub-agent), no deviation
    trace, warning = _weka(tmp_path, capsys, conv_a(), conv_b())
    assert warning == "" and _deviations(trace) == {}


def test_null_subagent_type_is_a_subagent_without_a_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv = conv_a()
    conv["requests"][2]["subagent_type"] = None
    del conv["requests"][3]["subagent_type"]
    trace, warning = _weka(tmp_path, capsys, conv)
    assert _deviations(trace) == {
        "requests[].subagent_type: missing": 1,
        "requests[].subagent_type: null": 1,
    }
    assert warning == (
        "agentload: warning: 2 deviations from the weka schema accepted (no meaning lost; "
        "counted in the trace header): requests[].subagent_type: missing \u00d71, "
        "requests[].subagent_type: null \u00d71"
    )
    for name in ("agent_001", "agent_002"):
        child = trace.agents[f"conv-a.{name}"]
        assert (child.role, child.parent_agent_id) == ("subagent", "conv-a.main")
        assert trace.tool_calls[child.parent_tool_call_id or ""].arguments == {"agent_id": name}
    assert trace.calls["conv-a.main.2"].depends_on == ["conv-a.agent_001", "conv-a.agent_002"]


def test_numbers_as_strings_and_integral_floats(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv = conv_a()
    conv["block_size"] = "64"
    conv["requests"][1]["in"] = "300"
    conv["requests"][1]["api_time"] = "1.0"
    conv["requests"][0]["out"] = 50.0
    conv["requests"][0]["hash_ids"] = [1, "2", 3.0]
    conv["requests"][2]["duration_ms"] = "4000"
    trace, warning = _weka(tmp_path, capsys, conv)
    assert _deviations(trace) == {
        "block_size: number as string": 1,
        "requests[].api_time: number as string": 1,
        "requests[].duration_ms: number as string": 1,
        "requests[].hash_ids[]: integral float": 1,
        "requests[].hash_ids[]: number as string": 1,
        "requests[].in: number as string": 1,
        "requests[].out: integral float": 1,
    }
    assert "7 deviations from the weka schema accepted" in warning
    (tmp_path / "clean").mkdir()
    clean, _ = _weka(tmp_path / "clean", capsys, conv_a())

    def seen(t: Trace, cid: str) -> tuple[Any, ...]:
        c, m = t.calls[cid], t.header.clock.mono_ns
        ends = (c.timings.first_token_ns, c.timings.last_token_ns)
        return c.usage, c.timings.submit_ns - m, [e - m for e in ends if e], t.blocks(c)

    for cid in ("conv-a.main.0", "conv-a.main.1", "conv-a.agent_001.0"):
        assert seen(trace, cid) == seen(clean, cid)
    assert trace.header.block_size == 64


def test_extra_keys_anywhere(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    conv = conv_a()
    conv["_analysis"] = {"indexed": 3}
    conv["requests"][0]["cache_hit"] = True
    conv["requests"][2]["requests"][1]["note"] = "x"
    conv["requests"][3]["odd\nkey"] = 1
    trace, warning = _weka(tmp_path, capsys, conv)
    assert _deviations(trace) == {
        "_analysis: extra key": 1,
        'requests[]."odd\\nkey": extra key': 1,
        "requests[].cache_hit: extra key": 1,
        "requests[].requests[].note: extra key": 1,
    }
    assert "\n" not in warning and "extra keys \u00d74 (" in warning
    assert "_analysis" in warning and "requests[].requests[].note" in warning


def test_missing_fields_that_have_a_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv = conv_a()
    del conv["hash_id_scope"]  # older kv-cache-tester files: one namespace per conversation
    del conv["models"]
    del conv["requests"][1]["model"]
    del conv["requests"][2]["models"]
    del conv["requests"][2]["status"]
    conv["requests"][0]["stop"] = None
    conv["tool_tokens"] = None
    trace, _ = _weka(tmp_path, capsys, conv)
    assert _deviations(trace) == {
        "hash_id_scope: missing": 1,
        "models: missing": 1,
        "requests[].model: missing": 1,
        "requests[].models: missing": 1,
        "requests[].status: missing": 1,
        "requests[].stop: null": 1,
        "tool_tokens: null": 1,
    }
    src = trace.header.source
    assert src is not None and src.hash_id_scope == "local"
    assert trace.blocks(trace.calls["conv-a.main.0"]) == ["0:1", "0:2", "0:3"]
    assert trace.calls["conv-a.main.1"].request.model == "unknown"  # no model named anywhere
    assert trace.calls["conv-a.agent_001.0"].request.model == "claude-haiku"  # its own
    assert trace.calls["conv-a.main.2"].depends_on == ["conv-a.agent_001", "conv-a.agent_002"]


def test_a_jsonl_of_conversations_counts_by_field_not_by_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    convs = [conv_a(), conv_a()]
    for c in convs:
        c["requests"][2]["subagent_type"] = None
    src = tmp_path / "convs.jsonl"
    src.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in convs))
    trace, _ = _import("weka", src, tmp_path, capsys)
    assert _deviations(trace) == {"requests[].subagent_type: null": 2}


def test_the_caller_gets_the_deviations_and_shows_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    conv = conv_a()
    conv["_analysis"] = {}
    src = tmp_path / "a.json"
    src.write_bytes(orjson.dumps(conv))
    dev = Deviations("weka")
    line = import_weka([src], tmp_path / "a.agentload.jsonl.zst", deviations=dev)
    assert line.startswith("wrote ")
    assert capsys.readouterr().err == ""  # not printed: the caller shows it
    assert dev.as_dict() == {"_analysis: extra key": 1} and dev.total == 1
    assert dev.warning() == (
        "agentload: warning: 1 deviation from the weka schema accepted (no meaning lost; counted "
        "in the trace header): extra keys \u00d71 (_analysis)"
    )
    assert _deviations(load_trace(tmp_path / "a.agentload.jsonl.zst")) == dev.as_dict()


def test_tracelab_nulls_missing_fields_and_extra_keys(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    items = rows()
    items[2]["model"] = None  # r0 of claude:s1
    del items[2]["prefix_tokens"]  # r0: nothing cached before it anyway
    items[0]["timing_events"][0]["seq"] = 4  # r1
    items[0]["tools"][0]["tool_name"] = None
    items[4]["output_tokens"] = "10"  # r2
    src = write_jsonl(tmp_path / "rounds.jsonl", items)
    trace, warnings = _import("tracelab", src, tmp_path, capsys)
    assert _deviations(trace) == {
        "model: null": 1,
        "output_tokens: number as string": 1,
        "prefix_tokens: missing": 1,
        "timing_events[].seq: extra key": 1,
        "tools[].tool_name: null": 1,
    }
    (warning,) = warnings
    assert "5 deviations from the tracelab schema accepted" in warning
    c0, c1, c2 = trace.calls_of("claude:s1.main")
    assert c0.request.model == "unknown" and c1.request.model == "claude-sonnet"
    assert trace.tool_calls["claude:s1.main.1.t0"].name == "tool"
    assert c2.usage.completion_tokens == 10


@pytest.mark.parametrize(
    ("body", "expect"),
    [
        (b"", "mc.jsonl: no requests (an empty file)"),
        (b"\n\n", "mc.jsonl: no requests (an empty file)"),
        (orjson.dumps({**LINES[0], "hash_ids": [1, 2, 3, 4]}),
         "mc.jsonl:line 1: hash_ids: 4 block ids do not fit 1200 input tokens"),
        (orjson.dumps({**LINES[0], "hash_ids": "10,11"}),
         "mc.jsonl:line 1: hash_ids: expected a list of integers"),
        (orjson.dumps({**LINES[0], "input_length": "1e3"}),
         "mc.jsonl:line 1: input_length: expected an integer"),
    ],
)  # fmt: skip
def test_what_leaves_a_mooncake_file_without_meaning_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], body: bytes, expect: str
) -> None:
    src = tmp_path / "mc.jsonl"
    src.write_bytes(body)
    line = one_line_exit_2(
        ["trace", "import", "mooncake", str(src), "-o", str(tmp_path / "o.agentload.jsonl.zst")],
        capsys,
    )
    assert expect in line, line
    assert not (tmp_path / "o.agentload.jsonl.zst").exists()


def test_what_leaves_a_tracelab_file_without_meaning_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "o.agentload.jsonl.zst")
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    line = one_line_exit_2(["trace", "import", "tracelab", str(empty), "-o", out], capsys)
    assert line.endswith("empty.jsonl: no rounds")
    untimed = [copy.deepcopy(r) for r in rows()]
    for r in untimed:
        r["timing_events"] = []
        r["tools"] = []
    src = write_jsonl(tmp_path / "untimed.jsonl", untimed)
    line = one_line_exit_2(["trace", "import", "tracelab", str(src), "-o", out], capsys)
    assert line.endswith("untimed.jsonl: no round with a timestamp (none can be placed)")


def test_deviations_line_and_bounds() -> None:
    dev = Deviations("mooncake")
    assert dev.warning() is None and dev.as_dict() == {}
    at = At("f.jsonl", "line 7 tools[2]", dev)
    at.deviate("hash_ids[5]", STRING_NUMBER)
    at.sub("[1]").deviate("x", NULL)
    At("f.jsonl", "", dev).deviate("top", EXTRA_KEY)
    At("f.jsonl", "line 3", None).deviate("ignored", NULL)  # an At without counts counts nothing
    assert dev.as_dict() == {
        "tools[].hash_ids[]: number as string": 1,
        "tools[][].x: null": 1,
        "top: extra key": 1,
    }
    for i in range(200):  # many distinct kinds: the names are bounded, the counts kept
        At("f.jsonl", "", dev).deviate(f"k{i}", EXTRA_KEY)
    assert dev.total == 203 and len(dev.as_dict()) <= 65
    assert dev.as_dict()["(other fields): extra key"] == 203 - 64
    line = dev.warning()
    assert line is not None and "\n" not in line and len(line) < 400
    assert "203 deviations from the mooncake schema" in line and "and " in line
