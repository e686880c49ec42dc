"""The policy for agentload's own agents: a competent coding agent that reads its tool outputs.

* **orchestrator** — plans, then each round either delegates (1–3 parallel ``delegate`` calls
  to code_search / file_reader / test_runner) or uses direct tools: ``read_file`` at the
  locations that searches, tracebacks and summaries reported (a window around the line, or the
  whole file), ``search_code`` for identifiers from the task and the results, ``run_tests``,
  ``list_files``. It answers without tool calls once the request's prompt tokens reach the
  marker's ``context_target`` or its rounds reach ``max_rounds``.
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agentload.agents.contract import (
    CODE_SEARCH,
    DELEGATE,
    FILE_READER,
    LIST_FILES,
    ORCHESTRATOR,
    READ_FILE,
    RUN_TESTS,
    SEARCH_CODE,
    TEST_RUNNER,
)
from agentload.endpoint.facts import Facts, Location, extract, file_sections, repo_map, ticked
from agentload.endpoint.policy import Conversation, Decision

if TYPE_CHECKING:
    from agentload.endpoint.policy import Policy
    from agentload.endpoint.prose import Prose

__all__ = ["decide_agent"]

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DOTTED_TEST = re.compile(r"^(?:[\w]+\.)*test\w*(?:\.\w+)*$")
_SYS_CACHE: dict[str, tuple[list[str], list[str], Facts]] = {}

Call = tuple[str, dict[str, Any]]


@dataclass
class _Ctx:
    """What an agent knows at this call (see module docstring)."""

    policy: Policy
    conv: Conversation
    offered: set[str]
    task: str
    repo: list[str]
    sections: list[str]
    sys_facts: Facts
    facts: Facts
    last: Facts
    headers: list[tuple[str, int, int, int]]
    read: dict[str, set[int]] = field(default_factory=dict)
    read_end: dict[str, int] = field(default_factory=dict)
    whole: set[str] = field(default_factory=set)
    searched: set[str] = field(default_factory=set)
    said: str = ""
    ran_targets: list[str] = field(default_factory=list)

    @property
    def rng(self) -> Any:
        return self.conv.rng


def _context(policy: Policy, conv: Conversation) -> _Ctx:
    sys_text = conv.text(0)
    key = conv.mids[0]
    cached = _SYS_CACHE.get(key)
    if cached is None:
        if len(_SYS_CACHE) > 256:
            _SYS_CACHE.clear()
        cached = (repo_map(sys_text), file_sections(sys_text), extract(sys_text, key))
        _SYS_CACHE[key] = cached
    repo, sections, sys_facts = cached
    last_asst = max(
        (i for i, m in enumerate(conv.messages) if m.get("role") == "assistant"), default=0
    )
    task = conv.text(1) if len(conv.messages) > 1 else ""
    facts = conv.facts(1)
    ctx = _Ctx(
        policy=policy,
        conv=conv,
        offered=set(conv.tools),
        task=task,
        repo=repo,
        sections=sections,
        sys_facts=sys_facts,
        facts=facts,
        last=conv.facts(last_asst + 1) if last_asst else facts,
        headers=facts.reads,
    )
    said = []
    for name, args in conv.calls():
        if name == READ_FILE and isinstance(args.get("path"), str):
            p = args["path"]
            start = int(args.get("start_line") or 1)
            ctx.read.setdefault(p, set()).add(start)
            if "end_line" not in args:
                ctx.whole.add(p)
            else:
                ctx.read_end[p] = max(ctx.read_end.get(p, 0), int(args["end_line"]))
        elif name == SEARCH_CODE:
            ctx.searched.add(str(args.get("pattern", "")))
        elif name == RUN_TESTS:
            ctx.ran_targets.append(str(args.get("target", "")))
        elif name == DELEGATE:
            said.append(str(args.get("task", "")))
    ctx.said = "\n".join(said)
    return ctx


def _prose(ctx: _Ctx) -> Prose:
    fresh = Facts()
    fresh.merge(ctx.last)
    fresh.merge(ctx.facts)
    vocab = ctx.policy.vocab_for(ctx.conv, fresh.dedupe())
    if not vocab.paths:
        vocab.paths = ctx.sections[:20] or ctx.repo[:20]
    return ctx.policy.prose(ctx.conv, vocab)


# -- shared pickers ----------------------------------------------------------------------------
def _task_idents(text: str) -> list[str]:
    out = [t for t in ticked(text) if _IDENT.match(t) and len(t) >= 3 and not t.islower()]
    out += [t for t in ticked(text) if _IDENT.match(t) and "_" in t]
    out += extract(text).idents
    return list(dict.fromkeys(out))


def _used(ctx: _Ctx, ident: str) -> bool:
    return any(ident in s for s in ctx.searched) or f"`{ident}`" in ctx.said


def _idents(ctx: _Ctx) -> list[str]:
    pool = _task_idents(ctx.task)
    pool += [t.rsplit(".", 1)[-1] for t in ctx.facts.failed_tests]
    pool += ctx.last.defs + ctx.facts.defs + ctx.last.idents + ctx.facts.idents
    pool += ctx.sys_facts.defs[:300]
    return [i for i in dict.fromkeys(pool) if len(i) >= 4 and not _used(ctx, i)]


def _window(ctx: _Ctx, loc: Location, before: int, after: int) -> dict[str, Any]:
    return {"path": loc.path, "start_line": max(1, loc.line - before), "end_line": loc.line + after}


def _unread_locations(ctx: _Ctx, facts: Facts, kinds: tuple[str, ...]) -> list[Location]:
    out = []
    before, _ = ctx.policy.config.read_window
    for loc in facts.locations:
        if loc.kind not in kinds or loc.path in ctx.whole:
            continue
        starts = ctx.read.get(loc.path, set())
        if any(abs(s - max(1, loc.line - before)) < 40 for s in starts):
            continue
        out.append(loc)
    return out


def _unread_paths(ctx: _Ctx) -> list[str]:
    cands = [p for p in ctx.facts.paths if p not in ctx.read and p in _repo_set(ctx)]
    cands += [p for p in ctx.facts.paths if p not in ctx.read and not ctx.repo]
    words = {w.lower() for w in _task_idents(ctx.task)} | {
        w.lower() for w in re.findall(r"[A-Za-z_]{4,}", ctx.task)
    }
    ranked = sorted(
        (p for p in ctx.repo if p not in ctx.read and p not in ctx.sections),
        key=lambda p: (-sum(w in p.lower() for w in words), not p.endswith(".py"), p),
    )
    cands += ranked[:40]
    return list(dict.fromkeys(cands))


def _repo_set(ctx: _Ctx) -> set[str]:
    s = getattr(ctx, "_repo_set", None)
    if s is None:
        s = set(ctx.repo)
        object.__setattr__(ctx, "_repo_set", s)
    return s


def _continuations(ctx: _Ctx, span: int) -> list[dict[str, Any]]:
    out = []
    for path, _a, b, n in ctx.headers:
        if b < n and ctx.read_end.get(path, 0) <= b and path not in ctx.whole:
            out.append({"path": path, "start_line": b + 1, "end_line": min(n, b + span)})
    return out


# -- orchestrator ------------------------------------------------------------------------------
def _orch_read(ctx: _Ctx) -> dict[str, Any] | None:
    cfg = ctx.policy.config
    before, after = cfg.read_window
    locs = _unread_locations(ctx, ctx.last, ("trace", "hit")) or _unread_locations(
        ctx, ctx.facts, ("trace", "hit")
    )
    if locs and ctx.rng.random() < 0.85:
        loc = locs[0] if ctx.rng.random() < 0.6 else ctx.rng.choice(locs[:8])
        if ctx.rng.random() < cfg.whole_file_prob:
            return {"path": loc.path}
        return _window(ctx, loc, before, after)
    paths = _unread_paths(ctx)
    if paths:
        p = paths[0] if ctx.rng.random() < 0.5 else ctx.rng.choice(paths[:10])
        if ctx.rng.random() < cfg.whole_file_prob * 2:
            return {"path": p}
        return {"path": p, "start_line": 1, "end_line": before + after}
    conts = _continuations(ctx, before + after)
    return ctx.rng.choice(conts) if conts else None


def _orch_search(ctx: _Ctx) -> dict[str, Any] | None:
    idents = _idents(ctx)
    if not idents:
        return None
    ident = idents[0] if ctx.rng.random() < 0.5 else ctx.rng.choice(idents[:12])
    pat = ident if ctx.rng.random() < 0.7 else rf"(def|class) {ident}\b"
    return {"pattern": pat, "max_results": ctx.policy.config.search_max_results}


def _first_sentence(text: str) -> str:
    s = " ".join(text.split())
    cut = s.find(". ")
    return s[: cut + 1] if 0 < cut < 300 else s[:300]


def _delegation(ctx: _Ctx, kind: str, taken: set[str]) -> dict[str, Any] | None:
    goal = _first_sentence(ctx.task)
    if kind == CODE_SEARCH:
        idents = [i for i in _idents(ctx) if i not in taken]
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
        paths = [p for p in _unread_paths(ctx) if p not in taken and f"`{p}`" not in ctx.said]
        if not paths:
            return None
        pick = paths[: ctx.rng.randint(1, 3)]
        taken.update(pick)
        focus = _idents(ctx)[:1]
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


def _orchestrator(ctx: _Ctx) -> Decision:
    conv, cfg, rng = ctx.conv, ctx.policy.config, ctx.rng
    target = int(conv.attrs.get("context_target", "0") or 0)
    max_rounds = int(conv.attrs.get("max_rounds", "0") or 0)
    if (target and conv.prompt_tokens >= target) or (max_rounds and conv.turns >= max_rounds):
        return _final(ctx)
    calls: list[Call] = []
    max_par = int(conv.attrs.get("max_parallel", "3") or 3)
    if conv.turns == 0 and DELEGATE in ctx.offered:
        taken: set[str] = set()
        kinds = [TEST_RUNNER, CODE_SEARCH, FILE_READER][
            : max(1, min(max_par, cfg.first_round_delegations))
        ]
        for kind in kinds:
            args = _delegation(ctx, kind, taken)
            if args:
                calls.append((DELEGATE, args))
    attempts = 0
    while not calls and attempts < 6:
        attempts += 1
        calls = _orch_round(ctx, max_par)
    if not calls:
        return _final(ctx)
    prose = _prose(ctx)
    text = prose.reasoning(cfg.reasoning_tokens.sample(rng))
    return Decision(text, calls, prose.reasoning, "tool")


def _orch_round(ctx: _Ctx, max_par: int) -> list[Call]:
    cfg, rng = ctx.policy.config, ctx.rng
    weights = {k: w for k, w in cfg.orchestrator_weights.items() if k in ctx.offered}
    if not weights:
        return []
    action = rng.choices(list(weights), weights=list(weights.values()))[0]
    calls: list[Call] = []
    if action == DELEGATE:
        n = rng.choices(range(1, len(cfg.parallel_delegations) + 1), cfg.parallel_delegations)[0]
        taken: set[str] = set()
        for _ in range(min(n, max_par)):
            kind = rng.choices([CODE_SEARCH, FILE_READER, TEST_RUNNER], [0.42, 0.42, 0.16])[0]
            args = _delegation(ctx, kind, taken)
            if args:
                calls.append((DELEGATE, args))
        return calls
    n = 2 if rng.random() < cfg.parallel_direct_prob else 1
    for _ in range(n):
        args = _direct(ctx, action)
        if args is not None and (action, args) not in calls:
            calls.append((action, args))
            _note(ctx, action, args)
    return calls


def _direct(ctx: _Ctx, action: str) -> dict[str, Any] | None:
    if action == READ_FILE:
        return _orch_read(ctx)
    if action == SEARCH_CODE:
        return _orch_search(ctx)
    if action == RUN_TESTS:
        if ctx.facts.failed_tests and ctx.rng.random() < 0.7:
            return {"target": ctx.rng.choice(ctx.facts.failed_tests)}
        return {}
    if action == LIST_FILES:
        dirs = sorted({p.rsplit("/", 1)[0] for p in ctx.facts.paths + ctx.repo if "/" in p})
        return {"path": ctx.rng.choice(dirs)} if dirs else {}
    return None


def _note(ctx: _Ctx, name: str, args: dict[str, Any]) -> None:
    """Remember a call chosen in this round so a parallel sibling picks something else."""
    if name == READ_FILE:
        ctx.read.setdefault(args["path"], set()).add(int(args.get("start_line") or 1))
        if "end_line" not in args:
            ctx.whole.add(args["path"])
        else:
            ctx.read_end[args["path"]] = max(ctx.read_end.get(args["path"], 0), args["end_line"])
    elif name == SEARCH_CODE:
        ctx.searched.add(str(args.get("pattern")))


def _final(ctx: _Ctx) -> Decision:
    prose = _prose(ctx)
    n = ctx.policy.config.final_answer_tokens.sample(ctx.rng)
    return Decision(prose.report("Report", n, final=True), [], prose.reasoning, "final")


# -- sub-agents --------------------------------------------------------------------------------
def _summary(ctx: _Ctx) -> Decision:
    prose = _prose(ctx)
    n = ctx.policy.config.summary_tokens.sample(ctx.rng)
    title = {
        CODE_SEARCH: "Search results",
        FILE_READER: "File summary",
        TEST_RUNNER: "Test results",
    }.get(ctx.conv.role or "", "Summary")
    return Decision(
        prose.report(f"{title}: {_first_sentence(ctx.task)[:80]}", n),
        [],
        prose.reasoning,
        "summary",
    )


def _code_search(ctx: _Ctx) -> list[Call]:
    cfg, rng = ctx.policy.config, ctx.rng
    before, after = cfg.read_window
    calls: list[Call] = []
    if READ_FILE in ctx.offered:
        for loc in _unread_locations(ctx, ctx.last, ("hit",))[: rng.randint(1, 2)]:
            args = _window(ctx, loc, before // 2, after // 2)
            calls.append((READ_FILE, args))
            _note(ctx, READ_FILE, args)
    if calls or SEARCH_CODE not in ctx.offered:
        return calls
    pool = [i for i in _task_idents(ctx.task) if not _used(ctx, i)]
    pool += [i for i in ctx.facts.defs if not _used(ctx, i)]
    for ident in list(dict.fromkeys(pool))[: 2 if ctx.conv.turns == 0 else 1]:
        pat = ident if rng.random() < 0.6 else rf"(def|class) {ident}\b"
        calls.append((SEARCH_CODE, {"pattern": pat, "max_results": cfg.search_max_results}))
        ctx.searched.add(pat)
    if not calls:
        for loc in _unread_locations(ctx, ctx.facts, ("hit",))[:1]:
            calls.append((READ_FILE, _window(ctx, loc, before // 2, after // 2)))
    return calls


def _file_reader(ctx: _Ctx) -> list[Call]:
    cfg, rng = ctx.policy.config, ctx.rng
    span = sum(cfg.read_window) * 2
    task_paths = [p for p in extract(ctx.task).paths if p not in ctx.read]
    listed = {loc.path for loc in ctx.facts.locations} | set(_listed(ctx))
    found = [p for p in ctx.facts.paths if p not in ctx.read and p not in task_paths]
    found.sort(key=lambda p: p not in listed)
    calls: list[Call] = []
    for p in (task_paths or found[:3])[: rng.randint(1, 2)]:
        args: dict[str, Any] = {"path": p}
        if rng.random() >= cfg.subagent_whole_file_prob:
            args.update(start_line=1, end_line=span)
        calls.append((READ_FILE, args))
        _note(ctx, READ_FILE, args)
    if calls:
        return calls
    conts = _continuations(ctx, span)
    if conts:
        return [(READ_FILE, conts[0])]
    if ctx.conv.turns == 0 and LIST_FILES in ctx.offered:
        dirs = [t.rstrip("/") for t in ticked(ctx.task) if "/" in t or t.endswith("/")]
        return [(LIST_FILES, {"path": dirs[0]} if dirs else {})]
    return []


def _listed(ctx: _Ctx) -> list[str]:
    """Paths that a tool output gave one per line (``list_files``)."""
    return ctx.facts.listed


def _test_target(ctx: _Ctx) -> str | None:
    for t in ticked(ctx.task):
        if _DOTTED_TEST.match(t) or (t.endswith(".py") and "test" in t):
            return t
    return None


def _test_runner(ctx: _Ctx) -> list[Call]:
    cfg, rng = ctx.policy.config, ctx.rng
    if not ctx.ran_targets and RUN_TESTS in ctx.offered:
        target = _test_target(ctx)
        return [(RUN_TESTS, {"target": target} if target else {})]
    calls: list[Call] = []
    if READ_FILE in ctx.offered:
        frames = list(reversed(_unread_locations(ctx, ctx.facts, ("trace",))))
        seen: set[str] = set()
        for loc in frames:
            if loc.path in seen:
                continue
            seen.add(loc.path)
            args = _window(ctx, loc, 15, 25)
            calls.append((READ_FILE, args))
            _note(ctx, READ_FILE, args)
            if len(calls) >= rng.randint(1, 2):
                break
    if calls:
        return calls
    failed = [t for t in ctx.facts.failed_tests if t not in ctx.ran_targets]
    if failed and RUN_TESTS in ctx.offered and rng.random() < 0.5:
        return [(RUN_TESTS, {"target": failed[0]})]
    if SEARCH_CODE in ctx.offered:
        names = [t.rsplit(".", 1)[-1] for t in ctx.facts.failed_tests]
        names = [n for n in names if not _used(ctx, n)]
        if names:
            return [(SEARCH_CODE, {"pattern": names[0], "max_results": cfg.search_max_results})]
    return []


_SUB = {CODE_SEARCH: _code_search, FILE_READER: _file_reader, TEST_RUNNER: _test_runner}


def _subagent(ctx: _Ctx) -> Decision:
    conv, cfg = ctx.conv, ctx.policy.config
    max_turns = int(conv.attrs.get("max_turns", "6") or 6)
    lo, hi = cfg.subagent_turns
    planned = max(0, min(max_turns - 1, conv.stable_rng.randint(lo, hi)))
    if conv.turns >= planned:
        return _summary(ctx)
    calls = _SUB[conv.role or CODE_SEARCH](ctx)
    if not calls:
        return _summary(ctx)
    prose = _prose(ctx)
    n = cfg.reasoning_tokens.sample(ctx.rng) // 2
    return Decision(prose.reasoning(n), calls, prose.reasoning, "tool")


# -- entry -------------------------------------------------------------------------------------
def decide_agent(policy: Policy, conv: Conversation) -> Decision:
    """The reply of an agentload agent (``conv.role`` set), honouring ``tool_choice``."""
    ctx = _context(policy, conv)
    d = _orchestrator(ctx) if conv.role == ORCHESTRATOR else _subagent(ctx)
    d.tool_calls = [(n, a) for n, a in d.tool_calls if n in ctx.offered]
    choice = conv.tool_choice
    forced = conv.forced_tool()
    if choice == "none" and d.tool_calls:
        d = _final(ctx) if conv.role == ORCHESTRATOR else _summary(ctx)
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
        d = _final(ctx) if conv.role == ORCHESTRATOR else _summary(ctx)
    return d


def _forced_args(ctx: _Ctx, name: str) -> dict[str, Any]:
    args = _direct(ctx, name) if name in (READ_FILE, SEARCH_CODE, RUN_TESTS, LIST_FILES) else None
    if name == DELEGATE:
        args = _delegation(ctx, CODE_SEARCH, set()) or _delegation(ctx, TEST_RUNNER, set())
    if args is None:
        args = ctx.policy.schema_args(ctx.conv, name, ctx.policy.vocab_for(ctx.conv, ctx.facts))
    return args
