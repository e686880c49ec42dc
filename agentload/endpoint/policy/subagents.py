"""The sub-agents' policy: code_search, file_reader and test_runner (see ``agent_policy``).

Each plans a few tool-calling turns (``PolicyConfig.subagent_turns``), summarising by its
kind's ``subagent_max_turns`` call at the latest.
"""

from __future__ import annotations

import re
from typing import Any

from agentload import contract
from agentload.endpoint.policy.facts import extract, ticked
from agentload.endpoint.policy.reading import (
    Call,
    Ctx,
    continuations,
    first_sentence,
    is_used,
    known_def,
    listed_paths,
    note_call,
    prose_for,
    task_idents,
    unread_locations,
    window_args,
)
from agentload.endpoint.policy.types import Decision

__all__ = ["subagent", "summary_reply"]

# A sub-agent's notes between tool calls: the orchestrator's distribution, kept under a
# sub-agent's default ``max_tokens`` (2048) with room for the calls themselves.
_REASONING_MAX = 1500

_DOTTED_TEST = re.compile(r"^(?:[\w]+\.)*test\w*(?:\.\w+)*$")


def summary_reply(ctx: Ctx) -> Decision:
    prose = prose_for(ctx)
    n = ctx.policy.config.summary_tokens.sample(ctx.rng)
    title = {
        contract.CODE_SEARCH: "Search results",
        contract.FILE_READER: "File summary",
        contract.TEST_RUNNER: "Test results",
    }.get(ctx.conv.role or "", "Summary")
    return Decision(
        prose.report(f"{title}: {first_sentence(ctx.task)[:80]}", n),
        [],
        prose.reasoning,
        "summary",
    )


