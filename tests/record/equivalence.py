"""The comparison of a proxy's trace with the trace ``generate`` wrote itself in the same run
(``tests/record/test_generate_equivalence.py`` against the simulator, and
``tests/engine/test_record.py`` against the real engine)."""

from __future__ import annotations

from typing import Any

from agentload.tools.arguments import read_arguments
from agentload.trace.schema import AgentRecord, LLMCallRecord
from agentload.trace.trace import Trace

__all__ = ["assert_same_story"]


def history(t: Trace, agent: AgentRecord) -> tuple[tuple[str, ...], ...]:
    calls = t.calls_of(agent.id)
    assert calls, f"agent {agent.id} made no call"
    return tuple(tuple(c.messages) for c in calls)


def agent_map(own: Trace, rec: Trace) -> dict[str, str]:
    """generate's agent id -> the proxy's, matched by the messages of all their calls (two
    agents with the very same calls, such as one sub-task given twice, pair in start order)."""
    by_history: dict[tuple[tuple[str, ...], ...], list[str]] = {}
    for a in sorted(rec.agents.values(), key=lambda a: a.start_ns):
        by_history.setdefault(history(rec, a), []).append(a.id)
    out = {}
    for a in sorted(own.agents.values(), key=lambda a: a.start_ns):
        twins = by_history.get(history(own, a))
        assert twins, f"generate's agent {a.id} ({a.role}) has no twin in the proxy's trace"
        out[a.id] = twins.pop(0)
    assert len(set(out.values())) == len(out) == len(rec.agents)
    return out


def tree_map(own: Trace, rec: Trace, amap: dict[str, str]) -> dict[str, str]:
    """generate's agent id -> the proxy's agent in the same place of the tree: a root as
    ``amap`` pairs it, a sub-agent by the tool call that started it. It differs from ``amap``
    only where two sub-agents' first requests are identical (the same brief to the same kind,
    e.g. the first test run of two sessions of one scenario): nothing in a request tells such
    twins apart when the proxy places them, so it gives them their calls in arrival order."""
    by_call = {r.parent_tool_call_id: r.id for r in rec.agents.values() if r.parent_tool_call_id}
    first = {a.id: tuple(own.calls_of(a.id)[0].messages) for a in own.agents.values()}
    out = {}
    for aid, rid in amap.items():
        a = own.agents[aid]
        if a.parent_tool_call_id is None:
            out[aid] = rid
            continue
        placed = by_call.get(a.parent_tool_call_id)
        assert placed is not None, f"no agent of the proxy's under {a.parent_tool_call_id}"
        if placed != rid:
            twin = next((b for b, r in amap.items() if r == placed), None)
            assert twin is not None and first[twin] == first[aid], (
                f"{aid} was placed as {placed}, not a twin's"
            )
        out[aid] = placed
    return out


def call_facts(c: LLMCallRecord, amap: dict[str, str] | None = None) -> dict[str, Any]:
    """What must agree between the two traces. The proxy keeps a reply's tool-call arguments as
    the model wrote them; generate keeps them as its history carries them on (a malformed call
    repaired, its own text under the tool call's ``raw_arguments``), so the proxy's side is read
    as generate reads it (``amap`` is None on the proxy's side)."""
    deps = [amap.get(d, d) for d in c.depends_on] if amap else list(c.depends_on)
    carried = (lambda a: a) if amap else (lambda a: read_arguments(a).sent)
    return {
        "seq": c.seq,
        "messages": list(c.messages),
        "tools": c.request.tools,
        "text_len": c.response.text_len,
        "tool_calls": [(tc.name, carried(tc.arguments)) for tc in c.response.tool_calls],
        "finish": c.response.finish_reason,
        "prompt_ours": c.usage.prompt_tokens_ours,
        "completion_ours": c.usage.completion_tokens_ours,
        "prompt_server": c.usage.prompt_tokens,
        "depends_on": sorted(deps),
        "error": c.error,
    }


