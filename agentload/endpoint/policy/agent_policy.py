"""The policy for agentload's own agents: a competent coding agent that reads its tool outputs.

* **orchestrator** — plans (its first working call hands ``first_round_delegations`` sub-tasks
  out in parallel), then each round either delegates (1–3 parallel ``delegate`` calls
  to code_search / file_reader / test_runner) or uses direct tools: ``read_file`` at the
  locations that searches, tracebacks and summaries reported (a window around the line, or the
  whole file), ``search_code`` for identifiers from the task and the results, ``run_tests``,
  ``list_files``. It answers without tool calls once the request's prompt tokens reach its
  ``PolicyConfig.context_target`` or its rounds reach ``max_rounds`` (its own pacing: the
  request carries no limit), and at the last call of a user turn (``turn_calls``: a turn's
  length drawn per turn; the user's next follow-up opens the next).
* **code_search** — searches identifiers from its task, reads the code at the real hits, follows
  definitions it finds there, then summarises.
* **file_reader** — reads the files its task names (or lists a directory and reads from it),
  continues long files window by window, then summarises.
* **test_runner** — runs the tests (narrowed when the task names a target), reads the code at
  the ``file:line`` frames of the real failure output, innermost first, then summarises.

Every path in a tool call comes from text the conversation contains (system prompt, task,
tool outputs, summaries); nothing is invented.
"""

from __future__ import annotations

import re
from typing import Any

from agentload.contract import (
    CODE_SEARCH,
    DELEGATE,
    EDIT_FILE,
    FILE_READER,
    LIST_FILES,
    ORCHESTRATOR,
    READ_FILE,
    RUN_TESTS,
    SEARCH_CODE,
    TEST_RUNNER,
)
from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.oracle import oracle_calls, oracle_done
from agentload.endpoint.policy.reading import (
    READ_HEAD,
    Call,
    Ctx,
    build_context,
    continuations,
    first_sentence,
    fresh_idents,
    known_def,
    note_call,
    prose_for,
    unread_locations,
    unread_paths,
    window_args,
)
from agentload.endpoint.policy.subagents import subagent, summary_reply
from agentload.endpoint.policy.types import Conversation, Decision

__all__ = ["decide_agent"]


# -- orchestrator ------------------------------------------------------------------------------
def _orch_read(ctx: Ctx) -> dict[str, Any] | None:
    cfg = ctx.policy.config
    before, after = cfg.read_window
    locs = unread_locations(ctx, ctx.last, ("trace", "hit")) or unread_locations(
        ctx, ctx.facts, ("trace", "hit")
    )
    if locs and ctx.rng.random() < 0.85:
        loc = locs[0] if ctx.rng.random() < 0.6 else ctx.rng.choice(locs[:8])
        if ctx.rng.random() < cfg.whole_file_prob:
            return {"path": loc.path}
        return window_args(ctx, loc, before, after)
    paths = unread_paths(ctx)
    if paths:
        p = paths[0] if ctx.rng.random() < 0.5 else ctx.rng.choice(paths[:10])
        if ctx.rng.random() < cfg.whole_file_prob * 2:
            return {"path": p}
        return {"path": p, "start_line": 1, "end_line": before + after}
    conts = continuations(ctx, before + after)
    return ctx.rng.choice(conts) if conts else None


def _orch_search(ctx: Ctx) -> dict[str, Any] | None:
    idents = fresh_idents(ctx)
    if not idents:
        return None
    ident = idents[0] if ctx.rng.random() < 0.5 else ctx.rng.choice(idents[:12])
    pat = rf"(def|class) {ident}\b" if known_def(ctx, ident) and ctx.rng.random() < 0.4 else ident
    return {"pattern": pat, "max_results": ctx.policy.config.search_max_results}


