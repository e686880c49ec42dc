"""Human views of a trace for ``agentload trace inspect`` and ``trace stats`` (rich).

* ``render_overview``: header facts and the agent tree of every session.
* ``render_agent``: one agent's calls: prompt tokens (ours / server / cached), tokens appended
  since the previous call, output tokens, the gap before the call, TTFT and E2E, tool calls.
* ``render_call``: one call in full: every request message (role, tokens, a one-line preview
  of its content, resolved from its blob), the response, and the tool calls it led to.
* ``render_stats``: the stats object as tables.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import orjson
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from agentload.errors import AgentloadError, ConfigError
from agentload.trace.samples import call_end_ns
from agentload.trace.schema import AgentRecord, LLMCallRecord, ToolCallRecord
from agentload.trace.stats import completion_tokens
from agentload.trace.trace import Trace

__all__ = ["render_agent", "render_call", "render_overview", "render_stats", "resolve_agent"]

_NS = 1e9
_MAX_AGENT_ROWS = 40


def _e(value: Any) -> str:
    """Trace content as literal text: never read as rich markup (``[bold]``, ``[/x]``)."""
    return escape(str(value))


def _one_line(text: Any, width: int = 110) -> str:
    """Whitespace collapsed, cut to ``width``, markup-escaped."""
    if isinstance(text, str):
        s = text
    elif text is None:
        s = ""
    else:
        s = orjson.dumps(text, default=str).decode()
    s = " ".join(s.split())
    return _e(s if len(s) <= width else s[: width - 1] + "…")


def _secs(ns: int | None) -> str:
    return "" if ns is None else f"{ns / _NS:.3f}"


def _roots(trace: Trace) -> list[AgentRecord]:
    return sorted(
        (a for a in trace.agents.values() if a.parent_agent_id is None),
        key=lambda a: a.start_ns,
    )


def resolve_agent(trace: Trace, agent_id: str | None) -> str:
    """The agent to show: ``agent_id`` (an exact id or a unique prefix), else the first root."""
    known = list(dict.fromkeys([*trace.agents, *(c.agent_id for c in trace.calls.values())]))
    if agent_id is None:
        roots = _roots(trace)
        if roots:
            return roots[0].id
        if known:
            return known[0]
        raise ConfigError(f"{trace.path}: the trace has no agents")
    if agent_id in known:
        return agent_id
    matches = [a for a in known if a.startswith(agent_id)]
    if len(matches) == 1:
        return matches[0]
    shown = ", ".join(known[:8]) + (" ..." if len(known) > 8 else "")
    raise ConfigError(f"{trace.path}: no agent {agent_id!r} (agents: {shown})")


def render_overview(trace: Trace, console: Console) -> None:
    """Header facts, then each session's agent tree."""
    h = trace.header
    console.print(
        f"[bold]{_e(trace.path)}[/]  schema {_e(h.schema_)}  agentload {_e(h.tool_version)}  "
        f"created {_e(h.created_at)}"
    )
    console.print(
        f"model {_e(h.model or '-')}  endpoint {_e(h.endpoint or '-')}  "
        f"scenario {_e(h.scenario or '-')}  tokenizer {_e(h.tokenizer)}  "
        f"seed {h.seed if h.seed is not None else '-'}"
    )
    if trace.truncated:
        console.print(f"[yellow]{_e(trace.truncated)}[/]")
    children: dict[str | None, list[AgentRecord]] = defaultdict(list)
    for a in sorted(trace.agents.values(), key=lambda a: a.start_ns):
        children[a.parent_agent_id].append(a)
    session_ids = list(
        dict.fromkeys([*trace.sessions, *(a.session_id for a in trace.agents.values())])
    )
    for sid in session_ids:
        s = trace.sessions.get(sid)
        label = f"[bold]session {_e(sid)}[/]"
        if s is not None:
            wall = (s.end_ns - s.start_ns) / _NS if s.end_ns is not None else None
            label += f"  wall {wall:.1f}s" if wall is not None else "  (no end)"
            if s.end_reason:
                label += f"  end: {_e(s.end_reason)}"
        tree = Tree(label)

        def add(node: Tree, agent: AgentRecord) -> None:
            calls = trace.calls_of(agent.id)
            tokens = (
                f"{trace.prompt_tokens(calls[0])}→{trace.prompt_tokens(calls[-1])} prompt tokens"
                if calls
                else "no calls"
            )
            sub = node.add(
                f"[cyan]{_e(agent.role)}[/] {_e(agent.id)}  {len(calls)} calls  {tokens}"
            )
            for child in children.get(agent.id, []):
                add(sub, child)

        for root in (a for a in children.get(None, []) if a.session_id == sid):
            add(tree, root)
        console.print(tree)