def _differ(mine: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> str:
    """Where two lists of ``call_facts`` first part: the call and its differing facts."""
    if len(mine) != len(theirs):
        return f"{len(mine)} calls vs {len(theirs)}"
    for i, (m, t) in enumerate(zip(mine, theirs, strict=True)):
        if m != t:
            keys = [k for k in m if m[k] != t.get(k)]
            return f"call {i}: " + "; ".join(f"{k}: {m[k]!r:.300} vs {t[k]!r:.300}" for k in keys)
    return "the same"


def assert_same_story(own: Trace, rec: Trace, min_tool_calls: int) -> None:
    """``rec`` (the proxy's) tells ``own``'s story: agents, tree, roles, calls (messages,
    tokens, replies, dependencies, blocks) and the tool calls whose results came back (at least
    ``min_tool_calls``; generate also records those a session ended on)."""
    amap = agent_map(own, rec)  # by what each agent sent
    tmap = tree_map(own, rec, amap)  # by where it sits (the same but for first-call twins)

    # The agent tree: parents, the delegating tool call, the role.
    for aid, rid in tmap.items():
        a, r = own.agents[aid], rec.agents[rid]
        assert (tmap.get(a.parent_agent_id) if a.parent_agent_id else None) == r.parent_agent_id
        assert a.parent_tool_call_id == r.parent_tool_call_id
        expected_role = a.role if a.parent_agent_id else "agent"
        assert r.role == expected_role
        # Sessions: the agents of one generate session are the agents of one proxy session.
        roots = {tmap[x.id] for x in own.agents_of(a.session_id)}
        assert roots == {x.id for x in rec.agents_of(r.session_id)}

    # Every call, agent by agent and in order: messages, tokens, replies, dependencies (the
    # sub-agents a call carries the results of: tree places).
    for aid, rid in amap.items():
        mine = [call_facts(c, tmap) for c in own.calls_of(aid)]
        theirs = [call_facts(c) for c in rec.calls_of(rid)]
        assert mine == theirs, f"calls of {aid} differ from the proxy's {rid}: " + _differ(
            mine, theirs
        )
        for c in rec.calls_of(rid):
            assert c.request.api == "chat" and c.request.native is None
            assert c.timings.first_token_ns is not None
            assert c.timings.submit_ns <= c.timings.first_token_ns <= c.timings.last_token_ns

    # Prompt blocks: the same chained hashes.
    for aid, rid in amap.items():
        for a, b in zip(own.calls_of(aid), rec.calls_of(rid), strict=True):
            assert own.blocks(a) == rec.blocks(b)

    # Tool calls: the same ids (generate's), the model's own ids, names, arguments, children.
    # The proxy sees every call whose result came back; the last calls of a session may have
    # none (generate stops the session there), and generate records those too.
    seen = {tc.id: tc for tc in rec.tool_calls.values()}
    written = {r.id: r.arguments for c in rec.calls.values() for r in c.response.tool_calls}
    answered = 0
    for tc in own.tool_calls.values():
        if tc.raw_arguments is not None and tc.model_call_id in written:
            # a malformed call: the proxy kept what the model wrote, generate its repair
            assert written[tc.model_call_id] == tc.raw_arguments
        got = seen.get(tc.id)
        if got is None:
            continue
        answered += 1
        assert got.observed_by == "proxy"
        assert (got.name, got.arguments, got.model_call_id) == (
            tc.name,
            tc.arguments,
            tc.model_call_id,
        )
        assert got.agent_id == amap[tc.agent_id]
        assert (tmap[tc.child_agent_id] if tc.child_agent_id else None) == got.child_agent_id
        assert got.output_tokens is not None and got.output_tokens > 0
        assert got.end_ns - got.start_ns >= 0
    assert answered == len(rec.tool_calls) >= min_tool_calls
