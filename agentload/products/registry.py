"""The agent products ``generate --agent NAME`` runs: how each is installed, started headless on
a task, pointed at an endpoint, and how its end is recognised.

| name | what | API it speaks | pointed at the endpoint by |
|---|---|---|---|
| ``langgraph`` | agentload's own agents (the default; not a product: ``agents/``) | Chat Completions | |
| ``claude-code`` | ``claude -p`` (npm ``@anthropic-ai/claude-code``) | Anthropic Messages | ``ANTHROPIC_BASE_URL`` |
| ``codex`` | ``codex exec`` (npm ``@openai/codex``) | OpenAI Responses | a ``model_providers`` entry (``-c``): Codex ignores ``OPENAI_BASE_URL`` |
| ``mini-swe-agent`` | ``mini -y --exit-immediately`` (PyPI ``mini-swe-agent``) | Chat Completions (LiteLLM) | ``model.model_kwargs.api_base`` (``-c``) |
| ``aider`` | ``aider --message`` (PyPI ``aider-chat``), edits as SEARCH/REPLACE blocks, the task's tests after each edit | Chat Completions (LiteLLM) | ``--openai-api-base`` |
| ``qwen-code`` | ``qwen --yolo TASK`` (npm ``@qwen-code/qwen-code``) | Chat Completions | ``OPENAI_BASE_URL``, ``OPENAI_MODEL`` |
| ``opencode`` | ``opencode run --auto TASK`` (npm ``opencode-ai``, a Bun binary) | Chat Completions | a provider (``@ai-sdk/openai-compatible``) in ``OPENCODE_CONFIG_CONTENT`` |
| ``gemini-cli`` | ``gemini -p TASK --yolo`` (npm ``@google/gemini-cli``) | Gemini API | ``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_MODEL`` |
| ``cmd:"..."`` | any agent started by a shell command line | any | ``OPENAI_BASE_URL``, ``ANTHROPIC_BASE_URL``, ``GOOGLE_GEMINI_BASE_URL``, each API's key and model variable and ``AGENTLOAD_*`` in its environment |

Each is started in the session's workspace (its working directory) with the task text as its
prompt, and its end is its process's exit: exit 0 is ``done``; any other exit is ``error`` with
the last lines it printed; the session's wall budget ending it is ``wall_budget``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from agentload.errors import ConfigError

__all__ = [
    "BUILTIN",
    "PRODUCTS",
    "Launch",
    "LaunchContext",
    "Package",
    "Product",
    "ProductName",
    "product",
]

BUILTIN = "langgraph"
"""``--agent``'s default: agentload's own LangGraph agents."""
MAX_TURNS = 30
"""The most model turns a product is allowed where it takes a limit (the session's wall budget
bounds every product)."""


class ProductName(StrEnum):
    CLAUDE_CODE = "claude-code"
    CODEX = "codex"
    MINI_SWE_AGENT = "mini-swe-agent"
    AIDER = "aider"
    QWEN_CODE = "qwen-code"
    OPENCODE = "opencode"
    GEMINI_CLI = "gemini-cli"
    CMD = "cmd"


@dataclass(frozen=True)
class LaunchContext:
    """What a product's command line is built from: its executable (as the sandbox sees it),
    the task text, the model, the proxy's root URL (no ``/v1``) as the agent reaches it, the
    API key the agent sends, and the agent's home directory."""

    exe: str
    task: str
    model: str
    root_url: str
    key: str
    home: str
    max_tokens: int | None = None
    """``--agent-max-tokens``: the most tokens of one reply, where the product takes a limit."""
    tests: str | None = None
    """The shell command that runs the workspace's tests (for a product that runs them itself
    after each edit: aider's ``--test-cmd``)."""


