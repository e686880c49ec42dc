"""The text-edit agent: how the simulator plays an agent that edits files through
*SEARCH/REPLACE blocks* in its replies instead of tools (aider's ``diff`` edit format).

Such an agent offers no tools. Its system prompt teaches the block format; a user message
carries the files "added to the chat" (each its path, then its whole text in a fence) and
another a repository map (``path:`` lines); the agent applies the blocks of a reply to the
files, and sends back what went wrong (a block that failed to match, lint or test output).
Each request is played afresh from the conversation after the prompt's worked examples (the
user's request, the replies and what came back, in whatever order the agent rebuilt them):

1. the file to change is not in the chat: name it and ask for it to be added (the agent adds
   it and asks again) — at most once;
2. it is: one SEARCH/REPLACE block of whole lines of that file. With ``PolicyConfig.oracle`` on
   a recognised eval task (``foreign_oracle.task_in``) the file is the fault's and the block
   its reference fix; otherwise a one-line comment above the line the task is most about
   (an edit that changes no behaviour);
3. anything after the edit (the agent's lint or test output, a block that did not match):
   a short closing answer that quotes the first line of it that looks like an error.

The texts never name a repository file outside the chat (the agent would offer to add it).
"""

from __future__ import annotations

import re
from collections import Counter

from agentload.endpoint.policy.base import BasePolicy
from agentload.endpoint.policy.foreign import task_ident
from agentload.endpoint.policy.foreign_oracle import task_in
from agentload.endpoint.policy.types import Conversation, Decision
from agentload.evals.tasks import Fault

__all__ = ["decide_editblocks", "is_editblock_agent"]

MARK = "*SEARCH/REPLACE block*"
"""What the system prompt of such an agent teaches."""
_FILES_PREFIX = "I have *added these files to the chat*"
_MAP_PREFIX = "Here are summaries of some files present in my git repository."
_SWITCHED = "I switched to a new code base."
"""The agent's message that ends its worked examples."""
_FIXED_USER = (
    "I am not sharing any files",
    "Don't try and edit any existing code",
    "Here are some READ ONLY files",
)
"""The starts of the agent's other fixed messages (what is not the user's request)."""
_REMINDER = "# *SEARCH/REPLACE block* Rules:"
"""Where the agent's reminder of the rules, appended to its last message, starts."""
_FILE_RE = re.compile(
    r"^(?P<path>[^\n`]+)\n(?P<fence>`{3,})[^\n]*\n(?P<body>.*?)^(?P=fence)$", re.M | re.S
)
_MAP_PATH = re.compile(r"^([\w.][\w./+-]*):$", re.M)
_ERROR = re.compile(r"error|fail|traceback|assert|E\d{3}|F\d{3}", re.I)
_COMMENT = {
    ".py": "#",
    ".sh": "#",
    ".rb": "#",
    ".pl": "#",
    ".yaml": "#",
    ".yml": "#",
    ".toml": "#",
    ".js": "//",
    ".ts": "//",
    ".c": "//",
    ".h": "//",
    ".go": "//",
    ".rs": "//",
    ".java": "//",
    ".cpp": "//",
    ".cc": "//",
}


def is_editblock_agent(conv: Conversation) -> bool:
    """Whether ``conv`` comes from an agent that edits through SEARCH/REPLACE blocks."""
    first = conv.messages[0] if conv.messages else {}
    return not conv.tools and first.get("role") == "system" and MARK in conv.text(0)


def _files(conv: Conversation) -> dict[str, str]:
    """The files added to the chat (the last such message), path → text."""
    for i in range(len(conv.messages) - 1, -1, -1):
        text = conv.text(i)
        if conv.messages[i].get("role") == "user" and text.startswith(_FILES_PREFIX):
            return {m["path"].strip(): m["body"] for m in _FILE_RE.finditer(text)}
    return {}


def _repo_files(conv: Conversation) -> list[str]:
    for i in range(len(conv.messages)):
        text = conv.text(i)
        if text.startswith(_MAP_PREFIX):
            return _MAP_PATH.findall(text)
    return []


def _own(conv: Conversation) -> list[tuple[str, str]]:
    """(role, text) of the conversation after the system prompt's worked examples (which end
    with the agent's "I switched to a new code base" and its "Ok."), the rules' reminder cut
    off its newest message."""
    start = 1
    for i in range(len(conv.messages)):
        if conv.messages[i].get("role") == "user" and conv.text(i).startswith(_SWITCHED):
            start = i + 2
    out = []
    for i in range(start, len(conv.messages)):
        text = conv.text(i)
        cut = text.find(_REMINDER)
        out.append((str(conv.messages[i].get("role")), text[:cut] if cut >= 0 else text))
    return out


def _task(own: list[tuple[str, str]]) -> str:
    """The user's request: its first message that is none of the agent's fixed ones."""
    fixed = (_MAP_PREFIX, _FILES_PREFIX, *_FIXED_USER)
    return next((t for r, t in own if r == "user" and not t.startswith(fixed)), "")