def _code_search(ctx: Ctx) -> list[Call]:
    cfg, rng = ctx.policy.config, ctx.rng
    before, after = cfg.read_window
    calls: list[Call] = []
    if contract.READ_FILE in ctx.offered:
        for loc in unread_locations(ctx, ctx.last, ("hit",))[: rng.randint(1, 2)]:
            args = window_args(ctx, loc, before // 2, after // 2)
            calls.append((contract.READ_FILE, args))
            note_call(ctx, contract.READ_FILE, args)
    if calls or contract.SEARCH_CODE not in ctx.offered:
        return calls
    pool = [i for i in task_idents(ctx.task) if not is_used(ctx, i)]
    pool += [i for i in ctx.facts.defs if not is_used(ctx, i)]
    for ident in list(dict.fromkeys(pool))[: 2 if ctx.conv.turns == 0 else 1]:
        pat = rf"(def|class) {ident}\b" if known_def(ctx, ident) and rng.random() < 0.4 else ident
        calls.append(
            (contract.SEARCH_CODE, {"pattern": pat, "max_results": cfg.search_max_results})
        )
        ctx.searched.add(pat)
    if not calls:
        for loc in unread_locations(ctx, ctx.facts, ("hit",))[:1]:
            calls.append((contract.READ_FILE, window_args(ctx, loc, before // 2, after // 2)))
    if not calls and contract.READ_FILE in ctx.offered:
        # Nothing new to search: read on past a hit, where its callers and helpers follow.
        conts = continuations(ctx, before + after)
        calls = [(contract.READ_FILE, conts[0])] if conts else []
    return calls


def _file_reader(ctx: Ctx) -> list[Call]:
    cfg, rng = ctx.policy.config, ctx.rng
    span = sum(cfg.read_window) * 2
    task_paths = [p for p in extract(ctx.task).paths if p not in ctx.read]
    # Paths a tool output listed or located, or with a directory part; a bare name quoted inside
    # a file's text (test data, docstrings: ``foo.py``) is not worth a read.
    listed = {loc.path for loc in ctx.facts.locations} | set(listed_paths(ctx))
    found = [
        p
        for p in ctx.facts.paths
        if p not in ctx.read and p not in task_paths and (p in listed or "/" in p)
    ]
    calls: list[Call] = []
    for p in (task_paths or found[:3])[: rng.randint(1, 2)]:
        args: dict[str, Any] = {"path": p}
        if rng.random() >= cfg.subagent_whole_file_prob:
            args.update(start_line=1, end_line=span)
        calls.append((contract.READ_FILE, args))
        note_call(ctx, contract.READ_FILE, args)
    if calls:
        return calls
    conts = continuations(ctx, span)
    if conts:
        return [(contract.READ_FILE, conts[0])]
    if contract.LIST_FILES not in ctx.offered:
        return []
    if ctx.conv.turns == 0:
        dirs = [t.rstrip("/") for t in ticked(ctx.task) if "/" in t or t.endswith("/")]
        return [(contract.LIST_FILES, {"path": dirs[0]} if dirs else {})]
    # The named files are read: look at their neighbours (once), as a reader follows a module
    # into the package around it; the listing's paths are then read in the turns left.
    if not any(name == contract.LIST_FILES for name, _ in ctx.conv.calls()):
        dirs = [p.rsplit("/", 1)[0] for p in ctx.read if "/" in p]
        if dirs:
            return [(contract.LIST_FILES, {"path": dirs[0]})]
    return []


def _test_target(ctx: Ctx) -> str | None:
    for t in ticked(ctx.task):
        if _DOTTED_TEST.match(t) or (t.endswith(".py") and "test" in t):
            return t
    return None


def _test_runner(ctx: Ctx) -> list[Call]:
    cfg, rng = ctx.policy.config, ctx.rng
    if not ctx.ran_targets and contract.RUN_TESTS in ctx.offered:
        target = _test_target(ctx)
        return [(contract.RUN_TESTS, {"target": target} if target else {})]
    calls: list[Call] = []
    if contract.READ_FILE in ctx.offered:
        # Traceback frames innermost first, then pytest's ``path:line:`` report lines.
        frames = list(reversed(unread_locations(ctx, ctx.facts, ("trace",))))
        frames += unread_locations(ctx, ctx.facts, ("hit",))
        seen: set[str] = set()
        for loc in frames:
            if loc.path in seen:
                continue
            seen.add(loc.path)
            args = window_args(ctx, loc, 15, 25)
            calls.append((contract.READ_FILE, args))
            note_call(ctx, contract.READ_FILE, args)
            if len(calls) >= rng.randint(1, 2):
                break
    if calls:
        return calls
    failed = [t for t in ctx.facts.failed_tests if t not in ctx.ran_targets]
    if failed and contract.RUN_TESTS in ctx.offered and rng.random() < 0.5:
        return [(contract.RUN_TESTS, {"target": failed[0]})]
    if contract.SEARCH_CODE in ctx.offered:
        names = [t.rsplit(".", 1)[-1] for t in ctx.facts.failed_tests]
        names = [n for n in names if not is_used(ctx, n)]
        if names:
            return [
                (contract.SEARCH_CODE, {"pattern": names[0], "max_results": cfg.search_max_results})
            ]
    return []


_SUB = {
    contract.CODE_SEARCH: _code_search,
    contract.FILE_READER: _file_reader,
    contract.TEST_RUNNER: _test_runner,
}


def subagent(ctx: Ctx) -> Decision:
    conv, cfg = ctx.conv, ctx.policy.config
    max_turns = cfg.subagent_max_turns.get(conv.role or "", 6)
    if cfg.subagent_calls is not None:  # calls, its summary included: tool turns are one fewer
        planned = cfg.subagent_calls.sample(conv.stable_rng) - 1
    else:
        lo, hi = cfg.subagent_turns
        planned = conv.stable_rng.randint(lo, hi)
    planned = max(0, min(max_turns - 1, planned))
    if conv.turns >= planned:
        return summary_reply(ctx)
    calls = _SUB[conv.role or contract.CODE_SEARCH](ctx)
    if not calls:
        return summary_reply(ctx)
    prose = prose_for(ctx)
    n = min(cfg.reasoning_tokens.sample(ctx.rng), _REASONING_MAX)
    return Decision(prose.reasoning(n), calls, prose.reasoning, "tool")
