"""Dynamo's request trace of an agentload replay, imported back (``trace import dynamo``): a
deployment started with ``DYN_REQUEST_TRACE=1`` (the frontend writes ``request_end`` records;
scripts/dynamo.sh keeps the trace variables from the workers) is sent a replay of the shipped
Dynamo sample (``tests/interop/samples_dynamo``, itself imported: a root session with a
sub-agent, and single calls) with ``--engine dynamo``; the file the frontend wrote imports, with
one call for every request the replay sent, and the tree comes back: the dynamo engine names each
sub-agent's session and its parent's (``X-Dynamo-Parent-Session-ID``), so each child session is
a sub-agent of its parent's agent."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from agentload.cli import main
from agentload.trace import load_trace

pytestmark = [pytest.mark.dynamo, pytest.mark.slow]

SAMPLE = Path(__file__).parents[1] / "interop" / "samples_dynamo" / "dynamo-request-trace.jsonl"


def _cli(argv: list[str]) -> int:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    return int(exc.value.code or 0)


def _records(path: Path) -> list[dict[str, Any]]:
    """The whole lines the jsonl sink has written so far, unwrapped."""
    if not path.is_file():
        return []
    lines = path.read_bytes().split(b"\n")[:-1]  # (the last: cut, or empty)
    return [orjson.loads(line)["event"] for line in lines if line.strip()]


def _ends_since(path: Path, t0_ms: int) -> list[dict[str, Any]]:
    return [r for r in _records(path) if r["event_type"] == "request_end"
            and r["request"]["request_received_ms"] >= t0_ms]  # fmt: skip


def test_dynamo_traces_a_replay_that_imports_back(
    dynamo: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    trace = tmp_path / "sample.agentload.jsonl.zst"
    assert _cli(["trace", "import", "dynamo", str(SAMPLE), "-o", str(trace)]) == 0
    written = tmp_path / "dynamo-request-trace.jsonl"
    monkeypatch.setenv("DYN_REQUEST_TRACE", "1")
    monkeypatch.setenv("DYN_REQUEST_TRACE_SINKS", "jsonl")
    monkeypatch.setenv("DYN_REQUEST_TRACE_OUTPUT_PATH", str(written))
    monkeypatch.setenv("DYN_REQUEST_TRACE_FILE_FLUSH_INTERVAL_MS", "100")
    dep = dynamo("--workers", "2", "--router-mode", "kv", "--speedup", "10")
    t0_ms = int(time.time() * 1000)
    out = tmp_path / "replay"
    argv = ["replay", str(trace), "--endpoint", dep.url, "--model", dep.model, "--engine",
            "dynamo", "--gap-scale", "0.25", "--timeout", "60", "--out", str(out)]  # fmt: skip
    assert _cli(argv) == 0
    (point,) = orjson.loads((out / "results.json").read_bytes())["points"]
    sent = point["requests"]
    assert len(sent) == 8 and all(r["status"] == 200 for r in sent), sent
    deadline = time.monotonic() + 30
    while len(_ends_since(written, t0_ms)) < len(sent) and time.monotonic() < deadline:
        time.sleep(0.2)  # the sink flushes every 100 ms
    ends = _ends_since(written, t0_ms)
    assert len(ends) == len(sent)

    back = tmp_path / "back.agentload.jsonl.zst"
    assert _cli(["trace", "import", "dynamo", str(written), "-o", str(back)]) == 0
    imported = load_trace(back)
    assert imported.header.source is not None and imported.header.source.deviations == {}
    since_ns = imported.header.clock.mono_ns + (t0_ms * 1_000_000 - imported.header.clock.unix_ns)
    replayed = [c for c in imported.calls.values() if c.timings.submit_ns >= since_ns]
    assert len(replayed) == len(sent)
    assert sorted(c.usage.prompt_tokens for c in replayed) == sorted(
        r["request"]["input_tokens"] for r in ends
    )
    # the tree: --engine dynamo named each sub-agent's session and its parent's, so the
    # sample's sub-agent comes back under its parent (INSTANCE/AGENT under INSTANCE)
    contexts = [r.get("agent_context") or {} for r in ends]
    children = {c["session_id"]: c["parent_session_id"] for c in contexts
                if c.get("parent_session_id")}  # fmt: skip
    assert children and all(c.startswith(p + "/") for c, p in children.items()), children
    subagents = {a.id: a.parent_agent_id for a in imported.agents.values() if a.parent_agent_id}
    assert subagents == children
    for child, parent in children.items():
        assert imported.agents[child].session_id == imported.agents[parent].session_id
