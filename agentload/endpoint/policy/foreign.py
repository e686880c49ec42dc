"""The foreign agent: how the simulator plays an agent product it does not know.

A conversation that is none of agentload's agents (``conv.role is None``) and is offered tools
that do coding work (``toolkinds.classify``) is played as a competent, brief coding agent,
whatever product sends it (Claude Code, Codex CLI, Qwen Code, opencode, Gemini CLI,
mini-swe-agent, an Agents SDK app). Each request's reply is decided afresh from what the
conversation shows (``session``): what the agent was asked, where it works, and what its
earlier calls returned. Every call it emits is valid for its tool's JSON schema (``moves``
through ``Kit.call``, ``argfill``), paths absolute under the working directory it stated where
the tool asks for them.

**Root agent.** In this order, each at most once unless said: delegate 1–2 sub-tasks when a
delegate tool is offered (``Find where `IDENT` is defined...`` to an explorer kind of agent,
``Run the tests...`` to a general one, where the tool names kinds); wait
for the sub-agents (Codex ``wait_agent``, with the ids the spawn results gave, at most
``_MAX_WAITS`` times); list the files; search the task's main identifier; read the most
relevant file (a location a result showed, else a listed file the task names or resembles);
with ``PolicyConfig.oracle`` on a recognised eval task, apply its reference fix
(``foreign_oracle``); run the tests (the command the task names, else pytest or unittest);
read the first failure location the tests showed; answer — or, when the instructions say how
to finish ("finish by issuing `echo DONE`"), run that command. At most ``_MAX_CALLS`` calls.

**Sub-agent.** A conversation whose task is a delegation text this policy wrote (it starts
with ``session.SUBTASK``) searches the identifier (and reads the definition it found) or runs
the tests (and reads the first failure location), then answers with a short report that quotes
what the results showed.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import replace
from typing import Any

from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.facts import Facts, Location
from agentload.endpoint.policy.foreign_oracle import oracle_move, oracle_task, suite_command
from agentload.endpoint.policy.moves import (
    DEFAULT_TESTS,
    FALLBACK_TESTS,
    Call,
    Intent,
    Moves,
    Play,
    intent,
)
from agentload.endpoint.policy.reading import task_idents
from agentload.endpoint.policy.report import Reporter
from agentload.endpoint.policy.session import SUBTASK, as_json, read_session
from agentload.endpoint.policy.toolkinds import Kit, classify
from agentload.endpoint.policy.types import Conversation, Decision

__all__ = ["decide_foreign"]

_MAX_CALLS = 14
_MAX_WAITS = 4
_CALL_RE = re.compile(r"\b([A-Za-z_][\w.]*\w)\s*\(")
_NOT_IDENT = frozenset(
    (
        "print",
        "len",
        "str",
        "int",
        "list",
        "dict",
        "set",
        "tuple",
        "range",
        "open",
        "type",
        "isinstance",
        "return",
        "assert",
        "float",
        "bool",
        "repr",
        "sorted",
        "max",
        "min",
    )
)
_AGENT_KEYS = ("agent_id", "task_name", "agent_path", "id")
_FINAL_ANSWER = re.compile(r"^Message Type: FINAL_ANSWER\n(?:.*\n)*?Sender: (\S+)", re.M)
"""A Codex multi_agent_v2 sub-agent's answer, a message to its parent."""
_NOTICE = re.compile(r"<subagent_notification>\s*(\{.*?\})\s*</subagent_notification>", re.S)


def task_ident(task: str) -> str | None:
    """The identifier a task is most about: a function it shows called, else a backticked or
    code-like name."""
    called = [m.group(1).rsplit(".", 1)[-1] for m in _CALL_RE.finditer(task)]
    pool = [c for c in called if c not in _NOT_IDENT and len(c) >= 3] + task_idents(task)
    return pool[0] if pool else None


def _locations(f: Facts, read: set[str]) -> list[Location]:
    traces = [loc for loc in reversed(f.locations) if loc.kind == "trace"]
    hits = [loc for loc in f.locations if loc.kind == "hit"]
    return [loc for loc in traces + hits if loc.path not in read]


