"""A foreign agent's conversation read as a session: its task, where it works, what it did.

Any product's request holds the same things in its own words: ``read_session`` finds them.

* **task** — the first user text once the product's wrappers are stripped (Claude Code's
  ``<system-reminder>`` blocks, Codex's ``<environment_context>``, Gemini CLI's
  ``<session_context>``...), a context message aside (Qwen Code's "This is the Qwen Code. We
  are setting up the context for our chat.", which its model acknowledges before the task);
* **cwd** — the working directory the agent states: Claude Code's "Primary working directory:
  /path", Codex's ``<cwd>/path</cwd>``, Qwen Code's "I'm currently working in the directory:
  /path", Gemini CLI's "Workspace Directories:" list (its first), or any "working directory:
  /path" (opencode's; mini-swe-agent states none: paths stay relative to where it runs);
* **finish** — a "finish by running X" convention in the instructions (mini-swe-agent's
  ``echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT``), found by a regex, not by product;
* **test command** — a backticked test command the task names;
* **steps** — every tool call made so far with its result text (absolute paths under the cwd
  made relative, so ``facts.extract`` reads them), and the ``Facts`` of those results;
* **subtask** — the delegation text this conversation was started with, when it is one the
  foreign policy wrote (``SUBTASK``): then the conversation is a sub-agent's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import orjson

from agentload.endpoint.policy.facts import Facts, extract
from agentload.endpoint.policy.types import Conversation, call_of
from agentload.tokenizer import _content_text

__all__ = ["SUBTASK", "Session", "Step", "as_json", "read_session", "result_body"]

SUBTASK = "Sub-task for a helper agent"
"""How every delegation text the foreign policy writes starts (what marks a sub-agent)."""

_WRAPPERS = re.compile(
    r"<(system-reminder|environment_context|user_instructions|permissions instructions|"
    r"skills_instructions|INSTRUCTIONS|turn_aborted|user_shell_command|session_context)>"
    r".*?</\1>",
    re.DOTALL,
)
_PRIMER = re.compile(r"\AThis is the [^.\n]{1,40}\. We are setting up the context for our chat\.")
"""A context message a product sends before the task (Qwen Code's)."""
_CWD = (
    re.compile(r"Primary working directory: (/\S+)"),
    re.compile(r"<cwd>\s*(/[^<\n]+?)\s*</cwd>"),
    re.compile(r"(?:current |working )director(?:y|ies)(?: is)?:?\s+`?(/[\w.\-/]+)", re.I),
    re.compile(
        r"(?:working in the|workspace) director(?:y|ies)\**:?\**\s+(?:-\s+)?`?(/[\w.\-/]+)", re.I
    ),
)
_FINISH = re.compile(
    r"(?:finish|submit|complete|end|done)\b[^.\n]{0,80}?\b(?:by|with)\s+(?:issuing|running|"
    r"executing|calling|using)\b[^`\n]{0,40}`([^`\n]{3,120})`",
    re.IGNORECASE,
)
_TEST_CMD = re.compile(
    r"`((?:[A-Z_]+=\S*\s+)*(?:python3?|pytest|py\.test|tox|make|npm|yarn|pnpm|go|cargo|uv|bash|sh|\./)[^`\n]*"
    r"test[^`\n]*)`"
)


_EXEC_HEAD = re.compile(
    r"\A(?:Chunk ID|Wall time|Process|Command|Exit code)[^\n]*\n(?:[^\n]*\n){0,7}?Output:\n"
)


def as_json(text: str) -> dict[str, Any]:
    """``text`` parsed as a JSON object, or empty."""
    try:
        obj = orjson.loads(text)
    except orjson.JSONDecodeError:
        return {}
    return obj if isinstance(obj, dict) else {}


def result_body(text: str) -> str:
    """What a command printed, without the product's framing: Codex's ``exec_command`` header
    (``Chunk ID``... ``Output:``), mini-swe-agent's ``{"returncode", "output"}``."""
    head = _EXEC_HEAD.match(text)
    if head:
        return text[head.end() :]
    if text.startswith("{") and '"output"' in text:
        out = as_json(text).get("output")
        if isinstance(out, str):
            return out
    return text


@dataclass
class Step:
    """One tool call of the conversation and what came back (``None``: no result yet)."""

    name: str
    args: dict[str, Any]
    call_id: str
    result: str | None = None
    at: int = -1
    """The index of the result's message."""


@dataclass
class Session:
    """What a foreign agent's conversation holds (see the module docstring)."""

    task: str
    cwd: str
    finish: str | None
    test_command: str | None
    steps: list[Step]
    subtask: str | None
    facts: Facts
    last: Facts
    texts: str = ""
    """Every system and user text of the conversation (instructions included)."""
    answers: list[str] = field(default_factory=list)
    """User and tool texts after the first delegation: sub-agents' answers, notifications."""

    def rel(self, text: str) -> str:
        """``text`` with the working directory's absolute paths made relative."""
        return text.replace(self.cwd.rstrip("/") + "/", "") if self.cwd else text

    def path(self, rel: str) -> str:
        """A workspace path as a tool takes it: absolute when the cwd is known."""
        if not self.cwd or rel.startswith("/"):
            return rel
        return f"{self.cwd.rstrip('/')}/{rel.removeprefix('./')}"


def _task(conv: Conversation, users: list[int]) -> str:
    for i in users:
        text = _WRAPPERS.sub("", conv.text(i)).strip()
        if text and not _PRIMER.match(text):
            return text
    return ""


def _subtask(task: str) -> str | None:
    """The delegation text ``task`` carries (at a line start: a product may frame it)."""
    at = task.find(SUBTASK)
    return task[at:] if at == 0 or (at > 0 and task[at - 1] == "\n") else None


def _steps(conv: Conversation) -> list[Step]:
    steps: list[Step] = []
    by_id: dict[str, Step] = {}
    for i, m in enumerate(conv.messages):
        if m.get("role") == "assistant":
            for tc in m.get("tool_calls") or ():
                name, args = call_of(tc)
                step = Step(name, args, str(tc.get("id") or ""))
                steps.append(step)
                by_id[step.call_id] = step
        elif m.get("role") == "tool":
            done = by_id.get(str(m.get("tool_call_id") or ""))
            if done is not None:
                done.result, done.at = result_body(_content_text(m.get("content"))), i
    return steps


def read_session(conv: Conversation) -> Session:
    """The session of a foreign agent's conversation (see the module docstring)."""
    users = [i for i, m in enumerate(conv.messages) if m.get("role") == "user"]
    said = [i for i, m in enumerate(conv.messages) if m.get("role") in ("system", "developer")]
    texts = "\n".join(conv.text(i) for i in sorted(said + users))
    cwd = next((m.group(1) for rx in _CWD for m in [rx.search(texts)] if m), "")
    task = _task(conv, users)
    finish = _FINISH.search(texts)
    test = _TEST_CMD.search(task)
    steps = _steps(conv)
    session = Session(
        task=task,
        cwd=cwd.rstrip("/"),
        finish=finish.group(1).strip() if finish else None,
        test_command=test.group(1) if test else None,
        steps=steps,
        subtask=_subtask(task),
        facts=Facts(),
        last=Facts(),
        texts=texts,
    )
    for k, step in enumerate(steps):
        if step.result is not None:
            f = extract(session.rel(step.result), f"{conv.mids[step.at]}@{session.cwd}")
            session.facts.merge(f)
            if k == len(steps) - 1:
                session.last = f
    session.facts = session.facts.dedupe()
    first_call = next((i for i, m in enumerate(conv.messages) if m.get("tool_calls")), None)
    if first_call is not None:
        session.answers = [
            conv.text(i)
            for i in range(first_call, len(conv.messages))
            if conv.messages[i].get("role") == "user"
        ]
    return session
