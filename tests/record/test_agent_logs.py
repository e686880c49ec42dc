"""``agentload trace import claude-code|codex|auto``: the logs the real agents write, imported.

Each test runs a real agent (``real_agents``: Claude Code and Codex CLI, two releases each, driven
by the scripted model) in a temporary HOME, so the agent writes its own session logs there
(``~/.claude/projects/...``, ``~/.codex/sessions/...``), and imports them. Claude Code runs
through ``agentload record`` at the same time: the imported log and the recorded trace must
agree on the calls, the agent tree and the token counts the API reported; where Claude Code logs
its requests (``api-request`` records, 2.1.3xx), every imported request is the one it sent, but
for what its log does not keep (the billing line, ``metadata``). Replay of the imported trace
against the simulator sends every call. The agents skip where ``scripts/agents.sh install`` has
not run, and fail instead under AGENTLOAD_REQUIRE_AGENTS=1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import zstandard

sys.path.insert(0, str(Path(__file__).parent))  # scripted_upstream, real_agents, agents_helpers

from agents_helpers import check_replays, validate
from real_agents import (
    CLAUDE_CODE,
    CODEX,
    agent_exe,
    claude_code_script,
    codex_script,
    fixed,
    run_claude_code,
    run_codex,
    scratch_repo,
)
from scripted_upstream import Asked, ScriptedUpstream, Turn

from agentload.recorder.schema import AgentRecord, LLMCallRecord
from agentload.recorder.trace import Trace, load_trace

KEY = "sk-agent-logs-test-0123456789"


def _dispatch(asked: Asked) -> Turn:
    return claude_code_script(asked) if asked.api == "messages" else codex_script(asked)


@pytest.fixture
def upstream() -> Any:
    up = ScriptedUpstream(_dispatch).start()
    yield up
    up.stop()


def _import(fmt: str, src: Path, out: Path) -> tuple[Trace, str]:
    """``agentload trace import FMT SRC -o OUT`` in a subprocess: exit 0; the trace validates;
    its stderr (the detected format, warnings)."""
    done = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "import", fmt, str(src), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.startswith(f"wrote {out}: "), done.stdout
    validate(out)
    assert KEY.encode() not in out.read_bytes()
    return load_trace(out), done.stderr


def _tree(trace: Trace) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """Per session root: (role, calls, [(child role, child calls) sorted])."""
    out = []
    for a in trace.agents.values():
        if a.parent_agent_id is None:
            kids = sorted(
                (k.role, len(trace.calls_of(k.id)))
                for k in trace.agents.values()
                if k.parent_agent_id == a.id
            )
            out.append((a.role, len(trace.calls_of(a.id)), kids))
    return sorted(out)


def _ordered(trace: Trace) -> list[LLMCallRecord]:
    return sorted(trace.calls.values(), key=lambda c: (c.timings.submit_ns, c.id))


def _usage(c: LLMCallRecord) -> tuple[int | None, int | None, int | None]:
    return (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.cached_tokens)


def _sent(body: dict[str, Any]) -> dict[str, Any]:
    """A Messages body without what Claude Code's log does not keep: ``metadata`` and the
    billing line it puts first in ``system``."""
    out = {k: v for k, v in body.items() if k != "metadata"}
    system = out.get("system")
    if isinstance(system, list):
        out["system"] = [
            b for b in system if not str(b.get("text", "")).startswith("x-anthropic-billing-header")
        ]
    return out


def _main(trace: Trace) -> AgentRecord:
    roots = [a for a in trace.agents.values() if a.parent_agent_id is None]
    assert len(roots) == 1, [(a.id, a.role) for a in roots]
    return roots[0]


@pytest.mark.parametrize("spec", CLAUDE_CODE)
def test_claude_code_log_imports_as_it_was_recorded(
    spec: str, upstream: ScriptedUpstream, record_proxy: Any, simulator: Any, tmp_path: Path
) -> None:
    exe = agent_exe(spec)
    proxy = record_proxy(upstream=upstream.url)
    work = scratch_repo(tmp_path / "repo")
    home = tmp_path / "home"
    run_claude_code(exe, proxy.url, work, home, KEY, "logs").check()
    assert fixed(work)
    recorded = load_trace(proxy.stop())
    projects = home / ".claude" / "projects"
    imported, err = _import("claude-code", projects, tmp_path / "cc.agentload.jsonl.zst")
    assert "warning" not in err, err

    # The same calls, tree and server-reported token counts as the recording.
    assert len(imported.calls) == len(recorded.calls) == len(upstream.asked)
    assert len(imported.sessions) == len(recorded.sessions) == 1
    assert _tree(imported) == _tree(recorded)
    main = _main(imported)
    assert [[t.name for t in c.response.tool_calls] for c in imported.calls_of(main.id)] == [
        ["Agent", "Agent"], ["Read"], ["Edit"], ["Bash"], []
    ]  # fmt: skip
    assert sorted(map(_usage, imported.calls.values())) == sorted(
        map(_usage, recorded.calls.values())
    )
    assert all(c.request.api == "messages" and c.error is None for c in imported.calls.values())
    # The tool calls between them, as the proxy saw them.
    assert sorted(t.name for t in imported.tool_calls.values()) == sorted(
        t.name for t in recorded.tool_calls.values()
    )
    # Every request's text is there; where the log keeps the requests (api-request records),
    # each is the one Claude Code sent.
    source = imported.header.source
    assert source is not None and source.format == "claude-code"
    exact = "system" not in source.derived
    sent = [_sent(a.body) for a in upstream.asked]
    for call in _ordered(imported):
        body = imported.native_body(call)
        assert body is not None
        if exact:
            assert body in sent, call.id
        else:  # derived: each text of the conversation is in what was sent (the log keeps a
            # tool's output, up to white space, without the reminders Claude Code appends to it)
            assert any(
                all(any(t.strip() in u for u in _texts(s)) for t in _texts(body)) for s in sent
            ), call.id
    assert exact == (spec == CLAUDE_CODE[0]), source.derived
    # Replay of the import sends every call (each in Messages) to the simulator.
    check_replays(
        tmp_path / "cc.agentload.jsonl.zst", imported, simulator.base_url, "agentload-sim",
        tmp_path / "replay",
    )  # fmt: skip


def _texts(body: dict[str, Any]) -> set[str]:
    out: set[str] = set()

    def walk(v: Any) -> None:
        if isinstance(v, str) and len(v) >= 4:
            out.add(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(body.get("messages"))
    return out


@pytest.mark.parametrize(
    ("spec", "features"),
    [(CODEX[0], ()), (CODEX[0], ("multi_agent_v2",)), (CODEX[1], ())],
    ids=["0.171.0", "0.171.0-multi_agent_v2", "0.169.0"],
)
def test_codex_rollouts_import_with_their_sub_agents(
    spec: str, features: tuple[str, ...], upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    exe = agent_exe(spec)
    work = scratch_repo(tmp_path / "repo")
    home = tmp_path / "home"
    run_codex(exe, upstream.url + "/v1", work, home, KEY, "logs", features=features).check()
    assert fixed(work)
    trace, err = _import("auto", home / ".codex", tmp_path / "codex.agentload.jsonl.zst")
    assert err.startswith("auto: codex"), err
    assert len(trace.calls) == len(upstream.asked)
    assert len(trace.sessions) == 1
    main = _main(trace)
    kids = [a for a in trace.agents.values() if a.parent_agent_id == main.id]
    spawns = [
        t.id for c in trace.calls_of(main.id) for t in c.response.tool_calls
        if t.name == "spawn_agent"
    ]  # fmt: skip
    assert len(spawns) == 2 and sorted(str(k.parent_tool_call_id) for k in kids) == sorted(spawns)
    assert all(len(trace.calls_of(k.id)) == 2 for k in kids)
    assert all(c.request.api == "responses" for c in trace.calls.values())
    # The items of each imported call are the items Codex sent, in order: all of them for a
    # thread that did not fork; a forked thread's inherited calls Codex sends with outputs it
    # makes up, which its rollout does not keep. The first item, the base instructions as a
    # developer message, is derived (the rollout keeps neither its id nor its text as sent).
    exact = 0
    for call in _ordered(trace):
        body = trace.native_body(call)
        assert body is not None
        ids = _ids(body)[1:]
        assert body["input"][0]["role"] == "developer"
        assert any(_subsequence(ids, _ids(a.body)[1:]) for a in upstream.asked), call.id
        exact += any(_ids(a.body)[1:] == ids for a in upstream.asked)
    assert exact >= len(trace.calls) - 2, (exact, len(trace.calls))
    source = trace.header.source
    assert source is not None and source.format == "codex" and "tools" in source.derived


def _agentload(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agentload", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def _ids(body: dict[str, Any]) -> list[Any]:
    return [i.get("call_id") or i.get("id") for i in body["input"]]


def _subsequence(a: list[Any], b: list[Any]) -> bool:
    it = iter(b)
    return all(x in it for x in a)


def test_a_cut_log_imports_what_it_holds_and_says_so(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    """A session log whose last line was cut short (Claude Code killed mid-write) and that holds
    a line of garbage imports the rest, with one warning line counting what was skipped; a
    directory with no log at all is one line and exit 2."""
    exe = agent_exe(CLAUDE_CODE[1])
    work = scratch_repo(tmp_path / "repo")
    home = tmp_path / "home"
    run_claude_code(exe, upstream.url, work, home, KEY, "cut").check()
    logs = home / ".claude" / "projects"
    main = next(p for p in sorted(logs.rglob("*.jsonl")) if p.parent.name != "subagents")
    lines = main.read_bytes().splitlines(keepends=True)
    main.write_bytes(b"".join(lines[:-1]) + b"not json\n" + lines[-1][: len(lines[-1]) // 2])
    before = main.read_bytes()
    trace, err = _import("claude-code", logs, tmp_path / "cut.agentload.jsonl.zst")
    assert main.read_bytes() == before  # an input is never changed
    assert "warning: 2 deviations from the claude-code schema accepted" in err, err
    assert "line: not JSON, skipped ×2" in err
    assert 1 <= len(trace.calls) <= len(upstream.asked)
    # trace stats says what the import derived and accepted; redact keeps it and drops the text.
    stats = _agentload("trace", "stats", "--json", str(tmp_path / "cut.agentload.jsonl.zst"))
    source = json.loads(stats)["source"]
    assert source["format"] == "claude-code" and {"system", "tools"} <= set(source["derived"])
    assert source["deviations"] == {"line: not JSON, skipped": 2}
    redacted = tmp_path / "cut.redacted.agentload.jsonl.zst"
    _agentload("trace", "redact", str(tmp_path / "cut.agentload.jsonl.zst"), "-o", str(redacted))
    validate(redacted)
    assert b"SUBTASK" not in zstandard.decompress(redacted.read_bytes(), max_output_size=1 << 30)
    again = load_trace(redacted)
    assert len(again.calls) == len(trace.calls) and again.header.source is not None
    assert again.header.source.derived == trace.header.source.derived  # type: ignore[union-attr]
    empty = tmp_path / "empty"
    empty.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "agentload", "trace", "import", "claude-code", str(empty), "-o",
         str(tmp_path / "x.agentload.jsonl.zst")],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done
    assert done.stderr.count("\n") == 1 and "no Claude Code session logs" in done.stderr