def _tools_of(trace: Trace) -> dict[str, list[ToolCallRecord]]:
    by_call: dict[str, list[ToolCallRecord]] = defaultdict(list)
    for tc in sorted(trace.tool_calls.values(), key=lambda t: t.start_ns):
        by_call[tc.llm_call_id].append(tc)
    return by_call


def render_agent(trace: Trace, agent_id: str, console: Console) -> None:
    """One agent's calls as a table."""
    a = trace.agents.get(agent_id)
    calls = trace.calls_of(agent_id)
    title = f"{_e(a.role if a else 'agent')} {_e(agent_id)}: {len(calls)} calls"
    if a and a.parent_agent_id:
        title += f" (child of {_e(a.parent_agent_id)} via {_e(a.parent_tool_call_id or '?')})"
    table = Table(title=title, title_justify="left")
    for col in ("seq", "gap s", "prompt", "server", "cached", "+new", "out", "ttft s", "e2e s"):
        table.add_column(col, justify="right")
    table.add_column("finish")
    table.add_column("tool calls")
    tools = _tools_of(trace)
    prev: LLMCallRecord | None = None
    for c in calls:
        t = c.timings
        u = c.usage
        gap = c.timings.submit_ns - call_end_ns(prev) if prev is not None else None
        new = trace.prompt_tokens(c) - trace.prompt_tokens(prev) if prev is not None else None
        names = [tc.name for tc in c.response.tool_calls]
        done = {tc.id: tc for tc in tools.get(c.id, [])}
        shown = ", ".join(
            n
            + (f" ({(done[r.id].end_ns - done[r.id].start_ns) / _NS:.2f}s)" if r.id in done else "")
            for n, r in zip(names, c.response.tool_calls, strict=True)
        )
        table.add_row(
            str(c.seq),
            _secs(gap),
            str(u.prompt_tokens_ours),
            "" if u.prompt_tokens is None else str(u.prompt_tokens),
            "" if u.cached_tokens is None else str(u.cached_tokens),
            "" if new is None else str(new),
            str(completion_tokens(c)),
            _secs(t.first_token_ns - t.submit_ns if t.first_token_ns else None),
            _secs(t.last_token_ns - t.submit_ns if t.last_token_ns else None),
            _e(c.response.finish_reason or "") + (" [red]error[/]" if c.error else ""),
            _one_line(shown, 60),
        )
        prev = c
    console.print(table)


def _message_tokens(trace: Trace, blob_id: str, counter: Any) -> str:
    blob = trace.blobs.get(blob_id)
    if blob is None:
        return "?"
    if blob.tokens is not None:
        return str(blob.tokens)
    if counter is None or not isinstance(blob.content, dict):
        return "?"
    return str(len(counter.ids_for_message(blob.content, blob_id)))


def _message_text(msg: Any) -> str:
    if not isinstance(msg, dict):
        return _one_line(msg)
    parts = []
    if msg.get("tool_call_id"):
        parts.append(f"({msg['tool_call_id']})")
    content = msg.get("content")
    if isinstance(content, list):
        content = " ".join(
            str(p.get("text", p)) if isinstance(p, dict) else str(p) for p in content
        )
    if content:
        parts.append(str(content))
    for tc in msg.get("tool_calls") or ():
        fn = tc.get("function", {}) if isinstance(tc, dict) else {}
        parts.append(f"→ {fn.get('name')}({fn.get('arguments')})")
    return _one_line(" ".join(parts))


