"""Oracle mode (``PolicyConfig.oracle``): the simulated orchestrator applies an eval task's
reference fix, so the success path of ``agentload eval`` can be tested end to end without a
real model. It is exactly that and nothing more: the simulator recognises the task by its issue
text (``evals.tasks``), and only through its tools —

1. ``search_code`` for the faulty line (``Fault.probe``) in the task's file;
2. ``read_file`` of a window around a hit;
3. once a read shows the whole faulty text, ``edit_file`` replacing it with the original.

The fix is made once; after it the agent works on as without the oracle (its usual next step
after an edit is to run the tests). ``agentload eval --oracle`` is refused against any endpoint
but the built-in simulator.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentload.contract import EDIT_FILE, READ_FILE, SEARCH_CODE
from agentload.endpoint.policy.reading import READ_HEAD, Call, Ctx
from agentload.evals.tasks import Fault, all_tasks

__all__ = ["oracle_calls", "oracle_done"]

_WINDOW = 20


def _fault_of(task_text: str) -> Fault | None:
    text = " ".join(task_text.split())
    for task in all_tasks():
        if " ".join(task.issue.split()) == text:
            return task.fault
    return None


def _tool_texts(ctx: Ctx) -> list[str]:
    return [
        m["content"]
        for m in ctx.conv.messages
        if m.get("role") == "tool" and isinstance(m.get("content"), str)
    ]


_SUITE_OK = re.compile(r"^OK\b", re.MULTILINE)


def _old_of(arguments: Any) -> Any:
    try:
        return json.loads(arguments or "{}").get("old")
    except (ValueError, TypeError, AttributeError):
        return None


def oracle_done(ctx: Ctx) -> bool:
    """The fix is in and a test run after it passed: the task is done (a real agent answers
    then, so an oracle session ends there instead of at the context target)."""
    fault = _fault_of(ctx.task)
    if fault is None:
        return False
    fixed = False
    for m in ctx.conv.messages:
        if m.get("role") == "assistant":
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                if fn.get("name") == EDIT_FILE and _old_of(fn.get("arguments")) == fault.new:
                    fixed = True
        elif fixed and m.get("role") == "tool" and _SUITE_OK.search(str(m.get("content"))):
            return True
    return False


def oracle_calls(ctx: Ctx) -> list[Call]:
    """The oracle's next call, or none: not a task, already fixed, or nothing offered."""
    fault = _fault_of(ctx.task)
    if fault is None or not {EDIT_FILE, READ_FILE, SEARCH_CODE} <= set(ctx.offered):
        return []
    made = ctx.conv.calls()
    if any(n == EDIT_FILE and a.get("old") == fault.new for n, a in made):
        return []
    texts = _tool_texts(ctx)
    for text in texts:
        head = READ_HEAD.match(text)
        if head and head.group(1) == fault.path and fault.new in text[head.end() :]:
            return [(EDIT_FILE, {"path": fault.path, "old": fault.new, "new": fault.old})]
    probe = fault.probe()
    hit = re.compile(rf"^{re.escape(fault.path)}:(\d+): (.*)$", re.MULTILINE)
    for text in texts:
        for m in hit.finditer(text):
            if m.group(2) != probe[: len(m.group(2))]:
                continue
            line = int(m.group(1))
            args: dict[str, Any] = {
                "path": fault.path,
                "start_line": max(1, line - _WINDOW),
                "end_line": line + _WINDOW,
            }
            if (READ_FILE, args) not in made:
                return [(READ_FILE, args)]
    search: dict[str, Any] = {"pattern": re.escape(probe), "path": fault.path}
    if (SEARCH_CODE, search) in made:
        return []  # searched, found nothing readable: the workspace is not the task's
    return [(SEARCH_CODE, search)]
