"""Gemini CLI (``gemini-cli@0.61.0``) driven like ``new_agents``' agents: headless, against a
scripted model (``scripted_upstream``'s Gemini API) through the proxy, made to delegate.

What its requests look like (read from the binary, issue 48): every one is ``POST
/v1beta/models/{model}:streamGenerateContent?alt=sse`` with ``x-goog-api-key`` and no header
that names a session. ``invoke_agent {agent_name, prompt}`` runs a built-in sub-agent in the
foreground (``generalist``, ``codebase_investigator``, ``cli_help``); the ``generalist``'s
first request is its own ``systemInstruction`` (the main one's, rendered non-interactive, plus
its "Important Rules") and one user text, the ``prompt`` as it was given; it finishes only
with a ``complete_task {result: {response}}`` call, whose answer goes back to the parent as
the ``invoke_agent`` result. Function calls in the history carry ids Gemini CLI makes up
(``read_file_1796593661746_0``; ``#0-0`` ones in a sub-agent). With the next-speaker check on
(``model.skipNextSpeakerCheck: false``), a final text answer is followed by a side call: a
non-streamed ``:generateContent`` to ``gemini-3-flash-preview``, no ``systemInstruction``, the
main agent's history (its call ids prefixed with the tool's name, ``read_file__read_file_…``)
and a last user text asking who speaks next, answered in JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from real_agents import Ran, _env, _run
from scripted_upstream import Asked, Call, Turn

GEMINI_CLI = "gemini-cli@0.61.0"
CHECK = "determine who should logically speak next"
"""The next-speaker check's question (Gemini CLI's ``CHECK_PROMPT``)."""
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "model": {"skipNextSpeakerCheck": False},
    "tools": {"core": ["read_file", "replace", "run_shell_command", "invoke_agent",
                       "complete_task"]},
}  # fmt: skip
"""API-key auth, nothing sent home, the next-speaker check on (a side call), and only the tools
the script uses: ``complete_task`` must be listed too, or a sub-agent cannot finish."""


def run_gemini_cli(exe: Path, root_url: str, work: Path, home: Path, key: str, tag: str,
                   model: str = "agentload-sim", timeout: float = 240,
                   settings: dict[str, Any] | None = None) -> Ran:  # fmt: skip
    """``gemini -p PROMPT --yolo`` in ``work`` against ``root_url`` (GOOGLE_GEMINI_BASE_URL:
    no version), with ``settings`` (default ``SETTINGS``) in ``home`` and the workspace
    trusted."""
    env = _env(home, GOOGLE_GEMINI_BASE_URL=root_url, GEMINI_API_KEY=key)
    env["GEMINI_CLI_TRUST_WORKSPACE"] = "true"
    (home / ".gemini").mkdir(parents=True, exist_ok=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings or SETTINGS))
    argv = [str(exe), "-p", f"TASK-MAIN[{tag}]: fix the bug in calc.py", "--yolo", "-m", model]
    return _run(argv, work, env, timeout)


def _workspace(asked: Asked) -> str:
    m = re.search(r"Workspace Directories:\**\s*- (/\S+)", "\n".join(asked.texts()))
    return m.group(1) if m else "."


def gemini_script(asked: Asked) -> Turn:
    """Gemini CLI's main agent hands reading ``a.txt`` to the ``generalist`` sub-agent
    (``invoke_agent``), then reads, edits (``replace``) and runs ``calc.py``; the sub-agent
    reads its file and finishes with ``complete_task``; the next-speaker check hears that the
    user speaks next."""
    users = asked.user_texts()
    names = asked.calls_made()
    if users and CHECK in users[-1]:
        return Turn('{"reasoning": "The task is done.", "next_speaker": "user"}')
    sub = re.match(r"SUBTASK\[\w+\]: read the file (\S+)", asked.first_user_text())
    if sub:
        if "read_file" not in names:
            return Turn("", (Call("read_file", {"file_path": sub.group(1)}),))
        return Turn("", (Call("complete_task", {"result": {"response": "alpha"}}),))
    m = re.search(r"TASK-MAIN\[(\w+)\]", "\n".join(users))
    if not m:
        return Turn("ok")
    tag, work = m.group(1), _workspace(asked)
    if "invoke_agent" not in names:
        task = f"SUBTASK[{tag}]: read the file {work}/a.txt and report its first word"
        return Turn("A helper reads a.txt.", (Call("invoke_agent", {
            "agent_name": "generalist", "prompt": task}),))  # fmt: skip
    edit = {"old_string": "a - b", "new_string": "a + b", "instruction": "add, not subtract"}
    for step in (
        Call("read_file", {"file_path": f"{work}/calc.py"}),
        Call("replace", {"file_path": f"{work}/calc.py", **edit}),
        Call("run_shell_command", {"command": "python3 calc.py", "description": "Run calc.py"}),
    ):
        if step.name not in names:
            return Turn("", (step,))
    return Turn("Fixed: add now adds.")
