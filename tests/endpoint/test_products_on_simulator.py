"""The real agent products against the built-in simulator over real HTTP: Claude Code (Anthropic
Messages), Codex CLI (OpenAI Responses) and mini-swe-agent (Chat Completions through LiteLLM),
each run headless in a scratch repository under ``tmp_path``, as installed by
``scripts/agents.sh`` (they skip when missing, or fail under AGENTLOAD_REQUIRE_AGENTS=1).

Each run must end with exit 0 well within the time limit, after at least five LLM calls counted
at the simulator; Claude Code and Codex must start a sub-agent that makes its own tool call; no
tool result may say the simulated model's arguments were invalid. With oracle mode on an eval
task's faulted workspace, the task's own check (its test suite) must pass afterwards.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "record"))  # real_agents
from real_agents import CLAUDE_CODE, CODEX, MINI_SWE_AGENT, agent_exe

from agentload.endpoint import SimulatorServer
from agentload.endpoint.policy.session import read_session
from agentload.endpoint.policy.types import Conversation, Decision
from agentload.evals.taskcheck import run_suite
from agentload.evals.tasks import get_task
from agentload.scenarios.workspace import materialise

MODEL = "agentload-sim"
TIME_LIMIT_S = 120
TASK = "Fix the bug in calc.py: add(2, 3) returns -1 instead of 5. Then run the tests."
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"
TESTS = (
    "import unittest\n\nfrom calc import add, sub\n\n\nclass TestCalc(unittest.TestCase):\n"
    "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n"
    "    def test_sub(self):\n        self.assertEqual(sub(5, 3), 2)\n"
)
ORACLE_TASK = "json-float-exponent"
# What a product's tool result says when the model's arguments did not fit the tool.
_INVALID = re.compile(
    r"InputValidationError|invalid (?:type|arguments?|input|params)|missing required|"
    r"failed to parse|unsupported call|unknown (?:tool|parameter|argument)|"
    r"is not valid under|No tool calls found|Tool call error",
    re.IGNORECASE,
)


@dataclass
class Seen:
    """Every request the simulator's policy answered: its conversation and the reply."""

    calls: list[tuple[Conversation, Decision]] = field(default_factory=list)

    def subagent_calls(self) -> list[Conversation]:
        """Requests of the sub-agents (a task the policy delegated) that made a tool call."""
        return [c for c, d in self.calls if d.tool_calls and read_session(c).subtask]

    def root_calls(self) -> list[Conversation]:
        return [c for c, _ in self.calls if c.tools and not read_session(c).subtask]

    def invalid_results(self) -> list[str]:
        out = []
        for conv, _ in self.calls:
            for m in conv.messages:
                text = str(m.get("content") or "")
                if m.get("role") in ("tool", "user") and _INVALID.search(text):
                    out.append(text[:300])
        return out


@pytest.fixture
def simulator() -> Iterator[Callable[..., tuple[SimulatorServer, Seen]]]:
    started: list[SimulatorServer] = []

    def start(oracle: bool = False) -> tuple[SimulatorServer, Seen]:
        srv = SimulatorServer(
            profile="instant", model=MODEL, seed=0, policy_overrides={"oracle": oracle}
        )
        seen = Seen()
        policy = srv.simulator.policy
        decide = policy.decide

        def recorded(conv: Conversation) -> Decision:
            d = decide(conv)
            seen.calls.append((conv, d))
            return d

        policy.decide = recorded  # type: ignore[method-assign]
        started.append(srv.start())
        return srv, seen

    yield start
    for srv in started:
        srv.stop()