def _relevant_file(p: Play) -> str | None:
    read = p.read_paths()
    listed = [x for x in p.s.facts.listed or p.s.facts.paths if x not in read]
    if not listed:
        return None
    words = {w.lower() for w in re.findall(r"[A-Za-z_]{3,}", p.s.task)}
    named = [x for x in listed if x.rsplit("/", 1)[-1] in p.s.task]

    def score(x: str) -> tuple[int, bool, bool, str]:
        stem = x.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
        return (-sum(w in stem for w in words), "test" in x, not x.endswith(".py"), x)

    return (named or sorted(listed, key=score))[0]


def _read_next(p: Play, facts: Facts) -> Call | None:
    locs = _locations(facts, p.read_paths())
    if locs:
        loc = next((x for x in locs if "test" not in x.path), locs[0])
        return p.moves.read(loc.path, max(1, loc.line - 20), 60)
    return None


def _delegations(p: Play) -> list[Call]:
    ident = task_ident(p.s.task)
    where = p.s.cwd or "the current directory"
    wanted = [
        (
            f"{SUBTASK}: run the tests in {where} and report which fail, quoting the failure "
            "message and its file:line.",
            "Run the test suite",
            "run_tests",
            "tests",
        )
    ]
    if p.test_cmd != DEFAULT_TESTS:
        wanted[0] = (
            wanted[0][0].replace(" and report", f" with `{p.test_cmd}` and report"),
            *wanted[0][1:],
        )
    if ident and p.conv.stable_rng.random() < 0.8:
        wanted.insert(
            0,
            (
                f"{SUBTASK}: find where `{ident}` is defined in {where} and report the file and "
                "line, quoting the definition.",
                f"Find {ident} definition",
                "find_" + re.sub(r"\W", "_", ident.lower()),
                "search",
            ),
        )
    calls = [p.moves.delegate(*w) for w in wanted]
    return [c for c in calls if c is not None]


def _agents(p: Play) -> tuple[list[str], set[str]]:
    """The sub-agents the spawn results named (in order) and those known to have finished
    (a wait result's ``status``, a ``<subagent_notification>``)."""
    spawned: list[str] = []
    finished: set[str] = set()
    for step, what in zip(p.s.steps, p.intents, strict=True):
        obj = as_json(step.result or "")
        if what == Intent.DELEGATE and step.result is not None:
            name = next((obj[k] for k in _AGENT_KEYS if isinstance(obj.get(k), str)), None)
            spawned.append(name or f"#{len(spawned)}")
        elif what == Intent.WAIT and isinstance(obj.get("status"), dict):
            finished |= {k for k, v in obj["status"].items() if _final(v)}
    for text in p.s.answers:
        for m in _NOTICE.finditer(text):
            obj = as_json(m.group(1))
            if isinstance(obj.get("agent_path"), str) and _final(obj.get("status")):
                finished.add(obj["agent_path"])
        finished.update(_FINAL_ANSWER.findall(text))
    return spawned, finished


def _final(status: Any) -> bool:
    if isinstance(status, dict):
        return bool(set(status) - {"running", "pending_init"})
    return isinstance(status, str) and status not in ("running", "pending_init")


def _root(p: Play) -> list[Call]:
    done, moves = p.done, p.moves
    if p.kit.delegate is not None and not done[Intent.DELEGATE]:
        return _delegations(p)
    if p.kit.wait is not None and done[Intent.DELEGATE]:
        spawned, finished = _agents(p)
        if len(finished) < len(spawned) and done[Intent.WAIT] < _MAX_WAITS:
            waiting = [a for a in spawned if a not in finished and not a.startswith("#")]
            return [c for c in [moves.wait(waiting[:1])] if c]
    oracle = oracle_move(p)
    if oracle is not None:
        return oracle
    steps: list[Call | None] = []
    if not done[Intent.LIST]:
        steps.append(moves.list_files())
    ident = task_ident(p.s.task)
    if not done[Intent.SEARCH] and ident:
        steps.append(moves.search(ident))
    if not done[Intent.READ] and not done[Intent.TEST]:
        steps.append(_read_next(p, p.s.facts) or _read_file(p))
    steps.append(_test_call(p))
    if done[Intent.TEST] and done[Intent.READ] < 2 and p.intents[-1] == Intent.TEST:
        steps.append(_read_next(p, p.s.last))
    return [c for c in steps if c is not None][:1]


