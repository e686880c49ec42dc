"""``agentload trace import openhands|mlperf|atif``: the published full-content trajectory
samples (``samples_fullcontent/``, see its README) imported through the real CLI.

Every expectation is computed from the sample file itself: the number of calls (its assistant
turns / agent steps), the first request's messages, the tool calls' names, the usage ATIF
records, the deviations the warning line counts. The imported traces validate and replay
against the simulator, every call sent. Sub-agent references (ATIF) are followed into the same
session: linked to the call that spawned them when the recorder's threading rules see it, else
another root agent of the session. Bad input is one line and exit 2, naming file and field.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "record"))  # agents_helpers

from agents_helpers import check_replays, validate
from cli_helpers import one_line_exit_2, run, write_jsonl

from agentload.interop.atif import looks_like_atif
from agentload.interop.mlperf import looks_like_mlperf
from agentload.interop.openhands import looks_like_openhands
from agentload.trace.schema import LLMCallRecord
from agentload.trace.trace import Trace, load_trace

SAMPLES = Path(__file__).parent / "samples_fullcontent"
OPENHANDS = SAMPLES / "openhands_swe_rebench.jsonl"
MLPERF = SAMPLES / "mlperf_agentic_edge_coding.jsonl"
ATIF_OH = SAMPLES / "harbor_atif_openhands_hello_world.json"
ATIF_T2 = SAMPLES / "harbor_atif_terminus2_linear_history.json"
CASES = {
    "openhands": ("openhands", OPENHANDS),
    "mlperf": ("mlperf", MLPERF),
    "atif-openhands": ("atif", ATIF_OH),
    "atif-terminus2": ("atif", ATIF_T2),
}


class Imported:
    """One sample imported through the CLI: the trace and the import's stderr."""

    def __init__(self, path: Path, trace: Trace, stderr: str) -> None:
        self.path = path
        self.trace = trace
        self.stderr = stderr

    def calls(self) -> list[LLMCallRecord]:
        """The calls in the order they were sent."""
        return sorted(self.trace.calls.values(), key=lambda c: c.timings.submit_ns)

    def warning(self) -> str:
        lines = [ln for ln in self.stderr.splitlines() if "warning:" in ln]
        assert len(lines) <= 1, self.stderr
        return lines[0] if lines else ""


def _import(fmt: str, src: Path, out: Path) -> Imported:
    """``agentload trace import FMT SRC -o OUT`` in a subprocess: exit 0, one summary line, a
    trace that ``trace validate`` passes."""
    done = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "import", fmt, str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith(f"wrote {out}: "), done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    validate(out)
    return Imported(out, load_trace(out), done.stderr)


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Imported]:
    """Every shipped sample, imported once."""
    tmp = tmp_path_factory.mktemp("fullcontent")
    return {
        name: _import(fmt, src, tmp / f"{name}.agentload.jsonl.zst")
        for name, (fmt, src) in CASES.items()
    }


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _plain(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], _text(m.get("content"))) for m in messages]


def _nulls(value: Any) -> int:
    """The null-valued entries of every object in ``value``."""
    if isinstance(value, dict):
        return sum(1 if v is None else _nulls(v) for v in value.values())
    if isinstance(value, list):
        return sum(_nulls(v) for v in value)
    return 0


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _names(calls: Any) -> list[str]:
    return [c.name for c in calls or ()]


# -- OpenHands ---------------------------------------------------------------------------------


