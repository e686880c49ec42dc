"""The per-observation samples behind ``trace stats`` and ``trace stats --compare``.

``trace_samples(trace)`` returns, for one loaded trace, one list of numbers per statistic
(``STATISTICS`` names them, in table order; ``describe`` says what one sample is):

* ``output_tokens_per_call``: each call's completion tokens (server-reported, else ours).
* ``appended_tokens_per_call``: for each call with a previous call in the same agent (agents'
  calls by ``seq``), ``max(0, prompt_tokens - previous prompt_tokens)``.
* ``first_prompt_tokens_root`` / ``first_prompt_tokens_sub``: the prompt tokens of the first
  call of each root agent (no parent) / each sub-agent.
* ``last_prompt_tokens_root``: the prompt tokens of each root agent's last call (where its
  context grew to).
* ``calls_per_agent``: calls of each agent that made at least one.
* ``subagents_per_session``: agents with a parent, per session.
* ``subagent_call_share``: per session with calls, the share of its calls that agents with a
  parent made (the requests a server sees from sub-agents).
* ``gap_s``: for each pair of consecutive calls of an agent, ``next.submit - prev.end`` in
  seconds (end: last token, else first token, else submit), clamped at 0: the time the agent's
  KV cache waits.
* ``tool_latency_s.KIND``: each tool call's duration, grouped by ``tool_kind(name)``
  (sub-agent runs, ``delegate``, are not tools).
* ``tool_time_share``: per session, time when at least one tool ran (interval union) over the
  session's wall time.
* ``prefix_reuse``: per session, the token-weighted share of prompt tokens whose block was
  already seen earlier in the session (calls in submit order, chained block hashes).
  ``reuse_tokens`` keeps the sums, so a pooled, token-weighted value can be taken too.
* ``cross_session_prefix_tokens``: per root agent, the leading prompt tokens of its first call
  that the first call of another session's root agent *in the same file* also starts with (full
  blocks of the trace's block size): the tools and static system prompt a server can cache
  across users. Block ids of different files are not compared (imported ids are numbered per
  file). No sample in a one-session file.
* ``session_wall_s``: each session's wall time (session start to end, else its records' span).

Prompt tokens are ``Trace.prompt_tokens`` (server-reported when present, else ours), as in
``stats``.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass, field

from agentload.intervals import union_ns
from agentload.trace.prefix import common_blocks, seen_blocks
from agentload.trace.schema import LLMCallRecord, ToolCallRecord
from agentload.trace.trace import Trace

__all__ = [
    "STATISTICS",
    "TOOL_KINDS",
    "Samples",
    "agent_ids",
    "call_end_ns",
    "completion_tokens",
    "describe",
    "is_tool_time",
    "reuse_by_session",
    "session_spans",
    "tool_kind",
    "trace_samples",
]

_NS = 1e9

STATISTICS: tuple[str, ...] = (
    "output_tokens_per_call",
    "appended_tokens_per_call",
    "first_prompt_tokens_root",
    "first_prompt_tokens_sub",
    "last_prompt_tokens_root",
    "calls_per_agent",
    "subagents_per_session",
    "subagent_call_share",
    "gap_s",
    "tool_latency_s",
    "tool_time_share",
    "prefix_reuse",
    "cross_session_prefix_tokens",
    "session_wall_s",
)
"""The statistics in table order; ``tool_latency_s`` stands for its ``tool_latency_s.KIND``
rows (one per tool kind seen)."""

_DESCRIBE = {
    "output_tokens_per_call": "output tokens per call",
    "appended_tokens_per_call": "tokens appended per call",
    "first_prompt_tokens_root": "first prompt, root agent",
    "first_prompt_tokens_sub": "first prompt, sub-agent",
    "last_prompt_tokens_root": "prompt at the last call",
    "calls_per_agent": "calls per agent",
    "subagents_per_session": "sub-agents per session",
    "subagent_call_share": "share of calls made by sub-agents",
    "gap_s": "gap between an agent's calls (s)",
    "tool_latency_s": "tool latency (s)",
    "tool_time_share": "share of session time in tools",
    "prefix_reuse": "prefix reuse (token-weighted)",
    "cross_session_prefix_tokens": "prefix shared across sessions",
    "session_wall_s": "session wall time (s)",
}

TOOL_KINDS: dict[str, tuple[str, ...]] = {
    "read": ("read_file", "read", "view", "cat", "open_file", "notebookread", "read_many_files"),
    "search": (
        "search_code",
        "list_files",
        "grep",
        "glob",
        "ls",
        "find",
        "search",
        "codebase_search",
        "file_search",
        "list_dir",
    ),
    "exec": (
        "run_tests",
        "bash",
        "shell",
        "exec",
        "exec_command",
        "local_shell",
        "run_terminal_cmd",
        "terminal",
        "python",
        "bashoutput",
    ),
    "edit": (
        "edit_file",
        "edit",
        "multiedit",
        "write",
        "write_file",
        "apply_patch",
        "str_replace",
        "str_replace_editor",
        "create_file",
        "notebookedit",
    ),
    "web": ("webfetch", "websearch", "web_search", "fetch", "browser"),
}
"""Tool names (lower case) by kind: agentload's own tools, and the names Claude Code, Codex and
common agent frameworks give theirs. Anything else is ``other``."""

_KIND_OF = {name: kind for kind, names in TOOL_KINDS.items() for name in names}


def tool_kind(name: str) -> str:
    """The kind of a tool (``TOOL_KINDS``), by its name without case and MCP-style prefixes
    (``mcp__server__read_file`` is ``read``); ``other`` when unknown."""
    n = name.lower().rsplit("__", 1)[-1]
    return _KIND_OF.get(n, "other")


def describe(stat: str) -> str:
    """The human name of a statistic (``tool_latency_s.read`` -> ``tool latency (s): read``)."""
    base, _, kind = stat.partition(".")
    text = _DESCRIBE.get(base, base)
    return f"{text}: {kind}" if kind else text


def completion_tokens(call: LLMCallRecord) -> int:
    """Server-reported completion tokens when present, else ours, else 0."""
    u = call.usage
    if u.completion_tokens is not None:
        return u.completion_tokens
    return u.completion_tokens_ours or 0


def call_end_ns(call: LLMCallRecord) -> int:
    """When the call's answer ended: its last token, else its first, else its submit."""
    return call.timings.end_ns