def render_call(trace: Trace, call: LLMCallRecord, console: Console) -> None:
    """One call in full: request messages (resolved), response, resulting tool calls."""
    counter = _counter(trace)
    _print_call_facts(call, console)
    console.print(_messages_table(trace, call, counter))
    reply = trace.blobs.get(call.response.content) if call.response.content else None
    console.print(
        f"[bold]response[/] finish={_e(call.response.finish_reason)}  "
        f"{_message_text(reply.content) if reply else '(empty)'}"
    )
    tools_done = _tools_of(trace).get(call.id, [])
    if tools_done:
        console.print(_tool_calls_table(tools_done))


def _counter(trace: Trace) -> Any:
    """The trace's tokenizer, to count messages stored without a count; None if not here."""
    try:
        from agentload.tokenizer import ChatTokenCounter

        return ChatTokenCounter(trace.header.tokenizer)
    except AgentloadError:
        return None  # an hf: tokenizer that is not installed here: counts stay "?"


def _print_call_facts(call: LLMCallRecord, console: Console) -> None:
    """The call's id, parameters, token counts, dependencies and error, if any."""
    r = call.request
    u = call.usage
    console.print(
        f"[bold]call {_e(call.id)}[/]  agent {_e(call.agent_id)}  seq {call.seq}  "
        f"model {_e(r.model)}  max_tokens {r.max_tokens}  temperature {r.temperature}  "
        f"stream {r.stream}"
    )
    console.print(
        f"prompt tokens: ours {u.prompt_tokens_ours}  server {u.prompt_tokens}  "
        f"cached {u.cached_tokens}   completion: ours {u.completion_tokens_ours}  "
        f"server {u.completion_tokens}   depends on: {_e(', '.join(call.depends_on) or '-')}"
    )
    if call.error:
        console.print(f"[red]error: {_one_line(call.error, 300)}[/]")


