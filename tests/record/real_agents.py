"""The real agents of tests/record/test_real_agents.py: where ``scripts/agents.sh`` installed
them, how each is pointed at a base URL, and the scripted "model" each one is driven by.

Each script makes its agent do a small real bug fix in a scratch repository: ``calc.py``'s
``add`` subtracts; the agent delegates reading ``a.txt`` and ``b.txt`` to two sub-agents (where
the agent has sub-agents), edits ``calc.py``, runs it, and finishes. Every marker a script keys
on carries the run's tag, so several runs can share one upstream and one proxy.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from scripted_upstream import Asked, Call, Turn

sys.path.insert(0, str(Path(__file__).parents[1]))  # ready_file
from ready_file import skip_or_fail, wait_for_ready_file

REQUIRE_AGENTS = "AGENTLOAD_REQUIRE_AGENTS"
"""CI sets it: a real-agent test that would skip fails instead."""

REPO = Path(__file__).resolve().parents[2]
CLAUDE_CODE = ("claude-code@2.1.332", "claude-code@2.1.197")
CODEX = ("codex@0.171.0", "codex@0.169.0")
MINI_SWE_AGENT = "mini-swe-agent@2.4.6"
AIDER = "aider@0.86.2"
CALC = "def add(a, b):\n    return a - b\n\n\nprint(add(2, 3))\n"


def _wait_for_install() -> str | None:
    """When CI installs the agents in the background (AGENTLOAD_AGENTS_READY_FILE names the
    file its exit code will be written to), wait for it, bounded by AGENTLOAD_AGENTS_WAIT_S
    (default 900 s). ``None`` when it finished well, else why not."""
    return wait_for_ready_file(
        "AGENTLOAD_AGENTS_READY_FILE", "AGENTLOAD_AGENTS_WAIT_S", 900,
        "the agents' install", "scripts/agents.sh install", "install.err",
    )  # fmt: skip


def _skip(why: str) -> NoReturn:
    skip_or_fail(why, REQUIRE_AGENTS)


def agent_exe(spec: str) -> Path:
    """The executable ``scripts/agents.sh`` installed for ``spec`` (``name@version``); skips
    when it is not installed, or fails under AGENTLOAD_REQUIRE_AGENTS=1."""
    why = _wait_for_install()
    if why is not None:
        _skip(why)
    proc = subprocess.run(
        ["bash", str(REPO / "scripts" / "agents.sh"), "path", spec],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode == 0:
        return Path(proc.stdout.strip())
    _skip((proc.stderr.strip().splitlines() or [f"scripts/agents.sh path {spec} failed"])[-1])


def scratch_repo(path: Path) -> Path:
    """The repository an agent fixes: ``calc.py`` with the bug, ``a.txt``, ``b.txt``, git."""
    path.mkdir(parents=True)
    (path / "calc.py").write_text(CALC)
    (path / "a.txt").write_text("alpha beta\n")
    (path / "b.txt").write_text("gamma delta\n")
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    return path


def fixed(path: Path) -> bool:
    """Whether the agent's edit landed."""
    return "return a + b" in (path / "calc.py").read_text()


@dataclass
class Ran:
    """One agent run: its exit code and output."""

    returncode: int
    stdout: str
    stderr: str

    def check(self) -> None:
        assert self.returncode == 0, (self.returncode, self.stdout[-2000:], self.stderr[-3000:])


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> Ran:
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def _env(home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {**keep, "HOME": str(home), "NO_COLOR": "1", **extra}


# -- Claude Code (Anthropic Messages) ---------------------------------------------------------------
def run_claude_code(
    exe: Path,
    root_url: str,
    work: Path,
    home: Path,
    key: str,
    tag: str,
    timeout: float = 240,
    model: str = "claude-sonnet-4-6",
    tools: str = "Read,Edit,Bash,Agent",
) -> Ran:
    """``claude -p`` in ``work`` against ``root_url`` (ANTHROPIC_BASE_URL: no ``/v1``), with
    only ``tools`` allowed and at most 12 turns."""
    env = _env(home, ANTHROPIC_BASE_URL=root_url, ANTHROPIC_API_KEY=key)
    env["DISABLE_AUTOUPDATER"] = "1"
    env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] = "1"
    argv = [str(exe), "-p", f"TASK-MAIN[{tag}]: fix the bug in calc.py", "--model", model]
    argv += ["--allowedTools", tools, "--tools", tools, "--max-turns", "12"]
    argv += ["--permission-mode", "acceptEdits"]
    return _run(argv, work, env, timeout)