def delegation(ctx: Ctx, kind: str, taken: set[str]) -> dict[str, Any] | None:
    goal = first_sentence(ctx.task)
    if kind == CODE_SEARCH:
        idents = [i for i in fresh_idents(ctx) if i not in taken]
        if not idents:
            return None
        k = 1 + (ctx.rng.random() < 0.5 and len(idents) > 1)
        pick = (
            idents[:k]
            if ctx.rng.random() < 0.5
            else ctx.rng.sample(idents[:10], min(k, len(idents[:10])))
        )
        taken.update(pick)
        names = " and ".join(f"`{i}`" for i in pick)
        return {
            "kind": kind,
            "task": f"Find where {names} are defined and every place that "
            f"calls them. Report file:line locations and what each place does. Context: {goal}",
        }
    if kind == FILE_READER:
        paths = [p for p in unread_paths(ctx) if p not in taken and f"`{p}`" not in ctx.said]
        if not paths:
            return None
        pick = paths[: ctx.rng.randint(1, 3)]
        taken.update(pick)
        focus = fresh_idents(ctx)[:1]
        extra = f" Pay attention to `{focus[0]}`." if focus else ""
        return {
            "kind": kind,
            "task": "Read "
            + ", ".join(f"`{p}`" for p in pick)
            + f" and summarise what matters for this task: {goal}{extra}",
        }
    target = ""
    if ctx.facts.failed_tests and ctx.rng.random() < 0.6:
        target = ctx.rng.choice(ctx.facts.failed_tests)
    where = f" in `{target}`" if target else ""
    return {
        "kind": kind,
        "task": f"Run the tests{where} and report each failure: the test id, "
        "the assertion message and the file:line frames of the traceback inside the "
        "repository, with the code at those lines.",
    }


def _orchestrator(ctx: Ctx) -> Decision:
    conv, cfg, rng = ctx.conv, ctx.policy.config, ctx.rng
    if conv.prompt_tokens >= cfg.context_target or conv.turns >= cfg.max_rounds:
        return final_answer(ctx)
    if _turn_done(ctx):
        return final_answer(ctx)
    if cfg.oracle and oracle_done(ctx):
        return final_answer(ctx)
    calls: list[Call] = []
    max_par = cfg.max_parallel_delegations
    if DELEGATE in ctx.offered and not conv.calls():  # its first working call
        taken: set[str] = set()
        kinds = [TEST_RUNNER, CODE_SEARCH, FILE_READER][
            : max(1, min(max_par, cfg.first_round_delegations))
        ]
        for kind in kinds:
            args = delegation(ctx, kind, taken)
            if args:
                calls.append((DELEGATE, args))
    if not calls and cfg.oracle:
        calls = oracle_calls(ctx)  # eval's oracle mode: the task's reference fix (policy/oracle)
    if not calls and _last_call(ctx) == EDIT_FILE and RUN_TESTS in ctx.offered:
        calls = [(RUN_TESTS, direct_args(ctx, RUN_TESTS) or {})]  # check the edit
    attempts = 0
    while not calls and attempts < 6:
        attempts += 1
        calls = _orch_round(ctx, max_par, delegate=attempts == 1)
    if not calls:
        return final_answer(ctx)
    prose = prose_for(ctx)
    text = prose.reasoning(cfg.reasoning_tokens.sample(rng))
    return Decision(text, calls, prose.reasoning, "tool")


def _turn_done(ctx: Ctx) -> bool:
    """This call is the last of the user's turn (``PolicyConfig.turn_calls``): the turn's
    length is drawn once per turn (seeded by the conversation up to its user message) and the
    calls made since that message count towards it."""
    dist = ctx.policy.config.turn_calls
    msgs = ctx.conv.messages
    if dist is None or ctx.policy.config.oracle:  # the oracle works until its fix is in
        return False
    user = max((i for i, m in enumerate(msgs) if m.get("role") == "user"), default=-1)
    if user < 0:
        return False
    made = sum(1 for m in msgs[user:] if m.get("role") == "assistant")
    return made + 1 >= dist.sample(ctx.policy.turn_rng(ctx.conv, user))


def _orch_round(ctx: Ctx, max_par: int, *, delegate: bool = True) -> list[Call]:
    """One round's calls: an action drawn by ``orchestrator_weights`` and its arguments (none
    when it has nothing to act on). A retry of a round that found nothing (``delegate`` False)
    does not draw a delegation again, so the odds of delegating stay the weight's per round."""
    cfg, rng = ctx.policy.config, ctx.rng
    weights = {
        k: w
        for k, w in cfg.orchestrator_weights.items()
        if k in ctx.offered and (delegate or k != DELEGATE)
    }
    if not weights:
        return []
    action = rng.choices(list(weights), weights=list(weights.values()))[0]
    calls: list[Call] = []
    if action == DELEGATE:
        n = rng.choices(range(1, len(cfg.parallel_delegations) + 1), cfg.parallel_delegations)[0]
        taken: set[str] = set()
        for _ in range(min(n, max_par)):
            kind = rng.choices([CODE_SEARCH, FILE_READER, TEST_RUNNER], [0.42, 0.42, 0.16])[0]
            args = delegation(ctx, kind, taken)
            if args:
                calls.append((DELEGATE, args))
        return calls
    n = 2 if rng.random() < cfg.parallel_direct_prob and action != EDIT_FILE else 1
    for _ in range(n):
        args = direct_args(ctx, action)
        if args is not None and (action, args) not in calls:
            calls.append((action, args))
            note_call(ctx, action, args)
    return calls