def _messages_table(trace: Trace, call: LLMCallRecord, counter: Any) -> Table:
    """The call's tools list and request messages: role, tokens, a one-line preview."""
    table = Table(title="request messages", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("tokens", justify="right")
    table.add_column("content")
    if call.request.tools:
        tools = trace.tools(call) or []
        names = ", ".join(str(t.get("function", {}).get("name", "?")) for t in tools)
        table.add_row(
            "", "tools", _message_tokens(trace, call.request.tools, None), _one_line(names)
        )
    for i, (bid, msg) in enumerate(zip(call.messages, trace.messages(call), strict=True)):
        role = msg.get("role", "?") if isinstance(msg, dict) else "?"
        table.add_row(str(i), _e(role), _message_tokens(trace, bid, counter), _message_text(msg))
    return table


def _tool_calls_table(tools_done: list[ToolCallRecord]) -> Table:
    """The tool calls a call led to: time, exit code, output size, flags, arguments."""
    tt = Table(title="tool calls", title_justify="left")
    for col in ("id", "name", "secs", "exit", "bytes", "tokens", "flags", "arguments"):
        tt.add_column(col)
    for tc in tools_done:
        flags = " ".join(
            f
            for f, on in (
                ("timed_out", tc.timed_out),
                ("truncated", tc.truncated),
                (f"child={tc.child_agent_id}", tc.child_agent_id is not None),
                (f"error={tc.error}", tc.error is not None),
            )
            if on
        )
        tt.add_row(
            _e(tc.id),
            _e(tc.name),
            f"{(tc.end_ns - tc.start_ns) / _NS:.3f}",
            "" if tc.exit_code is None else str(tc.exit_code),
            str(tc.output_bytes),
            "" if tc.output_tokens is None else str(tc.output_tokens),
            _one_line(flags, 40),
            _one_line(tc.arguments, 60),
        )
    return tt


def render_stats(stats: dict[str, Any], console: Console) -> None:
    """The stats object as rich tables."""
    console.print(_summary_table(stats))
    console.print(_roles_table(stats))
    shown = stats["agents"][:_MAX_AGENT_ROWS]
    console.print(_agents_table(shown))
    if len(stats["agents"]) > len(shown):
        console.print(f"... {len(stats['agents']) - len(shown)} more agents (all of them: --json)")
    if stats["tool_calls_by_name"]:
        console.print(_tools_table(stats["tool_calls_by_name"]))


def _fmt(v: Any) -> str:
    """A statistic as shown: ``-`` for none, a float to three decimals."""
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _summary_table(stats: dict[str, Any]) -> Table:
    """The whole-trace numbers, and where an imported trace came from."""
    summary = Table(title="trace summary", title_justify="left", show_header=False)
    summary.add_column("metric")
    summary.add_column("value", justify="right")
    for key in ("sessions", "llm_calls", "wall_s", "prefix_reuse_ceiling", "tool_time_share"):
        summary.add_row(key, _fmt(stats[key]))
    for key in ("gaps_s", "output_tokens_per_call", "appended_tokens_per_call"):
        summary.add_row(key, "  ".join(f"{k} {_fmt(v)}" for k, v in stats[key].items()))
    for key in ("side_calls", "unread_requests", "embedding_requests"):
        if stats.get(key):
            summary.add_row(key, _fmt(stats[key]))
    summary.add_row("prompt_tokens_total", _fmt(stats.get("prompt_tokens_total")))
    summary.add_row("cached_tokens_total", _fmt(stats.get("cached_tokens_total")))
    summary.add_row("prompt tokens server/ours", _fmt(stats.get("prompt_tokens_server_per_ours")))
    if stats.get("token_calibration") is not None:
        summary.add_row("token calibration server/ours", _fmt(stats["token_calibration"]))
    if stats.get("truncated"):
        summary.add_row("truncated", _e(stats["truncated"]))
    src = stats.get("source")
    if src:
        summary.add_row("imported from", _e(f"{src['format']} ({src['files']:,} files)"))
        for what, how in src["derived"].items():
            summary.add_row(f"derived: {_e(what)}", _e(how))
        for kind, n in src["deviations"].items():
            summary.add_row("accepted", _e(f"{kind} ×{n:,}"))
    return summary


def _roles_table(stats: dict[str, Any]) -> Table:
    """Agents, calls and tokens per role."""
    roles = Table(title="roles", title_justify="left")
    for col in ("role", "agents", "calls", "max prompt tokens", "completion tokens"):
        roles.add_column(col, justify="left" if col == "role" else "right")
    for role, d in stats.get("roles", {}).items():
        roles.add_row(
            _e(role),
            str(d["agents"]),
            str(d["calls"]),
            str(d["prompt_tokens_max"]),
            str(d["completion_tokens_total"]),
        )
    return roles


def _agents_table(shown: list[dict[str, Any]]) -> Table:
    """One row per agent shown: its parent, calls, first and last prompt, tool calls."""
    agents = Table(title="agents", title_justify="left")
    for col in (
        "id",
        "role",
        "parent",
        "calls",
        "prompt first",
        "prompt last",
        "completion",
        "tools",
    ):
        agents.add_column(col, justify="left" if col in ("id", "role", "parent") else "right")
    for a in shown:
        agents.add_row(
            _e(a["id"]),
            _e(a["role"]),
            _e(a["parent"] or ""),
            str(a["calls"]),
            _fmt(a["prompt_tokens_first"]),
            _fmt(a["prompt_tokens_last"]),
            str(a["completion_tokens_total"]),
            str(a["tool_calls"]),
        )
    return agents


def _tools_table(by_name: dict[str, Any]) -> Table:
    """Tool calls per tool name: count, p50 and p90 duration."""
    tools = Table(title="tool calls by name", title_justify="left")
    for col in ("name", "count", "p50 s", "p90 s"):
        tools.add_column(col, justify="left" if col == "name" else "right")
    for name, d in by_name.items():
        tools.add_row(_e(name), str(d["count"]), _fmt(d["p50_s"]), _fmt(d["p90_s"]))
    return tools
