"""The harness enforces the sub-agents' limits itself, whatever the model does.

No limit travels in a prompt any more, so a model that never stops calling tools must still be
cut at each sub-agent's ``max_turns``, and delegations must still run at most
``max_parallel_delegations`` at a time (the orchestrator's own limits: test_limits.py).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from agent_runs import run_generate
from fake_endpoint import Reply, ScriptedEndpoint

from agentload import contract


def _tireless(body: dict[str, Any]) -> Reply:
    """Three delegations in the orchestrator's first reply, then an answer; sub-agents call
    a tool on every turn and never summarise."""
    names = [t["function"]["name"] for t in body.get("tools") or ()]
    n = len(body["messages"])
    if contract.DELEGATE in names:
        if n > 2:
            return Reply("All done.", [], 3000)
        args = json.dumps({"kind": contract.FILE_READER, "task": "Read `email/utils.py`."})
        calls = [{"id": f"d{i}", "name": contract.DELEGATE, "arguments": args} for i in range(3)]
        return Reply("Delegating.", calls, 3000)
    call = {"id": f"l{n}", "name": contract.LIST_FILES, "arguments": "{}"}
    return Reply("Looking.", [call], 500)


def test_subagents_are_cut_at_max_turns_and_run_within_the_parallel_limit(
    tmp_path: Path,
) -> None:
    overrides = [
        "orchestrator.initial_context_tokens=3000",
        "follow_ups=[]",
        "orchestrator.max_parallel_delegations=1",
        "subagents.file_reader.max_turns=2",
    ]
    with ScriptedEndpoint(_tireless) as ep:
        _, trace = run_generate(
            tmp_path, overrides=overrides, sandbox="local", endpoint=ep.base_url
        )
        sent = ep.requests
    (sess,) = trace.sessions.values()
    assert sess.end_reason == "done"
    subs = sorted(
        (a for a in trace.agents.values() if a.role == contract.FILE_READER),
        key=lambda a: a.start_ns,
    )
    assert len(subs) == 3
    assert [len(trace.calls_of(a.id)) for a in subs] == [2, 2, 2]  # cut at max_turns
    for prev, cur in itertools.pairwise(subs):
        assert prev.end_ns is not None and cur.start_ns >= prev.end_ns  # one at a time
    last = sent[-1]["messages"]
    results = [m["content"] for m in last if m["role"] == "tool"]
    assert results == ["Looking."] * 3  # a cut sub-agent returns its last reply's text