def _test_call(p: Play) -> Call | None:
    """The test run still to make: the first, or unittest when pytest is not installed."""
    runs = [s for s, what in zip(p.s.steps, p.intents, strict=True) if what == Intent.TEST]
    if not runs:
        return p.moves.tests(p.test_cmd)
    if len(runs) == 1 and "No module named pytest" in (runs[0].result or ""):
        return p.moves.tests(FALLBACK_TESTS)
    return None


def _read_file(p: Play) -> Call | None:
    path = _relevant_file(p)
    return p.moves.read(path, 1, 150) if path else None


def _subagent(p: Play) -> list[Call]:
    task = p.s.subtask or ""
    m = re.search(r"find where `([^`]+)` is defined", task)
    if m:
        if not p.done[Intent.SEARCH]:
            return [c for c in [p.moves.search(m.group(1))] if c]
        if not p.done[Intent.READ]:
            defs = [loc for loc in p.s.facts.locations if loc.kind == "hit"]
            hit = _def_hit(p, m.group(1), defs)
            if hit is not None:
                return [c for c in [p.moves.read(hit.path, max(1, hit.line - 5), 25)] if c]
        return []
    call = _test_call(p)
    if call is not None:
        return [call]
    if not p.done[Intent.READ]:
        return [c for c in [_read_next(p, p.s.facts)] if c]
    return []


def _def_hit(p: Play, ident: str, hits: list[Location]) -> Location | None:
    rx = re.compile(rf"^(?:\./)?(\S+?):(\d+):\s*(?:async\s+)?(?:def|class)\s+{re.escape(ident)}\b")
    for step in p.s.steps:
        for line in p.s.rel(step.result or "").splitlines():
            mm = rx.match(line.strip())
            if mm:
                return Location(mm.group(1), int(mm.group(2)), "hit")
    return hits[0] if hits else None


def _play(policy: BasePolicy, conv: Conversation, kit: Kit) -> Play:
    s = read_session(conv)
    kit = replace(kit, cwd=s.cwd)
    task = oracle_task(policy, s)
    test_cmd = s.test_command or (suite_command(task) if task else DEFAULT_TESTS)
    intents = [intent(kit, step, s, test_cmd) for step in s.steps]
    return Play(policy, conv, kit, s, Moves(kit, s), Counter(intents), intents, test_cmd)


def decide_foreign(policy: BasePolicy, conv: Conversation) -> Decision | None:
    """The reply to a foreign agent's request, or ``None`` when its tools do no coding work
    (the plain reply then)."""
    kit = classify(conv)
    if not kit.useful:
        return None
    p = _play(policy, conv, kit)
    sub = re.search(r"find where `([^`]+)` is defined", p.s.subtask or "")
    rep = Reporter(p, sub.group(1) if sub else task_ident(p.s.task))
    if p.s.subtask is not None:
        calls = _subagent(p) if conv.turns < 3 else []
    else:
        calls = _root(p) if conv.turns < _MAX_CALLS else []
        if not calls and p.s.finish and not p.done[Intent.FINISH]:
            calls = [c for c in [p.moves.finish()] if c]
            return Decision(rep.final(), calls, rep.more, "tool") if calls else rep.answer()
    return _honour_choice(p, rep, calls)


def _honour_choice(p: Play, rep: Reporter, calls: list[Call]) -> Decision:
    choice, forced = p.conv.tool_choice, p.conv.forced_tool()
    if choice == "none":
        return rep.answer()
    if forced is not None:
        mine = [c for c in calls if c[0] == forced]
        calls = mine[:1] or [p.kit.call(p.kit.tools[forced], _forced_args(p, forced))]
    elif choice == "required" and not calls:
        calls = [c for c in [p.moves.list_files() or p.moves.tests(p.test_cmd)] if c]
        if not calls:
            name = p.conv.tools[0]
            calls = [p.kit.call(p.kit.tools[name], _forced_args(p, name))]
    if not calls:
        return rep.answer()
    return Decision(rep.before(calls), calls, rep.more, "tool")


def _forced_args(p: Play, name: str) -> dict[str, Any]:
    vocab = p.policy.vocab_for(p.conv, p.s.facts)
    return p.policy.schema_args(p.conv, name, vocab)
