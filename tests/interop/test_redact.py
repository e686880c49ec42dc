"""`agentload trace redact`: a real generated trace, redacted, keeps its shape and loses its text."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).parent))

from otel_helpers import cli, quick_trace

from agentload.trace import load_trace
from agentload.trace import schema as S
from agentload.trace.trace import Trace

SALT = "s4lt-Quokka-7731"
WORD = re.compile(r"[A-Za-z][A-Za-z0-9]{3,}")

# The words a redacted trace may share with the original's text, because they are the trace
# format itself: the field names of the schema's records (taken from the models below, not
# listed by hand) and these few fixed values: the schema name, booleans, record types, blob
# kinds, the chat roles and the keys of a redacted blob.
FORMAT_VALUES = {"agentload", "trace", "true", "false", "message", "tools", "text"}
FORMAT_VALUES |= {"header", "session", "agent", "blob", "llm_call", "tool_call", "event"}
FORMAT_VALUES |= {"system", "user", "assistant", "tool", "chars", "ref", "arguments_chars"}
FORMAT_VALUES |= {"tool_call_chars"}
MODELS = (S.Header, S.ClockAnchor, S.HostFacts, S.TokenCalibration, S.SessionRecord)
MODELS += (S.AgentRecord, S.BlobRecord, S.RequestParams, S.ToolCallRef, S.ResponseRecord)
MODELS += (S.Usage, S.Timings, S.PrefixInfo, S.LLMCallRecord, S.ToolCallRecord, S.EventRecord)


def words(text: str) -> set[str]:
    return set(WORD.findall(text))


def format_words() -> set[str]:
    names = {"schema", *FORMAT_VALUES}
    for m in MODELS:
        names |= set(m.model_fields)
    return {w for n in names for w in words(n)}


def structure_words(t: Trace, *, tool_names: bool) -> set[str]:
    """What the redaction keeps by design, read from the original: record ids (agentload's
    own), agent roles, enumerated values, the model, host facts, the keys of a session's numeric
    meta, and (by default) tool names."""
    keep: set[str] = {t.header.tokenizer, t.header.model or "", t.header.created_at}
    if t.header.host is not None:
        keep |= {t.header.host.os, t.header.host.python}
    for s in t.sessions.values():  # and the keys of the numbers its meta keeps
        keep |= {s.id, s.end_reason or "", s.sandbox or ""}
        keep |= {k for k, v in s.meta.items() if not isinstance(v, str)}
    for a in t.agents.values():
        keep |= {a.id, a.role, a.context_policy}
    for c in t.calls.values():
        keep |= {c.id, c.request.model, c.response.finish_reason or ""}
        keep |= {tc.id for tc in c.response.tool_calls}
    for tc in t.tool_calls.values():
        keep |= {tc.id} | ({tc.name} if tool_names else set())
    for b in t.blobs.values():  # the tool schemas' names
        if b.kind == "tools" and tool_names:
            keep |= {str(tool["function"]["name"]) for tool in b.content}
    keep |= {e.kind for e in t.events}
    return {w for k in keep for w in words(k)}


def strings(x: Any) -> Iterator[str]:
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for k, v in x.items():
            yield str(k)
            yield from strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from strings(v)


def original_words(t: Trace) -> set[str]:
    """Every word of the original's text: the blobs (messages, tool schemas), tool arguments,
    the scenario config, the sessions' workspace and the text values of their meta (its keys
    are agentload's own, and the numbers under them stay)."""
    out: set[str] = set()
    for b in t.blobs.values():
        for s in strings(b.content):
            out |= words(s)
    for tc in t.tool_calls.values():
        for s in strings(tc.arguments):
            out |= words(s)
    for s in strings(t.header.scenario_config or {}):
        out |= words(s)
    for sess in t.sessions.values():
        texts = [v for v in sess.meta.values() if isinstance(v, str)]
        for s in strings([sess.workspace or "", texts]):
            out |= words(s)
    return out


def text_of(path: Path) -> str:
    with zstandard.open(path, "rb") as f:
        return f.read().decode()


