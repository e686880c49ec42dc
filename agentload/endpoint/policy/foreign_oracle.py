"""Oracle mode for a foreign agent: an eval task's reference fix through the product's tools.

With ``PolicyConfig.oracle`` set, a root conversation whose text contains an eval task's issue
(``evals.tasks``; wrapped in whatever prompt the product or harness adds) plays the fix, as
``oracle`` does for agentload's own agents, with whatever tools the product offers
(``moves``):

1. search the faulty line (``Fault.probe``) in the task's file;
2. read a window around the hit (Claude Code's ``Edit`` wants the file read first);
3. replace the fault's text by the original: ``Edit`` old/new strings, an ``apply_patch``
   patch, or a python3 heredoc in the shell — and once more through the shell if the edit
   tool said it failed;
4. run the task's test suite;

then the session answers (``foreign``). The tests are the task's own command, so a sub-agent
asked to run them gets it in its task text.
"""

from __future__ import annotations

import re
import shlex

from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.moves import Call, Intent, Play
from agentload.endpoint.policy.session import Session
from agentload.evals.tasks import Task, all_tasks

__all__ = ["oracle_move", "oracle_task", "suite_command", "task_in"]

_FAILED = re.compile(
    r"error|failed|not found|no such file|traceback|invalid|must read|has not been read", re.I
)


def task_in(text: str) -> Task | None:
    """The eval task whose issue ``text`` contains (whitespace aside), or None."""
    flat = " ".join(text.split())
    for task in all_tasks():
        if " ".join(task.issue.split()) in flat:
            return task
    return None


def oracle_task(policy: BasePolicy, s: Session) -> Task | None:
    """The eval task of a root conversation in oracle mode, or None."""
    if not policy.config.oracle or s.subtask is not None:
        return None
    return task_in(s.task) or task_in(s.texts)


def suite_command(task: Task) -> str:
    """The shell command that runs ``task``'s test suite the way its check does."""
    return f'TMPDIR="${{TMPDIR:-/tmp}}" {shlex.join(task.test_command())} 2>&1 | tail -30'


def _hit_line(text: str, probe: str) -> int | None:
    for line in text.splitlines():
        if probe in line:
            m = re.search(r"(?:^|:)(\d+)[:\-]", line)
            if m:
                return int(m.group(1))
    return None


def _asked(args: dict[str, object], probe: str) -> bool:
    """Whether a search call's arguments looked for ``probe`` (as text or as a regex)."""
    said = [v for v in args.values() if isinstance(v, str)]
    return any(probe in v or re.escape(probe) in v for v in said)


def oracle_move(p: Play) -> list[Call] | None:
    """The oracle's next calls: None when there is no task (the session's usual steps), none
    once the tests ran after the fix (the session answers)."""
    task = oracle_task(p.policy, p.s)
    if task is None:
        return None
    call = _next(p, task)
    return [call] if call is not None else []


def _next(p: Play, task: Task) -> Call | None:
    fault, moves = task.fault, p.moves
    edits = [k for k, what in enumerate(p.intents) if what == Intent.EDIT]
    if edits:
        last = p.s.steps[edits[-1]]
        if last.result is not None and _FAILED.search(last.result) and len(edits) < 2:
            return moves.replace(fault.path, fault.new, fault.old, shell=True)
        return None if Intent.TEST in p.intents[edits[-1] :] else moves.tests(p.test_cmd)
    probe = fault.probe()
    searched = [s for s, what in zip(p.s.steps, p.intents, strict=True) if what == Intent.SEARCH]
    found = next((s for s in searched if s.result and probe in s.result), None)
    if found is None and not any(_asked(s.args, probe) for s in searched):
        cmd = f"grep -rnF -e {shlex.quote(probe)} {shlex.quote(fault.path)}"
        if p.kit.grep is not None:
            return p.kit.call(
                p.kit.grep,
                {
                    "pattern": re.escape(probe),
                    "path": p.s.path(fault.path),
                    "output_mode": "content",
                    "-n": True,
                },
            )
        return moves.shell(cmd, "Find the faulty line")
    after = p.intents.index(Intent.SEARCH) if Intent.SEARCH in p.intents else 0
    if Intent.READ not in p.intents[after:]:
        line = _hit_line(p.s.rel(found.result or ""), probe) if found else None
        start = max(1, (line or 1) - 20)
        return moves.read(fault.path, start, 40 if line else 0)
    return moves.replace(fault.path, fault.new, fault.old)