def direct_args(ctx: Ctx, action: str) -> dict[str, Any] | None:
    if action == READ_FILE:
        return _orch_read(ctx)
    if action == SEARCH_CODE:
        return _orch_search(ctx)
    if action == RUN_TESTS:
        if ctx.facts.failed_tests and ctx.rng.random() < 0.7:
            return {"target": ctx.rng.choice(ctx.facts.failed_tests)}
        return {}
    if action == EDIT_FILE:
        return _edit_args(ctx)
    if action == LIST_FILES:
        # Directories of files known to exist (repository map, search hits, tracebacks).
        real = ctx.repo or [loc.path for loc in ctx.facts.locations]
        dirs = sorted({p.rsplit("/", 1)[0] for p in real if "/" in p})
        return {"path": ctx.rng.choice(dirs)} if dirs else {}
    return None


# A simple statement line of a source file: appending a comment cannot change what it does.
_EDITABLE = re.compile(r"^(\s+)(return\b[^'\"\\#]*|[a-z_][a-z0-9_.]*\s*=\s*[^'\"\\#=]+)$")


def _last_call(ctx: Ctx) -> str | None:
    for m in reversed(ctx.conv.messages):
        if m.get("role") == "assistant":
            calls = m.get("tool_calls") or ()
            return str(calls[-1]["function"]["name"]) if calls else None
    return None


def _edit_args(ctx: Ctx) -> dict[str, Any] | None:
    """A small, behaviour-neutral edit (a review comment on a statement) of a source line the
    agent has read, as a real agent edits near the code it investigates."""
    done = {str(a.get("old")) for n, a in ctx.conv.calls() if n == EDIT_FILE}
    seen = 0
    for m in reversed(ctx.conv.messages):
        if m.get("role") != "tool" or not isinstance(m.get("content"), str):
            continue
        seen += 1
        if seen > 40:
            break
        head = READ_HEAD.match(m["content"])
        if not head or "test" in head.group(1) or not head.group(1).endswith(".py"):
            continue
        body = m["content"].splitlines()[1:]
        lines = [
            ln for ln in body if 12 <= len(ln) <= 100 and _EDITABLE.match(ln) and ln not in done
        ]
        lines = [ln for ln in lines if body.count(ln) == 1] or lines
        if lines:
            old = ctx.rng.choice(lines[:10])
            return {"path": head.group(1), "old": old, "new": old + "  # reviewed"}
    return None


def final_answer(ctx: Ctx) -> Decision:
    prose = prose_for(ctx)
    n = ctx.policy.config.final_answer_tokens.sample(ctx.rng)
    return Decision(prose.report("Report", n, final=True), [], prose.reasoning, "final")


# -- entry -------------------------------------------------------------------------------------
def decide_agent(policy: BasePolicy, conv: Conversation) -> Decision:
    """The reply of an agentload agent (``conv.role`` set), honouring ``tool_choice``."""
    ctx = build_context(policy, conv)
    d = _orchestrator(ctx) if conv.role == ORCHESTRATOR else subagent(ctx)
    d.tool_calls = [(n, a) for n, a in d.tool_calls if n in ctx.offered]
    choice = conv.tool_choice
    forced = conv.forced_tool()
    if choice == "none" and d.tool_calls:
        d = final_answer(ctx) if conv.role == ORCHESTRATOR else summary_reply(ctx)
    elif forced is not None:
        mine = [(n, a) for n, a in d.tool_calls if n == forced]
        if not mine:
            mine = [(forced, _forced_args(ctx, forced))]
        d.tool_calls = mine[:1]
    elif choice == "required" and not d.tool_calls:
        name = next(
            (n for n in (READ_FILE, SEARCH_CODE, RUN_TESTS) if n in ctx.offered), conv.tools[0]
        )
        d.tool_calls = [(name, _forced_args(ctx, name))]
    if not d.tool_calls and d.kind == "tool":
        d = final_answer(ctx) if conv.role == ORCHESTRATOR else summary_reply(ctx)
    return d


def _forced_args(ctx: Ctx, name: str) -> dict[str, Any]:
    args = (
        direct_args(ctx, name) if name in (READ_FILE, SEARCH_CODE, RUN_TESTS, LIST_FILES) else None
    )
    if name == DELEGATE:
        args = delegation(ctx, CODE_SEARCH, set()) or delegation(ctx, TEST_RUNNER, set())
    if args is None:
        args = ctx.policy.schema_args(ctx.conv, name, ctx.policy.vocab_for(ctx.conv, ctx.facts))
    return args