@pytest.fixture(scope="session")
def quick(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return quick_trace(tmp_path_factory)


@pytest.fixture
def salted(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("REDACT_SALT", SALT)
    return "REDACT_SALT"


def redact(src: Path, out: Path, *args: str) -> Path:
    res = cli("trace", "redact", str(src), "-o", str(out), *args)
    assert res.code == 0, res.err
    assert res.out.startswith(f"{out}: redacted ") and "the salt not written" in res.out
    return out


def test_no_text_of_the_original_survives(quick: Path, tmp_path: Path, salted: str) -> None:
    out = redact(quick, tmp_path / "r.agentload.jsonl.zst", "--salt-env", salted)
    orig = load_trace(quick)
    text = text_of(out)
    theirs = original_words(orig)
    assert len(theirs) > 500  # a real trace: code, paths, identifiers, prose
    allowed = format_words() | structure_words(orig, tool_names=True)
    leaked = (theirs & words(text)) - allowed
    assert not leaked, sorted(leaked)
    # The allowance is small next to what was removed.
    assert len(theirs & allowed) < len(theirs) // 8
    # Paths of the workspace, verbatim, are gone too (not only their words).
    for path in ("email/_header_value_parser.py", "test/test_email", "/workspace"):
        assert path in text_of(quick)
        assert path not in text
    assert SALT not in text and SALT.encode().hex() not in text


def test_hashed_tool_names_leave_no_tool_name(quick: Path, tmp_path: Path, salted: str) -> None:
    out = redact(quick, tmp_path / "h.agentload.jsonl.zst", "--salt-env", salted,
                 "--hash-tool-names")  # fmt: skip
    orig, red = load_trace(quick), load_trace(out)
    names = {tc.name for tc in orig.tool_calls.values()}
    assert {"delegate", "read_file"} <= names
    text = text_of(out)
    for name in names:
        assert name not in text
    leaked = (original_words(orig) & words(text)) - format_words()
    leaked -= structure_words(orig, tool_names=False)
    assert not leaked, sorted(leaked)
    # One pseudonym per name: equal names stay equal.
    pseudo = {orig.tool_calls[i].name: tc.name for i, tc in red.tool_calls.items()}
    assert len(set(pseudo.values())) == len(names)
    assert all(re.fullmatch(r"tool-[0-9a-f]{8}", p) for p in pseudo.values())
    stats = json.loads(cli("trace", "stats", "--json", str(out)).out)
    assert (
        stats["tool_time_share"]
        == json.loads(cli("trace", "stats", "--json", str(quick)).out)["tool_time_share"]
    )


def test_the_shape_is_kept_record_by_record(quick: Path, tmp_path: Path, salted: str) -> None:
    out = redact(quick, tmp_path / "r.agentload.jsonl.zst", "--salt-env", salted)
    orig, red = load_trace(quick), load_trace(out)
    h = red.header
    assert h.redacted and h.source is None and h.block_size == orig.header.block_size
    assert h.endpoint is None and h.scenario is None and h.scenario_config is None
    assert h.host is not None and h.host.hostname is None
    assert set(red.calls) == set(orig.calls) and set(red.agents) == set(orig.agents)
    assert set(red.tool_calls) == set(orig.tool_calls)
    for cid, c in orig.calls.items():
        r = red.calls[cid]
        assert (r.usage, r.timings, r.depends_on) == (c.usage, c.timings, c.depends_on)
        assert r.request.max_tokens == c.request.max_tokens
        assert len(r.messages) == len(c.messages)
        assert not set(r.messages) & set(orig.blobs)  # new blob ids, not the content ids
        for mid, oid in zip(r.messages, c.messages, strict=True):
            m, o = red.blobs[mid].content, orig.blobs[oid].content
            assert set(m) <= {"role", "chars", "ref", "tool_call_id", "tool_calls"} | {
                "tool_call_chars"
            }
            assert m["role"] == o["role"] and m["chars"] == len(o["content"] or "")
            assert red.blobs[mid].tokens == orig.blobs[oid].tokens
        assert [t.name for t in r.response.tool_calls] == [t.name for t in c.response.tool_calls]
        assert all(t.arguments == "" for t in r.response.tool_calls)
        assert len(red.blocks(r)) == len(orig.blocks(c))
    for tid, t in orig.tool_calls.items():
        r2 = red.tool_calls[tid]
        assert r2.arguments == {} and r2.raw_arguments is None and r2.sandbox_id is None
        assert (r2.output_bytes, r2.start_ns, r2.end_ns) == (t.output_bytes, t.start_ns, t.end_ns)
        assert r2.child_agent_id == t.child_agent_id
    for sid, s in orig.sessions.items():
        assert red.sessions[sid].workspace is None and s.workspace is not None
        assert all(not isinstance(v, str) for v in red.sessions[sid].meta.values())
    # Equal blocks stay equal, different stay different, across the whole trace.
    pairs: dict[str, str] = {}
    for cid, c in orig.calls.items():
        for a, b in zip(orig.blocks(c), red.blocks(red.calls[cid]), strict=True):
            assert pairs.setdefault(a, b) == b
    assert len(set(pairs.values())) == len(pairs) > 100
    assert not set(pairs) & set(pairs.values())
    # trace validate accepts it.
    res = cli("trace", "validate", str(out))
    assert res.code == 0 and "OK: whole file" in res.out, res.err


def ids(path: Path) -> tuple[list[str], list[str]]:
    """Block ids in call order, and message blob ids (a tools blob's id is the content id of
    its names and lengths: nothing salted in it)."""
    t = load_trace(path)
    blocks = [b for c in t.calls.values() for b in t.blocks(c)]
    return blocks, sorted(b.id for b in t.blobs.values() if b.kind == "message")


def test_the_salt_decides_the_ids(
    quick: Path, tmp_path: Path, salted: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = ids(redact(quick, tmp_path / "a.agentload.jsonl.zst", "--salt-env", salted))
    b = ids(redact(quick, tmp_path / "b.agentload.jsonl.zst", "--salt-env", salted))
    monkeypatch.setenv("OTHER_SALT", SALT + "x")
    c = ids(redact(quick, tmp_path / "c.agentload.jsonl.zst", "--salt-env", "OTHER_SALT"))
    d = ids(redact(quick, tmp_path / "d.agentload.jsonl.zst"))  # a random salt
    assert a == b
    assert not set(a[0]) & set(c[0]) and not set(a[1]) & set(c[1])
    assert not set(a[0]) & set(d[0])
    assert len(a[0]) == len(c[0]) == len(d[0])


def test_trace_stats_is_unchanged(quick: Path, tmp_path: Path, salted: str) -> None:
    out = redact(quick, tmp_path / "r.agentload.jsonl.zst", "--salt-env", salted)
    runs = [cli("trace", "stats", "--json", str(p)) for p in (quick, out)]
    assert [r.code for r in runs] == [0, 0], [r.err for r in runs]
    before, after = (json.loads(r.out) for r in runs)
    assert before["llm_calls"] == after["llm_calls"] == len(load_trace(quick).calls)
    assert before["sessions"] == after["sessions"]
    for key in ("prompt_tokens_total", "completion_tokens_total", "cached_tokens_total"):
        assert before[key] == after[key] > 0
    assert before["roles"] == after["roles"]
    assert before["agents"] == after["agents"]
    assert before["prefix_reuse_ceiling"] == after["prefix_reuse_ceiling"]  # equal blocks kept
    before.pop("records"), after.pop("records")
    assert before == after


def test_bad_input_is_one_line(
    quick: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("NO_SUCH_SALT", raising=False)
    out = tmp_path / "r.agentload.jsonl.zst"
    line = cli("trace", "redact", str(quick), "-o", str(out), "--salt-env", "NO_SUCH_SALT")
    assert "--salt-env NO_SUCH_SALT: the variable is unset or empty" in line.one_line()
    line = cli("trace", "redact", str(tmp_path / "none.jsonl"), "-o", str(out))
    assert "none.jsonl: no such trace file" in line.one_line()
    copy = tmp_path / "same.agentload.jsonl.zst"
    copy.write_bytes(quick.read_bytes())
    line = cli("trace", "redact", str(copy), "-o", str(copy))
    assert "is an input of this command" in line.one_line()
    assert copy.read_bytes() == quick.read_bytes()
    with zstandard.open(quick, "rb") as f:
        rows = f.read().splitlines()
    k = next(i for i, r in enumerate(rows) if b'"type":"tool_call"' in r)
    rows[k] = rows[k].replace(b'"start_ns":', b'"start_ns":"soon","_":', 1)
    bad = tmp_path / "bad.agentload.jsonl"
    bad.write_bytes(b"\n".join(rows) + b"\n")
    line = cli("trace", "redact", str(bad), "-o", str(out)).one_line()
    assert f"bad.agentload.jsonl:{k + 1}" in line and "start_ns" in line
    assert not out.exists() and not list(tmp_path.glob(".r.agentload*"))