def claude_code_script(asked: Asked) -> Turn:
    """Claude Code's main agent delegates to two ``Agent`` sub-agents at once, reads, edits and
    runs ``calc.py``; each sub-agent reads its file. Any other request (a title, a summary)
    gets a line of text."""
    first = asked.first_user_text()
    names = asked.calls_made()
    tools = {t.get("name") for t in asked.body.get("tools") or ()}
    m = re.search(r"TASK-MAIN\[(\w+)\]", first)
    if m and "Agent" in tools and "<session>" not in first:
        tag, work = m.group(1), _cwd(asked)
        if not names:
            return Turn(
                "Two helpers will read the data files.",
                tuple(
                    Call(
                        "Agent",
                        {
                            "description": f"read {f}",
                            "prompt": f"SUBTASK[{tag}]: read the file {work}/{f} and report its first word",
                            "subagent_type": "general-purpose",
                            "run_in_background": False,
                        },
                    )
                    for f in ("a.txt", "b.txt")
                ),
            )
        for step in (
            Call("Read", {"file_path": f"{work}/calc.py"}),
            Call(
                "Edit",
                {"file_path": f"{work}/calc.py", "old_string": "a - b", "new_string": "a + b"},
            ),
            Call("Bash", {"command": "python3 calc.py", "description": "Run calc.py"}),
        ):
            if step.name not in names:
                return Turn("", (step,))
        return Turn("Fixed: add now adds.")
    sub = re.search(r"SUBTASK\[\w+\]: read the file (\S+)", first)
    if sub:
        if "Read" not in names:
            return Turn("", (Call("Read", {"file_path": sub.group(1)}),))
        return Turn("The first word is alpha.")
    return Turn("ok")


def _cwd(asked: Asked) -> str:
    """The working directory Claude Code states in its environment reminder."""
    m = re.search(r"Primary working directory: (\S+)", "\n".join(asked.texts()))
    return m.group(1) if m else "."


