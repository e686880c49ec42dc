"""The agent CLIs no earlier test named, driven like ``real_agents``' (pinned by
``scripts/agents.sh``, headless, against a scripted model through the proxy): Qwen Code
(Chat Completions; its sub-agents and its headerless background *forks*) and opencode (Chat
Completions through ``@ai-sdk/openai-compatible``; its ``task`` sub-agents and its title
generator, a side call). What each request looked like was read from the binaries themselves
(issue 48)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from real_agents import Ran, _env, _run
from scripted_upstream import Asked, Call, Turn

QWEN_CODE = "qwen-code@0.15.10"
OPENCODE = "opencode@1.18.33"


def _joined(asked: Asked) -> str:
    return "\n".join(asked.texts())


def _last_user(asked: Asked) -> str:
    texts = asked.user_texts()
    return texts[-1] if texts else ""


# -- Qwen Code --------------------------------------------------------------------------------------
def run_qwen_code(exe: Path, base_url: str, work: Path, home: Path, key: str, tag: str,
                  model: str = "qwen3-coder", timeout: float = 240) -> Ran:  # fmt: skip
    """``qwen PROMPT --yolo`` (one-shot, every tool approved) in ``work`` against
    ``base_url`` (with ``/v1``): OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL."""
    env = _env(home, OPENAI_BASE_URL=base_url, OPENAI_API_KEY=key, OPENAI_MODEL=model)
    argv = [str(exe), f"TASK-MAIN[{tag}]: fix the bug in calc.py", "--yolo"]
    argv += ["--auth-type", "openai", "--max-session-turns", "20"]
    return _run(argv, work, env, timeout)


def _qwen_cwd(asked: Asked) -> str:
    m = re.search(r"currently working in the directory: (/\S+)", _joined(asked))
    return m.group(1) if m else "."


def qwen_script(asked: Asked) -> Turn:
    """Qwen Code's main agent starts a ``general-purpose`` sub-agent and a fork (an ``agent``
    call without ``subagent_type``) in one turn (a fork alone when its task's tag starts with
    ``fork``), then reads, edits and runs ``calc.py``; the
    sub-agent reads ``a.txt``, the fork ``b.txt``. Its other requests (a memory check, a side
    question) get a line of text."""
    names = asked.calls_made()
    last = _last_user(asked)
    fork = re.search(r"Directive: FORKTASK\[\w+\]: read the file (\S+)", _joined(asked))
    if fork and "<fork-boilerplate>" in _joined(asked):
        if not _read_after_fork(asked):
            return Turn("", (Call("read_file", {"file_path": fork.group(1)}),))
        return Turn("Scope: read b.txt\nResult: the first word is beta.")
    sub = re.search(r"SUBTASK\[\w+\]: read the file (\S+)", asked.first_user_text() + last)
    if sub and not any("TASK-MAIN" in t for t in asked.user_texts()):
        if "read_file" not in names:
            return Turn("", (Call("read_file", {"file_path": sub.group(1)}),))
        return Turn("The first word is alpha.")
    m = re.search(r"TASK-MAIN\[(\w+)\]", _joined(asked))
    if not m or "Managed memory" in last or "TASK-MAIN" not in " ".join(asked.user_texts()):
        return Turn("ok")
    tag, work = m.group(1), _qwen_cwd(asked)
    if "agent" not in names:
        sub_task = f"SUBTASK[{tag}]: read the file {work}/a.txt and report its first word"
        fork_task = f"FORKTASK[{tag}]: read the file {work}/b.txt and report its first word"
        forked = Call("agent", {"description": "read b", "prompt": fork_task})
        if tag.startswith("fork"):  # a fork alone: its first request races the parent's next
            return Turn("A fork will read b.txt.", (forked,))
        return Turn("Two helpers will read the data files.", (
            Call("agent", {"description": "read a", "prompt": sub_task,
                           "subagent_type": "general-purpose"}),
            forked,
        ))  # fmt: skip
    for step in (
        Call("read_file", {"file_path": f"{work}/calc.py"}),
        Call(
            "edit", {"file_path": f"{work}/calc.py", "old_string": "a - b", "new_string": "a + b"}
        ),
        Call("run_shell_command", {"command": "python3 calc.py"}),
    ):
        if step.name not in names:
            return Turn("", (step,))
    return Turn("Fixed: add now adds.")


def _read_after_fork(asked: Asked) -> bool:
    """Whether the fork's own ``read_file`` already came back (after its directive)."""
    messages = asked.body.get("messages") or []
    seen = False
    for m in messages:
        text = json.dumps(m.get("content"))
        if m.get("role") == "user" and "<fork-boilerplate>" in text:
            seen = True
        if seen and m.get("role") == "tool":
            return True
    return False