def _pick(candidates: list[str], task: str) -> str | None:
    """The file a task is most about: one it names, else the best match of its words."""
    named = [x for x in candidates if x.rsplit("/", 1)[-1] in task]
    words = {w.lower() for w in re.findall(r"[A-Za-z_]{3,}", task)}

    def score(x: str) -> tuple[bool, int, bool, str]:
        stem = x.rsplit("/", 1)[-1].rsplit(".", 1)[0].lower()
        return ("test" in x, -sum(w in stem for w in words), not x.endswith(".py"), x)

    pool = named or sorted(candidates, key=score)
    return pool[0] if pool else None


def _whole_lines(text: str, part: str) -> str | None:
    """The whole lines of ``text`` that hold ``part`` (None when it is not there)."""
    at = text.find(part) if part else -1
    if at < 0:
        return None
    start = text.rfind("\n", 0, at) + 1
    end = text.find("\n", at + len(part))
    return text[start : len(text) if end < 0 else end]


def _fix_block(text: str, fault: Fault) -> tuple[str, str] | None:
    """The SEARCH and REPLACE texts (whole lines) that undo ``fault`` in ``text``."""
    lines = _whole_lines(text, fault.new)
    return None if lines is None else (lines, lines.replace(fault.new, fault.old, 1))


def _note_block(path: str, text: str, ident: str | None) -> tuple[str, str] | None:
    """A one-line comment above the line about ``ident`` (else the first definition)."""
    mark = _COMMENT.get("." + path.rsplit(".", 1)[-1] if "." in path else "", "#")
    lines = text.splitlines()
    once = {ln for ln, n in Counter(lines).items() if n == 1}
    pats = [rf"\b(def|class|function|fn|func)\s+{re.escape(ident)}\b"] if ident else []
    pats += [r"^\s*(def|class|function|fn|func)\s+\w", r"\S"]
    for pat in pats:
        hit = next((ln for ln in lines if ln in once and re.search(pat, ln)), None)
        if hit is not None:
            indent = hit[: len(hit) - len(hit.lstrip())]
            about = f"`{ident}`" if ident else "this code"
            return hit, f"{indent}{mark} Reviewed for the reported behaviour of {about}.\n{hit}"
    return None


def _block(path: str, search: str, replace: str) -> str:
    lang = "python" if path.endswith(".py") else ""
    return (
        f"{path}\n```{lang}\n<<<<<<< SEARCH\n{search}\n=======\n{replace}\n>>>>>>> REPLACE\n```\n"
    )


def _first_error(text: str) -> str | None:
    for line in text.splitlines():
        if _ERROR.search(line) and len(line.strip()) > 8:
            return line.strip()[:160]
    return None


def decide_editblocks(policy: BasePolicy, conv: Conversation) -> Decision:
    """The reply to a text-edit agent's request (see the module docstring)."""
    own = _own(conv)
    task = _task(own)
    edited = any(r == "assistant" and "<<<<<<< SEARCH" in t for r, t in own)
    if edited:
        last = own[-1][1] if own and own[-1][0] == "user" else ""
        return _answer(_closing(last))
    files = _files(conv)
    eval_task = task_in(task) if policy.config.oracle else None
    if eval_task is not None:
        target: str | None = eval_task.fault.path
    else:
        target = _pick(list(files) or _repo_files(conv), task)
    if target is None:
        return _answer("I could not find the code this is about in the files you shared.")
    if target not in files:
        asked = any(r == "assistant" and target in t for r, t in own)
        if asked:
            return _answer("I cannot make the change without that file's contents.")
        return _answer(
            f"The change belongs in `{target}`. Please add it to the chat so I can edit it:\n\n"
            f"{target}\n"
        )
    text = files[target]
    ident = task_ident(task)
    ident = ident if ident and re.search(rf"\b{re.escape(ident)}\b", text) else None
    block = _fix_block(text, eval_task.fault) if eval_task is not None else None
    if block is None:
        block = _note_block(target, text, ident)
    if block is None:
        return _answer("The file is empty; there is nothing to change in it.")
    why = (
        f"The faulty line is in `{target}`: it reads `{eval_task.fault.probe()}`; the fix "
        "restores the intended expression."
        if eval_task is not None
        else f"The behaviour the request describes comes from `{target}`; I mark the code "
        "it is about so that the follow-up change has an anchor."
    )
    return _answer(f"{why}\n\n{_block(target, *block)}")


def _closing(feedback: str) -> str:
    if "failed to match" in feedback:
        return "The edit did not apply cleanly; I will leave the file as it is."
    err = _first_error(feedback)
    if err is None:
        return "The change is in place."
    return f"The change is in place. What came back still shows: `{err}` — that predates it."


def _answer(text: str) -> Decision:
    return Decision([text], [], lambda n: [], "answer")