def test_openhands_sample(imported: dict[str, Imported]) -> None:
    imp = imported["openhands"]
    (row,) = _lines(OPENHANDS)
    msgs = row["trajectory"]
    answers = [m for m in msgs if m["role"] == "assistant"]
    calls = imp.calls()
    assert len(calls) == len(answers)
    first = next(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    assert _plain(imp.trace.messages(calls[0])) == _plain(msgs[:first])
    # the Parquet struct's null keys are not sent
    assert all(None not in m.values() for c in calls for m in imp.trace.messages(c))
    for call, answer in zip(calls, answers, strict=True):
        assert _names(call.response.tool_calls) == [
            t["function"]["name"] for t in answer["tool_calls"]
        ]
        assert call.request.stream is True
    # every call that got its tool message is a tool_call record (the last, finish, has none)
    answered = {m["tool_call_id"]: m["name"] for m in msgs if m["role"] == "tool"}
    assert {t.id: t.name for t in imp.trace.tool_calls.values()} == answered
    # the schemas as sent: the row's tools without a single null
    tools = imp.trace.tools(calls[0])
    assert tools is not None and _nulls(tools) == 0
    assert [t["function"]["name"] for t in tools] == [t["function"]["name"] for t in row["tools"]]
    n = _nulls(row["tools"])
    assert n > 0
    assert f"tools[].function.parameters: null entries dropped \u00d7{n}" in imp.warning()
    assert imp.trace.header.source is not None
    assert imp.trace.header.source.deviations == {
        "tools[].function.parameters: null entries dropped": n
    }
    derived = imp.trace.header.source.derived
    assert {"model", "times", "usage", "stream", "output_tokens"} <= set(derived)
    assert all(c.usage.prompt_tokens is None for c in calls)
    assert {s.id for s in imp.trace.sessions.values()} == {f"h-{row['trajectory_id']}"}


def test_openhands_json_array_and_deviations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A JSON array of rows is read row by row; an extra key and a message's null content are
    counted; a row without tools gets the called functions with empty schemas."""
    (row,) = _lines(OPENHANDS)
    row2 = dict(row, trajectory_id="second", notes="kept out", tools=None)
    row2["trajectory"] = [dict(m) for m in row["trajectory"][:3]]
    row2["trajectory"][1]["content"] = None
    src = tmp_path / "rows.json"
    src.write_text(json.dumps([row, row2]))
    out = tmp_path / "out.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "openhands", str(src), "-o", str(out)], capsys)
    assert code == 0, err
    trace = load_trace(out)
    assert len(trace.sessions) == 2
    n_calls = sum(m["role"] == "assistant" for m in row["trajectory"]) + 1
    assert len(trace.calls) == n_calls
    assert "notes" in err and "trajectory[].content: null \u00d71" in err
    src2 = trace.header.source
    assert src2 is not None and "tools" in src2.derived
    second = [c for c in trace.calls.values() if c.session_id == "h-second"]
    (call,) = second
    tools = trace.tools(call)
    assert tools is not None
    assert [t["function"]["name"] for t in tools] == ["think"]
    assert tools[0]["function"]["parameters"] == {"type": "object", "properties": {}}


# -- MLPerf ------------------------------------------------------------------------------------


def test_mlperf_sample(imported: dict[str, Imported]) -> None:
    imp = imported["mlperf"]
    rows = sorted(_lines(MLPERF), key=lambda r: int(r["turn"]))
    answers = [r for r in rows if r["role"] == "assistant"]
    calls = imp.calls()
    assert len(calls) == len(answers)
    first_user = next(r for r in rows if r["role"] == "user")
    before = rows[: rows.index(answers[0])]
    expected = [("system", first_user["system"])] + [("user", r["content"]) for r in before]
    assert _plain(imp.trace.messages(calls[0])) == expected
    tools = imp.trace.tools(calls[0])
    assert tools == first_user["tools"]
    for call, answer in zip(calls, answers, strict=True):
        want = answer["tool_calls"]
        want = json.loads(want) if isinstance(want, str) else want
        assert _names(call.response.tool_calls) == [t["function"]["name"] for t in want]
        assert [t.id for t in call.response.tool_calls or ()] == [t["id"] for t in want]
    # the assistant turns are replayed in history with their reasoning
    carried = [m for m in imp.trace.messages(calls[1]) if m["role"] == "assistant"]
    assert carried[0].get("reasoning_content") == answers[0]["reasoning_content"]
    # each tool call lasted its tool row's recorded delay
    delays = {}
    for r in rows:
        if r["role"] == "tool":
            for res in r["tool_results"]:
                delays[res["tool_call_id"]] = float(r["delay_seconds"])
    answered = {
        t.id: (t.end_ns - t.start_ns) / 1e9 for t in imp.trace.tool_calls.values() if t.id in delays
    }
    last_client = rows[-1]["role"] != "assistant"
    # the results of a trailing client turn reach no request: those calls stay open
    closed = [
        k
        for k in delays
        if not (last_client and k in {x["tool_call_id"] for x in rows[-1]["tool_results"]})
    ]
    assert sorted(answered) == sorted(closed)
    for k in closed:
        assert answered[k] == pytest.approx(delays[k], abs=1e-6)
    if last_client:
        assert (
            "conversation: ends on a client turn with no recorded answer (not sent) \u00d71"
            in imp.warning()
        )
    source = imp.trace.header.source
    assert source is not None and source.records == len(rows)
    assert {"times", "usage", "model"} <= set(source.derived)
    assert "tool times" in source.derived["times"]


def test_mlperf_numbers_as_strings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Turns and delays written as strings, arguments as objects, a metadata row and
    interleaved conversations: accepted, the deviations counted."""
    rows = _lines(MLPERF)[:4]  # user, assistant, tool, assistant
    meta = {"_type": "dataset_metadata", "version": "1"}
    other = [dict(r, conversation_id="b") for r in rows]
    mixed: list[dict[str, Any]] = [meta]
    for a, b in zip(rows, other, strict=True):
        mixed += [dict(a, turn=str(a["turn"])), b]
    mixed[5]["delay_seconds"] = "0.25"  # the tool row of the first conversation
    mixed[3]["tool_calls"] = [
        dict(mixed[3]["tool_calls"][0], function={"name": "bash", "arguments": {"command": "ls"}})
    ]
    src = write_jsonl(tmp_path / "m.jsonl", mixed)
    out = tmp_path / "m.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "mlperf", str(src), "-o", str(out)], capsys)
    assert code == 0, err
    trace = load_trace(out)
    assert len(trace.sessions) == 2 and len(trace.calls) == 4
    assert "turn: number as string \u00d74" in err
    assert "delay_seconds: number as string \u00d71" in err
    assert "conversation_id: rows of a conversation not contiguous" in err
    # the recorded tool time is the gap between the answer and the request carrying its result
    a, b = sorted(trace.calls_of("h-astropy__astropy-14309.a0"), key=lambda c: c.seq)
    assert a.timings.last_token_ns is not None
    assert (b.timings.submit_ns - a.timings.last_token_ns) / 1e9 == pytest.approx(0.25)
    args = [
        c.response.tool_calls[0].arguments for c in trace.calls.values() if c.response.tool_calls
    ]
    assert '{"command": "ls"}' in args
    # Both conversations call their first tool functions.bash:0: each session keeps its own
    # tool_call record, and each is found under its session (replay's dependencies).
    recorded = [(tc.session_id, tc.id) for tc in trace.tool_calls.values()]
    assert len(recorded) == trace.counts["tool_call"] == 2  # one answered call per session
    assert len({sid for sid, _ in recorded}) == 2 and len({i for _, i in recorded}) == 1
    for sid, tool_id in recorded:
        tc = trace.tool_call(sid, tool_id)
        assert tc is not None and tc.session_id == sid


# -- ATIF --------------------------------------------------------------------------------------


def _atif_before_first_agent(steps: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The messages of the steps before the first agent step: the leading system steps (the
    system prompt) and the user steps; later system steps are the agent's own events."""
    out: list[tuple[str, str]] = []
    leading = True
    for s in steps:
        if s["source"] == "agent":
            break
        if s["source"] == "system" and leading:
            out.append(("system", s["message"]))
        elif s["source"] == "user":
            leading = False
            out.append(("user", s["message"]))
    return out


@pytest.mark.parametrize("name", ["atif-openhands", "atif-terminus2"])
def test_atif_samples(imported: dict[str, Imported], name: str) -> None:
    imp = imported[name]
    doc = json.loads(CASES[name][1].read_text())
    steps = doc["steps"]
    agent_steps = [s for s in steps if s["source"] == "agent"]
    calls = imp.calls()
    assert len(calls) == len(agent_steps)
    assert _plain(imp.trace.messages(calls[0])) == _atif_before_first_agent(steps)
    for call, step in zip(calls, agent_steps, strict=True):
        want = [t["function_name"] for t in step.get("tool_calls") or ()]
        assert _names(call.response.tool_calls) == want
        m = step["metrics"]
        assert call.usage.prompt_tokens == m["prompt_tokens"]
        assert call.usage.completion_tokens == m["completion_tokens"]
        assert call.usage.cached_tokens == m.get("cached_tokens")
        assert call.request.model == step.get(
            "model_name", doc["agent"].get("model_name", "unknown")
        )
    emitted = {
        t["tool_call_id"]: t["function_name"]
        for s in agent_steps
        for t in s.get("tool_calls") or ()
    }
    results = {
        r["source_call_id"]
        for s in agent_steps
        for r in (s.get("observation") or {}).get("results", [])
        if "source_call_id" in r
    }
    assert {t.id: t.name for t in imp.trace.tool_calls.values()} == {
        k: v for k, v in emitted.items() if k in results
    }
    defs = doc["agent"].get("tool_definitions")
    tools = imp.trace.tools(calls[0])
    if defs:
        assert tools == defs
    elif not emitted:
        assert tools is None  # Terminus-2 speaks JSON in text: no tools sent
    source = imp.trace.header.source
    assert source is not None and {"times", "stream"} <= set(source.derived)


def test_atif_terminus2_observations_and_missing_refs(imported: dict[str, Imported]) -> None:
    """Terminus-2 steps have no tool calls: each observation is the next user message. Its
    sub-agent and continuation files were not shipped: counted, the trajectory imports."""
    imp = imported["atif-terminus2"]
    doc = json.loads(ATIF_T2.read_text())
    agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
    last = imp.calls()[-1]
    msgs = imp.trace.messages(last)
    for step in agent_steps[:-1]:
        i = next(
            k
            for k, m in enumerate(msgs)
            if m["role"] == "assistant" and m["content"] == step["message"]
        )
        assert msgs[i + 1] == {
            "role": "user",
            "content": step["observation"]["results"][0]["content"],
        }
    refs = sum(
        len(r.get("subagent_trajectory_ref") or ())
        for s in doc["steps"]
        for r in (s.get("observation") or {}).get("results", [])
    )
    assert refs == 3
    warning = imp.warning()
    assert f"subagent_trajectory_ref: file not found \u00d7{refs}" in warning
    assert "continued_trajectory_ref: file not found \u00d71" in warning
    assert len(imp.trace.sessions) == 1 and len(imp.trace.agents) == 1


def _atif(session: str, steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {
        "schema_version": "ATIF-v1.5",
        "session_id": session,
        "agent": {"name": "test", "version": "1", "model_name": "m"},
        "steps": steps,
        **extra,
    }


def test_atif_subagent_is_child_of_its_call(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A result's ``subagent_trajectory_ref`` next to the file: the sub-agent is imported into
    the parent's session, as the child of the call the result answers; the result with no
    content carries the sub-agent's last answer; the referenced file is no session of its own."""
    task = "Count the lines of README.md and report the number"
    parent = _atif(
        "parent-1",
        [
            {"step_id": 1, "source": "system", "message": "You are the lead."},
            {"step_id": 2, "source": "user", "message": "How long is the README?"},
            {
                "step_id": 3,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {
                        "tool_call_id": "call_task",
                        "function_name": "task",
                        "arguments": {"prompt": task},
                    }
                ],
                "observation": {
                    "results": [
                        {
                            "source_call_id": "call_task",
                            "subagent_trajectory_ref": [
                                {"session_id": "child-1", "trajectory_path": "sub/child.json"}
                            ],
                        }
                    ]
                },
                "metrics": {"prompt_tokens": 50, "completion_tokens": 20, "cached_tokens": 10},
            },
            {"step_id": 4, "source": "agent", "message": "12 lines."},
        ],
    )
    child = _atif(
        "child-1",
        [
            {"step_id": 1, "source": "user", "message": task},
            {
                "step_id": 2,
                "source": "agent",
                "message": "",
                "tool_calls": [
                    {
                        "tool_call_id": "call_wc",
                        "function_name": "bash",
                        "arguments": {"command": "wc -l README.md"},
                    }
                ],
                "observation": {
                    "results": [{"source_call_id": "call_wc", "content": "12 README.md"}]
                },
            },
            {"step_id": 3, "source": "agent", "message": "It has 12 lines."},
        ],
    )
    (tmp_path / "sub").mkdir()
    (tmp_path / "parent.json").write_text(json.dumps(parent))
    (tmp_path / "sub" / "child.json").write_text(json.dumps(child))
    (tmp_path / "result.json").write_text(json.dumps({"reward": 1}))  # a Harbor job's other file
    out = tmp_path / "out.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "atif", str(tmp_path), "-o", str(out)], capsys)
    assert code == 0, err
    assert "file: not an ATIF trajectory, skipped \u00d71" in err
    trace = load_trace(out)
    assert list(trace.sessions) == ["h-parent-1"]
    assert len(trace.calls) == 4
    (sub,) = [a for a in trace.agents.values() if a.parent_agent_id is not None]
    assert sub.parent_tool_call_id == "call_task" and sub.role == "task"
    assert trace.tool_calls["call_task"].child_agent_id == sub.id
    first = min(trace.calls_of(sub.id), key=lambda c: c.seq)
    assert _plain(trace.messages(first)) == [("user", task)]
    last = max(trace.calls_of(sub.parent_agent_id or ""), key=lambda c: c.seq)
    assert trace.messages(last)[-1] == {
        "role": "tool",
        "tool_call_id": "call_task",
        "content": "It has 12 lines.",
    }
    assert sub.id in last.depends_on
    spawn = min(trace.calls_of(sub.parent_agent_id or ""), key=lambda c: c.seq)
    assert spawn.usage.cached_tokens == 10
    assert all(c.usage.prompt_tokens is None for c in trace.calls_of(sub.id))


def test_atif_terminus2_unlinked_subagents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Terminus-2's summarization sub-agents hang off a system step (no call spawned them):
    with their files next to it, they import into the same session as agents of their own."""
    shutil.copy(ATIF_T2, tmp_path / "trajectory.json")
    doc = json.loads(ATIF_T2.read_text())
    refs = [
        ref
        for s in doc["steps"]
        for r in (s.get("observation") or {}).get("results", [])
        for ref in r.get("subagent_trajectory_ref") or ()
    ]
    for k, ref in enumerate(refs):
        sub = _atif(
            ref["session_id"],
            [
                {
                    "step_id": 1,
                    "source": "user",
                    "message": f"Summarization part {k}: {ref['extra']['summary']}",
                },
                {
                    "step_id": 2,
                    "source": "agent",
                    "message": f"Part {k} done.",
                    "metrics": {"prompt_tokens": 30, "completion_tokens": 5},
                },
            ],
        )
        (tmp_path / ref["trajectory_path"]).write_text(json.dumps(sub))
    out = tmp_path / "out.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "atif", str(tmp_path), "-o", str(out)], capsys)
    assert code == 0, err
    assert "subagent_trajectory_ref" not in err
    trace = load_trace(out)
    assert len(trace.sessions) == 1
    n_agent = sum(s["source"] == "agent" for s in doc["steps"])
    assert len(trace.calls) == n_agent + len(refs)
    assert len(trace.agents) == 1 + len(refs)
    assert all(a.parent_agent_id is None for a in trace.agents.values())


def test_atif_timestamps_and_deviations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Step timestamps time the calls (each ends at its step's time; the interval before it is
    split between the tool and the call); a step_id as a string, a missing message and
    arguments as a JSON string are counted."""
    doc = _atif(
        "timed",
        [
            {
                "step_id": "1",
                "source": "user",
                "message": "Go.",
                "timestamp": "2026-01-01T00:00:00Z",
            },
            {
                "step_id": 2,
                "source": "agent",
                "timestamp": "2026-01-01T00:00:10Z",
                "tool_calls": [
                    {
                        "tool_call_id": "c1",
                        "function_name": "bash",
                        "arguments": '{"command": "ls"}',
                    }
                ],
                "observation": {"results": [{"source_call_id": "c1", "content": "a b"}]},
                "metrics": {"prompt_tokens": 10, "completion_tokens": 25},
            },
            {
                "step_id": 3,
                "source": "agent",
                "message": "Done.",
                "timestamp": "2026-01-01T00:01:00Z",
                "metrics": {"prompt_tokens": 20, "completion_tokens": 50},
            },
        ],
    )
    src = tmp_path / "t.json"
    src.write_text(json.dumps(doc))
    out = tmp_path / "out.agentload.jsonl.zst"
    code, _, err = run(["trace", "import", "atif", str(src), "-o", str(out)], capsys)
    assert code == 0, err
    assert "steps[].step_id: number as string \u00d71" in err
    assert "steps[].message: missing \u00d71" in err
    assert "steps[].tool_calls[].arguments: a JSON string, not an object \u00d71" in err
    trace = load_trace(out)
    a, b = sorted(trace.calls.values(), key=lambda c: c.seq)
    t0 = 1767225600 * 10**9
    assert a.timings.last_token_ns == t0 + 10 * 10**9
    assert a.timings.submit_ns == t0 + 10 * 10**9 - round((0.5 + 25 / 50) * 1e9)
    assert b.timings.last_token_ns == t0 + 60 * 10**9
    assert b.timings.submit_ns == t0 + 60 * 10**9 - round((0.5 + 50 / 50) * 1e9)
    tool = trace.tool_calls["c1"]
    assert (tool.start_ns, tool.end_ns) == (a.timings.last_token_ns, b.timings.submit_ns)
    source = trace.header.source
    assert source is not None and "call times" in source.derived and "times" not in source.derived


# -- replay and detection ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CASES))
def test_replay_sends_every_call(
    imported: dict[str, Imported], name: str, simulator: Any, tmp_path: Path
) -> None:
    imp = imported[name]
    check_replays(imp.path, imp.trace, simulator.base_url, "agentload-sim", tmp_path / "replay")


def test_looks_like() -> None:
    (row,) = _lines(OPENHANDS)
    first = _lines(MLPERF)[0]
    atif = json.loads(ATIF_OH.read_text())
    assert looks_like_openhands(row) and not looks_like_openhands(first)
    assert not looks_like_openhands(atif)
    assert looks_like_mlperf(first) and not looks_like_mlperf(row) and not looks_like_mlperf(atif)
    assert looks_like_atif(atif) and not looks_like_atif(row) and not looks_like_atif(first)


# -- bad input: one line, exit 2, the file and the field named -------------------------------


def _bad(
    fmt: str, src: Path, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> str:
    out = tmp_path / "bad.agentload.jsonl.zst"
    line = one_line_exit_2(["trace", "import", fmt, str(src), "-o", str(out)], capsys)
    assert str(src) in line and f": {field}: " in line, line
    assert not out.exists()
    return line


def test_bad_openhands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (row,) = _lines(OPENHANDS)
    src = write_jsonl(tmp_path / "a.jsonl", [row, {"trajectory_id": "x", "trajectory": []}])
    assert f"{src}:line 2: trajectory: no messages" in _bad(
        "openhands", src, "trajectory", tmp_path, capsys
    )
    arr = tmp_path / "b.json"
    arr.write_text(json.dumps([row, 7]))
    assert f"{arr}:[1]: row: expected a JSON object" in _bad(
        "openhands", arr, "row", tmp_path, capsys
    )
    odd = dict(row, trajectory=[{"role": "robot", "content": "hi"}])
    src3 = write_jsonl(tmp_path / "c.jsonl", [odd])
    _bad("openhands", src3, "role", tmp_path, capsys)
    # a role that is an object (found by a fuzzed copy) was a TypeError (unhashable)
    obj = dict(row, trajectory=[{"role": {"name": "user"}, "content": "hi"}])
    src4 = write_jsonl(tmp_path / "d.jsonl", [obj])
    _bad("openhands", src4, "role", tmp_path, capsys)


def test_bad_mlperf(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = _lines(MLPERF)[:3]
    rows[1] = dict(rows[1], turn="two")
    src = write_jsonl(tmp_path / "a.jsonl", rows)
    assert f"{src}:line 2: turn: expected an integer" in _bad(
        "mlperf", src, "turn", tmp_path, capsys
    )
    src2 = tmp_path / "b.jsonl"
    src2.write_text(json.dumps(_lines(MLPERF)[0]) + "\n[1, 2]\n")
    _bad("mlperf", src2, "row", tmp_path, capsys)
    lone = [dict(_lines(MLPERF)[1], turn=1)]  # an answer to nothing
    lone[0].pop("system", None)
    src3 = write_jsonl(tmp_path / "c.jsonl", lone)
    _bad("mlperf", src3, "role", tmp_path, capsys)


def test_bad_atif(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "a.json"
    src.write_text(json.dumps(_atif("s", [])))
    assert f"{src}: steps: no steps" in _bad("atif", src, "steps", tmp_path, capsys)
    doc = json.loads(ATIF_OH.read_text())
    doc["steps"][1]["source"] = "bot"
    src2 = tmp_path / "b.json"
    src2.write_text(json.dumps(doc))
    assert f"{src2}:steps[1]: source:" in _bad("atif", src2, "source", tmp_path, capsys)
    doc = json.loads(ATIF_OH.read_text())
    doc["steps"][0]["step_id"] = "first"
    src3 = tmp_path / "c.json"
    src3.write_text(json.dumps(doc))
    _bad("atif", src3, "step_id", tmp_path, capsys)
    src4 = tmp_path / "d.json"
    src4.write_text(json.dumps({"hello": 1}))
    _bad("atif", src4, "schema_version", tmp_path, capsys)