# -- opencode -----------------------------------------------------------------------------------------
def run_opencode(exe: Path, base_url: str, work: Path, home: Path, key: str, tag: str,
                 model: str = "m", timeout: float = 240) -> Ran:  # fmt: skip
    """``opencode run --pure PROMPT`` in ``work`` (no external plugins: nothing fetched from
    npm), its model a custom provider at ``base_url`` (with ``/v1``) through
    ``@ai-sdk/openai-compatible`` (built in), given in ``OPENCODE_CONFIG_CONTENT`` (a config
    folder would have it install its plugin packages from npm)."""
    provider = {"npm": "@ai-sdk/openai-compatible", "name": "rec",
                "options": {"baseURL": base_url, "apiKey": key}, "models": {model: {"name": model}}}  # fmt: skip
    doc = {"provider": {"rec": provider}, "model": f"rec/{model}", "autoupdate": False,
           "share": "disabled"}  # fmt: skip
    env = _env(
        home,
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="true",
        OPENCODE_DISABLE_DEFAULT_PLUGINS="true",
        OPENCODE_DISABLE_MODELS_FETCH="true",
    )
    env["OPENCODE_CONFIG_CONTENT"] = json.dumps(doc)
    argv = [str(exe), "run", "--pure", f"TASK-MAIN[{tag}]: fix the bug in calc.py"]
    return _run(argv, work, env, timeout)


def opencode_script(asked: Asked) -> Turn:
    """opencode's main agent delegates to a ``general`` sub-agent (``task``), then reads,
    edits and runs ``calc.py``; the sub-agent reads ``a.txt``; its title generator gets a
    title."""
    names = asked.calls_made()
    system = json.dumps((asked.body.get("messages") or [{}])[0].get("content"))
    if "title generator" in system:
        return Turn("Fix calc add")
    sub = re.search(r"SUBTASK\[\w+\]: read the file (\S+)", asked.first_user_text())
    if sub:
        if "read" not in names:
            return Turn("", (Call("read", {"filePath": sub.group(1)}),))
        return Turn("The first word is alpha.")
    m = re.search(r"TASK-MAIN\[(\w+)\]", asked.first_user_text())
    if not m:
        return Turn("ok")
    tag = m.group(1)
    work = re.search(r"Working directory: (\S+)", _joined(asked))
    root = work.group(1) if work else "."
    if "task" not in names:
        prompt = f"SUBTASK[{tag}]: read the file {root}/a.txt and report its first word"
        return Turn("A helper reads the data file.", (Call("task", {
            "description": "read a", "prompt": prompt, "subagent_type": "general"}),))  # fmt: skip
    for step in (
        Call("read", {"filePath": f"{root}/calc.py"}),
        Call("edit", {"filePath": f"{root}/calc.py", "oldString": "a - b", "newString": "a + b"}),
        Call("bash", {"command": "python3 calc.py", "description": "Run calc.py"}),
    ):
        if step.name not in names:
            return Turn("", (step,))
    return Turn("Fixed: add now adds.")