def is_tool_time(tc: ToolCallRecord) -> bool:
    """Whether a tool call is tool time (a sub-agent's run, ``delegate``, is LLM time)."""
    return tc.child_agent_id is None and tc.name != "delegate"


def session_spans(trace: Trace) -> dict[str, tuple[int, int]]:
    """(start_ns, end_ns) per session, filled from its records where the session lacks them."""
    lo: dict[str, int] = {}
    hi: dict[str, int] = {}

    def see(sid: str, *ts: int | None) -> None:
        for t in ts:
            if t is None:
                continue
            lo[sid] = min(lo.get(sid, t), t)
            hi[sid] = max(hi.get(sid, t), t)

    for a in trace.agents.values():
        see(a.session_id, a.start_ns, a.end_ns)
    for c in trace.calls.values():
        see(c.session_id, c.timings.submit_ns, call_end_ns(c))
    for tc in trace.tool_calls.values():
        see(tc.session_id, tc.start_ns, tc.end_ns)
    for rec in trace.sessions.values():
        see(rec.id, rec.start_ns, rec.end_ns)
    spans = {}
    for sid in lo:
        sess = trace.sessions.get(sid)
        start = sess.start_ns if sess is not None else lo[sid]
        end = sess.end_ns if sess is not None and sess.end_ns is not None else hi[sid]
        spans[sid] = (start, max(start, end))
    return spans