# -- Codex CLI (OpenAI Responses) ----------------------------------------------------------------
def run_codex(
    exe: Path,
    base_url: str,
    work: Path,
    home: Path,
    key: str,
    tag: str,
    features: tuple[str, ...] = (),
    provider: bool = True,
    timeout: float = 240,
) -> Ran:
    """``codex exec`` in ``work`` against ``base_url`` (with ``/v1``). Codex ignores
    OPENAI_BASE_URL: the URL goes in a ``model_providers`` entry (``provider``; Codex then
    speaks plain HTTP) or in ``-c openai_base_url=`` (Codex then tries Responses over a
    WebSocket first, 5 times, before it falls back on HTTP). ``features``: Codex features to
    turn on (``multi_agent_v2``: its second sub-agent tools)."""
    env = _env(home, OPENAI_API_KEY=key)
    argv = [str(exe), "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    if provider:
        for k, v in (("name", "rec"), ("base_url", base_url), ("env_key", "OPENAI_API_KEY")):
            argv += ["-c", f"model_providers.rec.{k}={v}"]
        argv += ["-c", "model_providers.rec.wire_api=responses", "-c", "model_provider=rec"]
    else:
        argv += ["-c", f"openai_base_url={base_url}"]
    argv += ["-m", "gpt-5"]
    for feature in features:
        argv += ["-c", f"features.{feature}=true"]
    argv += [f"TASK-MAIN[{tag}]: fix the bug in calc.py"]
    return _run(argv, work, env, timeout)


def codex_meta(asked: Asked) -> dict[str, object]:
    try:
        meta = json.loads(asked.headers.get("x-codex-turn-metadata", "{}"))
    except json.JSONDecodeError:
        return {}
    return meta if isinstance(meta, dict) else {}


def codex_script(asked: Asked) -> Turn:
    """Codex's root thread spawns two sub-agents (``spawn_agent``; the first forks the root's
    history), waits for them, fixes ``calc.py`` with ``exec_command`` and finishes; each
    sub-agent ``cat``s its file and answers."""
    names = asked.calls_made()
    text = "\n".join(asked.texts())
    meta = codex_meta(asked)
    root = meta.get("thread_source") != "subagent"
    tag = (re.findall(r"TASK-MAIN\[(\w+)\]", text) or ["x"])[-1]
    ns = _namespace_of(asked, "spawn_agent")
    if root:
        if "spawn_agent" not in names:
            return Turn("", tuple(
                Call("spawn_agent", _spawn_args(asked, tag, f, fork=f == "a.txt"), ns)
                for f in ("a.txt", "b.txt")
            ))  # fmt: skip
        waits = names.count("wait_agent")
        if "exec_command" not in names and _spawn_params(asked).get("task_name"):
            # multi_agent_v2: the sub-agents' answers come as messages; wait for both
            if text.count("FINAL_ANSWER") < 2 and waits < 4:
                return Turn("", (Call("wait_agent", {"timeout_ms": 30000}, ns),))
        elif "exec_command" not in names:
            # multi_agent_v1: wait for each sub-agent in turn (a wait ends at the first done)
            ids = re.findall(r'"agent_id"\s*:\s*"([^"]+)"', "\n".join(asked.results()))
            if waits < len(ids):
                wait = {"targets": [ids[waits]], "timeout_ms": 30000}
                return Turn("", (Call("wait_agent", wait, ns),))
        if "exec_command" not in names:
            return Turn(
                "",
                (
                    Call(
                        "exec_command",
                        {"cmd": "sed -i 's/a - b/a + b/' calc.py && python3 calc.py"},
                    ),
                ),
            )
        return Turn("Fixed: add now adds.")
    if "exec_command" not in names:
        f = (re.findall(r"run cat (\w+\.txt)", "\n".join(asked.user_texts())) or ["a.txt"])[-1]
        return Turn("", (Call("exec_command", {"cmd": f"cat {f}"}),))
    return Turn("The first word is alpha.")


def _spawn_params(asked: Asked) -> dict[str, object]:
    """The parameters ``spawn_agent`` takes in this request's tools."""
    for tool in asked.body.get("tools") or ():
        for t in tool.get("tools") or ():
            if t.get("name") == "spawn_agent":
                props = (t.get("parameters") or {}).get("properties") or {}
                return props if isinstance(props, dict) else {}
    return {}


def _spawn_args(asked: Asked, tag: str, file: str, fork: bool) -> dict[str, object]:
    """``spawn_agent``'s arguments: multi_agent_v1 takes ``message`` and ``fork_context``;
    multi_agent_v2 ``task_name``, ``message`` and ``fork_turns``."""
    message = f"SUBTASK[{tag}]: run cat {file} and report its first word"
    if "task_name" in _spawn_params(asked):
        name = "read_" + file.split(".")[0]
        return {"task_name": name, "message": message, "fork_turns": "all" if fork else "none"}
    return {"message": message, "fork_context": True} if fork else {"message": message}


def _namespace_of(asked: Asked, function: str) -> str:
    """The namespace tool that offers ``function`` (``multi_agent_v1``; ``collaboration`` with
    Codex's ``multi_agent_v2`` feature)."""
    for tool in asked.body.get("tools") or ():
        if tool.get("type") == "namespace" and any(
            t.get("name") == function for t in tool.get("tools") or ()
        ):
            return str(tool.get("name"))
    return "multi_agent_v1"


# -- mini-swe-agent (Chat Completions through LiteLLM) ----------------------------------------------
def run_mini_swe_agent(
    exe: Path, base_url: str, work: Path, home: Path, key: str, tag: str, timeout: float = 240
) -> Ran:
    """``mini -y --exit-immediately`` in ``work`` against ``base_url`` (with ``/v1``), LiteLLM
    kept offline (its model cost map from the package, no cost tracking)."""
    env = _env(
        home,
        OPENAI_API_KEY=key,
        MSWEA_CONFIGURED="true",
        MSWEA_COST_TRACKING="ignore_errors",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        MSWEA_GLOBAL_CONFIG_DIR=str(home / "mswea"),
    )
    argv = [str(exe), "-m", "openai/scripted", "-t", f"TASK-MAIN[{tag}]: fix add in calc.py"]
    argv += ["-y", "--exit-immediately", "-c", "mini.yaml"]
    argv += ["-c", f"model.model_kwargs.api_base={base_url}", "-o", str(home / "traj.json")]
    return _run(argv, work, env, timeout)


def mini_swe_agent_script(asked: Asked) -> Turn:
    """mini-swe-agent's first answer has no tool call (a format error: it drops the answer and
    asks again), then it fixes and runs ``calc.py`` with ``bash`` and submits."""
    messages = asked.body.get("messages") or []
    if len(messages) <= 2:
        return Turn("Let me think about calc.py first.")
    if not asked.calls_made():
        return Turn("Fixing.", (Call("bash", {"command": "sed -i 's/a - b/a + b/' calc.py && python3 calc.py"}),))  # fmt: skip
    return Turn("Done.", (Call("bash", {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}),))