@dataclass(frozen=True)
class Launch:
    """A product's command line and the environment it adds to the sandbox's clean one."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Package:
    """How a product is installed (``install``, stdlib only): from ``npm`` or ``pypi`` as
    ``name``, at its pinned versions (the first is the one ``generate --agent`` runs; the others
    are older releases the recording tests drive too), and its executable in the install
    folder."""

    source: Literal["npm", "pypi"]
    name: str
    pins: tuple[str, ...]
    exe: str


@dataclass(frozen=True)
class Product:
    """One agent product (see the module docstring)."""

    name: ProductName
    launch: Callable[[LaunchContext], Launch]
    subagents: bool
    """Whether it starts sub-agents of its own (Claude Code's Task/Agent, Codex's spawn_agent)."""
    package: Package | None = None
    """How it is installed (None: ``cmd:``, a command of the host's)."""
    command: str = ""
    """``cmd:``: the shell command line."""

    @property
    def installed(self) -> bool:
        """Whether it is an installed package (else a command of the host's)."""
        return self.name is not ProductName.CMD

    @property
    def label(self) -> str:
        return f"cmd:{self.command}" if self.name is ProductName.CMD else self.name.value


def _claude_code(c: LaunchContext) -> Launch:
    argv = [c.exe, "-p", c.task, "--model", c.model, "--max-turns", str(MAX_TURNS)]
    # Headless runs ask nobody: edits and the usual tools are allowed, nothing is prompted.
    allowed = "Bash,Edit,Write,Read,Grep,Glob,Task,Agent,TodoWrite,NotebookEdit,LS,MultiEdit"
    argv += ["--permission-mode", "acceptEdits", "--allowedTools", allowed]
    env = {
        "ANTHROPIC_BASE_URL": c.root_url,
        "ANTHROPIC_API_KEY": c.key,
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_TELEMETRY": "1",
        "NO_COLOR": "1",
    }
    if c.max_tokens is not None:
        env["CLAUDE_CODE_MAX_OUTPUT_TOKENS"] = str(c.max_tokens)
    return Launch(argv, env)


def _codex(c: LaunchContext) -> Launch:
    argv = [c.exe, "exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    provider = {"name": "agentload", "base_url": c.root_url + "/v1", "env_key": "OPENAI_API_KEY"}
    for k, v in provider.items():
        argv += ["-c", f"model_providers.agentload.{k}={v}"]
    argv += ["-c", "model_providers.agentload.wire_api=responses"]
    argv += ["-c", "model_provider=agentload", "-m", c.model, c.task]
    return Launch(argv, {"OPENAI_API_KEY": c.key, "NO_COLOR": "1"})


def _mini_swe_agent(c: LaunchContext) -> Launch:
    argv = [c.exe, "-m", f"openai/{c.model}", "-t", c.task, "-y", "--exit-immediately"]
    argv += ["-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={c.root_url}/v1"]
    argv += ["-c", f"agent.step_limit={MAX_TURNS}", "-o", c.home + "/trajectory.json"]
    if c.max_tokens is not None:
        argv += ["-c", f"model.model_kwargs.max_tokens={c.max_tokens}"]
    env = {
        "OPENAI_API_KEY": c.key,
        "MSWEA_CONFIGURED": "true",
        "MSWEA_COST_TRACKING": "ignore_errors",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "MSWEA_GLOBAL_CONFIG_DIR": c.home + "/mswea",
    }
    return Launch(argv, env)


_GIT_READY = 'git init -q . >/dev/null 2>&1; git add -A >/dev/null 2>&1; exec "$0" "$@"'
"""aider works in a git repository (its repo map lists the tracked files): the workspace is
made one, its files staged, nothing committed."""


def _aider(c: LaunchContext) -> Launch:
    args = [
        "--model",
        f"openai/{c.model}",
        "--openai-api-base",
        f"{c.root_url}/v1",
        "--message",
        c.task,
        "--edit-format",
        "diff",
        "--yes-always",
        "--no-auto-commits",
        "--no-dirty-commits",
        "--no-gitignore",
        "--no-check-update",
        "--no-show-release-notes",
        "--analytics-disable",
        "--no-pretty",
        "--no-fancy-input",
        "--no-show-model-warnings",
        "--chat-history-file",
        f"{c.home}/aider.chat.md",
        "--input-history-file",
        f"{c.home}/aider.input",
    ]
    if c.tests:
        args += ["--auto-test", "--test-cmd", c.tests]
    env = {
        "OPENAI_API_KEY": c.key,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        # the workspace's owner may not be the agent's user (agentload as root, local sandbox)
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": "safe.directory",
        "GIT_CONFIG_VALUE_0": "*",
    }
    return Launch(["sh", "-c", _GIT_READY, c.exe, *args], env)


_SETTINGS_SH = 'mkdir -p "${1%/*}" && printf "%s" "$2" > "$1" && shift 2 && exec "$@"'
"""Writes a settings file in the agent's home (inside the sandbox), then runs the agent."""


def _with_settings(path: str, settings: dict[str, Any], argv: list[str]) -> list[str]:
    return ["sh", "-c", _SETTINGS_SH, "sh", path, json.dumps(settings), *argv]


_QUIET = {
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
}
"""Qwen Code's and Gemini CLI's settings (one lineage): no update check, usage statistics or
telemetry."""


def _qwen_code(c: LaunchContext) -> Launch:
    argv = [
        c.exe,
        "--yolo",
        "--auth-type",
        "openai",
        "-m",
        c.model,
        "--max-session-turns",
        str(MAX_TURNS),
        c.task,
    ]
    env = {
        "OPENAI_BASE_URL": c.root_url + "/v1",
        "OPENAI_API_KEY": c.key,
        "OPENAI_MODEL": c.model,
        "QWEN_CODE_NO_RELAUNCH": "true",  # one Node process, not a second one to size its heap
        "NO_COLOR": "1",
    }
    if c.max_tokens is not None:
        env["QWEN_CODE_MAX_OUTPUT_TOKENS"] = str(c.max_tokens)
    return Launch(_with_settings(c.home + "/.qwen/settings.json", _QUIET, argv), env)


def _opencode(c: LaunchContext) -> Launch:
    model: dict[str, Any] = {"name": c.model}
    if c.max_tokens is not None:
        model["limit"] = {"context": 1 << 20, "output": c.max_tokens}
    provider = {
        "npm": "@ai-sdk/openai-compatible",  # built into the binary: nothing is fetched
        "name": "agentload",
        "options": {"baseURL": c.root_url + "/v1", "apiKey": "{env:OPENAI_API_KEY}"},
        "models": {c.model: model},
    }
    config = {
        "provider": {"agentload": provider},
        "model": f"agentload/{c.model}",
        "autoupdate": False,
        "share": "disabled",
    }
    env = {
        "OPENCODE_CONFIG_CONTENT": json.dumps(config),
        "OPENAI_API_KEY": c.key,
        "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_SHARE": "1",
        "NO_COLOR": "1",
    }
    argv = [c.exe, "run", "--auto", "--pure", "-m", f"agentload/{c.model}", c.task]
    return Launch(argv, env)


_GEMINI_SUBAGENTS = ("codebase_investigator", "generalist", "cli_help")
"""Gemini CLI's own sub-agents, which otherwise ask for a Gemini model of their own
(``gemini-3-flash-preview``): an endpoint serves one model."""


def _gemini_cli(c: LaunchContext) -> Launch:
    argv = [c.exe, "-p", c.task, "--yolo", "--skip-trust", "-m", c.model]
    overrides = {a: {"modelConfig": {"model": c.model}} for a in _GEMINI_SUBAGENTS}
    settings = {
        **_QUIET,
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "agents": {"overrides": overrides},
    }
    env = {
        "GOOGLE_GEMINI_BASE_URL": c.root_url,
        "GEMINI_API_KEY": c.key,
        "GEMINI_MODEL": c.model,
        "GEMINI_CLI_NO_RELAUNCH": "true",  # one Node process, not a second one to size its heap
        "GEMINI_TELEMETRY_ENABLED": "false",
        "NO_COLOR": "1",
    }
    return Launch(_with_settings(c.home + "/.gemini/settings.json", settings, argv), env)


def _cmd(command: str) -> Callable[[LaunchContext], Launch]:
    def launch(c: LaunchContext) -> Launch:
        env = {
            "OPENAI_BASE_URL": c.root_url + "/v1",
            "OPENAI_API_BASE": c.root_url + "/v1",
            "OPENAI_API_KEY": c.key,
            "OPENAI_MODEL": c.model,
            "ANTHROPIC_BASE_URL": c.root_url,
            "ANTHROPIC_API_KEY": c.key,
            "ANTHROPIC_MODEL": c.model,
            "GOOGLE_GEMINI_BASE_URL": c.root_url,
            "GEMINI_API_KEY": c.key,
            "GEMINI_MODEL": c.model,
            "AGENTLOAD_BASE_URL": c.root_url + "/v1",
            "AGENTLOAD_MODEL": c.model,
            "AGENTLOAD_TASK": c.task,
        }
        return Launch(["sh", "-c", command], env)

    return launch


_N = "node_modules/.bin/"
PRODUCTS: dict[ProductName, Product] = {
    p.name: p
    for p in (
        Product(
            ProductName.CLAUDE_CODE,
            _claude_code,
            True,
            Package("npm", "@anthropic-ai/claude-code", ("2.1.332", "2.1.197"), _N + "claude"),
        ),
        Product(
            ProductName.CODEX,
            _codex,
            True,
            Package("npm", "@openai/codex", ("0.171.0", "0.169.0"), _N + "codex"),
        ),
        Product(
            ProductName.MINI_SWE_AGENT,
            _mini_swe_agent,
            False,
            Package("pypi", "mini-swe-agent", ("2.4.6",), "venv/bin/mini"),
        ),
        Product(
            ProductName.AIDER,
            _aider,
            False,
            Package("pypi", "aider-chat", ("0.86.2",), "venv/bin/aider"),
        ),
        Product(
            ProductName.QWEN_CODE,
            _qwen_code,
            True,
            Package("npm", "@qwen-code/qwen-code", ("0.15.10",), _N + "qwen"),
        ),
        Product(
            ProductName.OPENCODE,
            _opencode,
            True,
            Package("npm", "opencode-ai", ("1.18.33",), _N + "opencode"),
        ),
        Product(
            ProductName.GEMINI_CLI,
            _gemini_cli,
            True,
            Package("npm", "@google/gemini-cli", ("0.61.0",), _N + "gemini"),
        ),
    )
}
"""Every installed agent product, one entry each: its launch, whether it starts sub-agents, and
its package (adding a product is its launch function and its entry here)."""
NAMES = (BUILTIN, *(p.value for p in PRODUCTS), 'cmd:"..."')
"""What ``--agent`` takes."""


def product(text: str) -> Product | None:
    """The product ``--agent TEXT`` names; None for the built-in agents; ``ConfigError`` (one
    line listing the names) for anything else."""
    if text == BUILTIN:
        return None
    if text.startswith("cmd:"):
        command = text[4:].strip()
        if not command:
            raise ConfigError(
                "--agent cmd: needs a command line, e.g. --agent 'cmd:my-agent \"$AGENTLOAD_TASK\"'"
            )
        return Product(ProductName.CMD, _cmd(command), subagents=False, command=command)
    try:
        return PRODUCTS[ProductName(text)]
    except ValueError:
        raise ConfigError(f"--agent {text!r}: unknown agent; valid: {', '.join(NAMES)}") from None