def _add(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    return a[0] + b[0], a[1] + b[1]


@dataclass
class Samples:
    """One list of samples per statistic (module docstring), plus the token sums of prefix
    reuse (``reuse_tokens``: seen, total) for its pooled, token-weighted value."""

    values: dict[str, list[float]] = field(default_factory=dict)
    reuse_tokens: tuple[int, int] = (0, 0)
    tool_time_ns: tuple[int, int] = (0, 0)
    """Σ over sessions of (time with a tool running, wall time): the pooled tool-time share."""

    def extend(self, other: Samples) -> None:
        """Pool ``other``'s samples into these."""
        for k, v in other.values.items():
            self.values.setdefault(k, []).extend(v)
        self.reuse_tokens = _add(self.reuse_tokens, other.reuse_tokens)
        self.tool_time_ns = _add(self.tool_time_ns, other.tool_time_ns)

    def get(self, stat: str) -> list[float]:
        return self.values.get(stat, [])


def agent_ids(trace: Trace) -> list[str]:
    """Every agent of the trace, by start time, then agents known only from their calls."""
    return list(
        dict.fromkeys(
            [a.id for a in sorted(trace.agents.values(), key=lambda a: a.start_ns)]
            + sorted({c.agent_id for c in trace.calls.values()})
        )
    )


def _is_root(trace: Trace, aid: str) -> bool:
    a = trace.agents.get(aid)
    return a is None or a.parent_agent_id is None


def reuse_by_session(trace: Trace, block: int | None = None) -> dict[str, tuple[int, int]]:
    """Per session (seen, total): its prompt tokens whose block it had already sent earlier
    (calls in submit order, chained block hashes), and all its prompt tokens. ``block``: count
    in blocks of that many tokens, when the trace's block size divides it (each group of
    chained hashes is one block: only whole ones count), else at the trace's own size."""
    bs = trace.header.block_size
    f = block // bs if block is not None and block % bs == 0 else 1
    by_session: dict[str, list[LLMCallRecord]] = defaultdict(list)
    for c in trace.calls.values():
        by_session[c.session_id].append(c)
    out: dict[str, tuple[int, int]] = {}
    for sid, calls in by_session.items():
        seen: set[str] = set()
        seen_tokens = total = 0
        for c in sorted(calls, key=lambda c: (c.timings.submit_ns, c.seq)):
            blocks = trace.blocks(c)
            if f > 1:
                blocks = blocks[f - 1 :: f]  # chained: the last hash of a group is the group
            lo = seen_blocks(blocks, seen)
            seen_tokens += bs * f * lo
            seen.update(blocks[lo:])
            total += c.usage.prompt_tokens_ours
        out[sid] = (seen_tokens, total)
    return out


def _reuse(trace: Trace) -> tuple[list[float], int, int]:
    """Per session the share of prompt tokens already seen in it, and the pooled sums."""
    sums = reuse_by_session(trace).values()
    shares = [seen / total for seen, total in sums if total]
    return shares, sum(s for s, _ in sums), sum(t for _, t in sums)


def _cross_session(trace: Trace, roots: list[str]) -> list[float]:
    """Per root agent: leading tokens of its first prompt another session's root shares."""
    firsts: list[tuple[str, list[str]]] = []
    for aid in roots:
        calls = trace.calls_of(aid)
        if calls:
            firsts.append((calls[0].session_id, trace.blocks(calls[0])))
    bs = trace.header.block_size
    out: list[float] = []
    for i, (sid, blocks) in enumerate(firsts):
        others = [b for j, (s, b) in enumerate(firsts) if j != i and s != sid]
        if others:
            out.append(float(bs * max(common_blocks(blocks, b) for b in others)))
    return out


def trace_samples(trace: Trace) -> Samples:
    """The samples of one trace (module docstring)."""
    v: dict[str, list[float]] = defaultdict(list)
    ids = agent_ids(trace)
    roots = [aid for aid in ids if _is_root(trace, aid)]
    calls_by_session: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # all, sub-agents'
    for aid in ids:
        calls = trace.calls_of(aid)
        if not calls:
            continue
        v["calls_per_agent"].append(float(len(calls)))
        root = _is_root(trace, aid)
        for c in calls:
            counts = calls_by_session[c.session_id]
            counts[0] += 1
            counts[1] += not root
        first = float(trace.prompt_tokens(calls[0]))
        if root:
            v["first_prompt_tokens_root"].append(first)
            v["last_prompt_tokens_root"].append(float(trace.prompt_tokens(calls[-1])))
        else:
            v["first_prompt_tokens_sub"].append(first)
        for prev, cur in itertools.pairwise(calls):
            v["gap_s"].append(max(0, cur.timings.submit_ns - call_end_ns(prev)) / _NS)
            v["appended_tokens_per_call"].append(
                float(max(0, trace.prompt_tokens(cur) - trace.prompt_tokens(prev)))
            )
    v["output_tokens_per_call"] = [float(completion_tokens(c)) for c in trace.calls.values()]

    spans = session_spans(trace)
    subs: dict[str, int] = dict.fromkeys(spans, 0)
    for a in trace.agents.values():
        if a.parent_agent_id is not None:
            subs[a.session_id] = subs.get(a.session_id, 0) + 1
    v["subagents_per_session"] = [float(n) for n in subs.values()]
    v["subagent_call_share"] = [sub / n for n, sub in calls_by_session.values()]

    busy_by_session: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for tc in trace.tool_calls.values():
        if is_tool_time(tc):
            v[f"tool_latency_s.{tool_kind(tc.name)}"].append(max(0, tc.end_ns - tc.start_ns) / _NS)
            busy_by_session[tc.session_id].append((tc.start_ns, max(tc.start_ns, tc.end_ns)))
    busy_ns = wall_ns = 0
    for sid, (start, end) in spans.items():
        v["session_wall_s"].append((end - start) / _NS)
        busy = union_ns(busy_by_session.get(sid, []))
        busy_ns += busy
        wall_ns += end - start
        if end > start:
            v["tool_time_share"].append(busy / (end - start))

    shares, seen, total = _reuse(trace)
    v["prefix_reuse"] = shares
    v["cross_session_prefix_tokens"] = _cross_session(trace, roots)
    return Samples(values=dict(v), reuse_tokens=(seen, total), tool_time_ns=(busy_ns, wall_ns))
