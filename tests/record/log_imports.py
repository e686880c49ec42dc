"""What the real-agent tests check of the logs the agents wrote during the run (``agentload trace
import claude-code|codex``): ``test_real_agents`` runs each agent once, in a temporary HOME,
through ``agentload record``, then checks both the recorded trace and the imported logs.

* Claude Code: the imported log and the recorded trace agree on the calls, the agent tree, the
  token counts the API reported and the tool calls; where Claude Code logs its requests
  (``api-request`` records, 2.1.3xx) every imported request is the one it sent, but for what its
  log does not keep (the billing line, ``metadata``); else each text of the conversation is in
  what was sent. Replay of the import sends every call to the simulator.
* Codex: one session, the root's two ``spawn_agent`` calls each the parent of a sub-agent of two
  calls, every call in Responses with the items Codex sent, in order (``auto`` detects it).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from agents_helpers import check_replays, validate
from scripted_upstream import ScriptedUpstream

from agentload.trace.schema import AgentRecord, LLMCallRecord
from agentload.trace.trace import Trace, load_trace


def import_logs(fmt: str, src: Path, out: Path, key: str) -> tuple[Trace, str]:
    """``agentload trace import FMT SRC -o OUT`` in a subprocess: exit 0; the trace validates
    and holds no ``key``; the trace and the command's stderr (the detected format, warnings)."""
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
    assert key.encode() not in out.read_bytes()
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


def check_claude_code_log(
    home: Path,
    recorded: Trace,
    upstream: ScriptedUpstream,
    exact: bool,
    simulator: Any,
    tmp: Path,
    key: str,
) -> None:
    """The Claude Code log in ``home`` imports as ``recorded`` was recorded (module
    docstring); ``exact``: this Claude Code logs its requests."""
    out = tmp / "cc-log.agentload.jsonl.zst"
    imported, err = import_logs("claude-code", home / ".claude" / "projects", out, key)
    assert "warning" not in err, err
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
    assert sorted(t.name for t in imported.tool_calls.values()) == sorted(
        t.name for t in recorded.tool_calls.values()
    )
    source = imported.header.source
    assert source is not None and source.format == "claude-code"
    assert exact == ("system" not in source.derived), source.derived
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
    check_replays(out, imported, simulator.base_url, "agentload-sim", tmp / "replay-cc-log")


def _ids(body: dict[str, Any]) -> list[Any]:
    return [i.get("call_id") or i.get("id") for i in body["input"]]


def _subsequence(a: list[Any], b: list[Any]) -> bool:
    it = iter(b)
    return all(x in it for x in a)


def check_codex_rollouts(home: Path, upstream: ScriptedUpstream, tmp: Path, key: str) -> None:
    """The Codex rollouts in ``home`` import (by ``auto``) as the run went (module docstring)."""
    out = tmp / "codex-log.agentload.jsonl.zst"
    trace, err = import_logs("auto", home / ".codex", out, key)
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