def _scratch(path: Path) -> Path:
    path.mkdir(parents=True)
    (path / "calc.py").write_text(CALC)
    (path / "test_calc.py").write_text(TESTS)
    git = ["git", "-c", "user.email=t@localhost", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q"], cwd=path, check=True)
    subprocess.run([*git, "add", "."], cwd=path, check=True)
    subprocess.run([*git, "commit", "-qm", "init"], cwd=path, check=True)
    return path


def _env(home: Path, **extra: str) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR")}
    return {**keep, "HOME": str(home), "NO_COLOR": "1", **extra}


def _argv(agent: str, srv: SimulatorServer, task: str, home: Path) -> tuple[list[str], dict[str, str]]:  # fmt: skip
    root = srv.base_url.removesuffix("/v1")
    if agent == "claude-code":
        exe = agent_exe(CLAUDE_CODE[0])
        env = _env(home, ANTHROPIC_BASE_URL=root, ANTHROPIC_API_KEY="sk-test",
                   DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")  # fmt: skip
        argv = [str(exe), "-p", task, "--model", MODEL, "--max-turns", "40"]
        argv += ["--permission-mode", "acceptEdits", "--allowedTools", "Bash,Read,Edit,Agent"]
        return argv, env
    if agent == "codex":
        exe = agent_exe(CODEX[0])
        argv = [str(exe), "exec", "--skip-git-repo-check"]
        argv += ["--dangerously-bypass-approvals-and-sandbox", "-m", MODEL]
        for k, v in (("name", "sim"), ("base_url", srv.base_url), ("env_key", "OPENAI_API_KEY")):
            argv += ["-c", f"model_providers.sim.{k}={v}"]
        argv += ["-c", "model_providers.sim.wire_api=responses", "-c", "model_provider=sim"]
        return [*argv, task], _env(home, OPENAI_API_KEY="sk-test")
    exe = agent_exe(MINI_SWE_AGENT)
    env = _env(home, OPENAI_API_KEY="sk-test", MSWEA_CONFIGURED="true",
               MSWEA_COST_TRACKING="ignore_errors", LITELLM_LOCAL_MODEL_COST_MAP="True",
               MSWEA_GLOBAL_CONFIG_DIR=str(home / "mswea"))  # fmt: skip
    argv = [str(exe), "-m", f"openai/{MODEL}", "-t", task, "-y", "--exit-immediately"]
    argv += ["-c", "mini.yaml", "-c", f"model.model_kwargs.api_base={srv.base_url}"]
    return [*argv, "-o", str(home / "traj.json")], env


def _run(agent: str, srv: SimulatorServer, task: str, work: Path, home: Path) -> float:
    argv, env = _argv(agent, srv, task, home)
    t0 = time.monotonic()
    done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                          timeout=TIME_LIMIT_S + 60, stdin=subprocess.DEVNULL, check=False)  # fmt: skip
    wall = time.monotonic() - t0
    assert done.returncode == 0, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    return wall


AGENTS = ["claude-code", "codex", "mini-swe-agent"]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_product_works_the_scratch_repository(
    agent: str, simulator: Callable[..., tuple[SimulatorServer, Seen]], tmp_path: Path
) -> None:
    srv, seen = simulator()
    wall = _run(agent, srv, TASK, _scratch(tmp_path / "repo"), tmp_path / "home")
    assert wall < TIME_LIMIT_S
    assert len(seen.calls) >= 5, [d.tool_calls for _, d in seen.calls]
    assert 4 <= len(seen.root_calls()) <= 16
    assert not seen.invalid_results()
    if agent != "mini-swe-agent":  # the two with sub-agents
        assert seen.subagent_calls(), "no sub-agent made a tool call"
    made = [name for _, d in seen.calls for name, _ in d.tool_calls]
    assert len(set(made)) >= 1 and len(made) >= 4, made


@pytest.mark.parametrize("agent", AGENTS)
def test_a_product_in_oracle_mode_passes_an_eval_task(
    agent: str, simulator: Callable[..., tuple[SimulatorServer, Seen]], tmp_path: Path
) -> None:
    task = get_task(ORACLE_TASK)
    root = tmp_path / "ws"
    materialise(task.recipe, root, task.name)
    before = run_suite(task, root, task.failing_tests)
    assert not isinstance(before, str) and set(task.failing_tests) <= set(before.failed)
    srv, seen = simulator(oracle=True)
    wall = _run(agent, srv, task.issue, root, tmp_path / "home")
    assert wall < TIME_LIMIT_S
    assert not seen.invalid_results()
    after = run_suite(task, root, task.failing_tests)
    assert not isinstance(after, str), after
    assert not after.failed, after.failed
    assert set(after.watched_passed) == set(task.failing_tests)
    diff = subprocess.run(["git", "diff", "--stat"], cwd=root, capture_output=True, text=True)
    assert task.fault.path in diff.stdout and "1 file changed" in diff.stdout
