"""The context builder on a real workspace: sized to the budget, in the layout the policy parses."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentload import contract
from agentload.agents.first_prompt import build_orchestrator_prompt, build_subagent_prompt
from agentload.scenarios.workspace import Workspace, materialise
from agentload.tokenizer import ChatTokenCounter

TOOLS = contract.tool_schemas([*contract.DIRECT_TOOLS, contract.DELEGATE])


@pytest.fixture(scope="module")
def email_ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return materialise("stdlib:email", tmp_path_factory.mktemp("ws") / "w", "qp-header-decode")


@pytest.mark.parametrize("budget", [8_000, 60_000])
def test_prompt_lands_on_the_budget(email_ws: Workspace, budget: int) -> None:
    counter = ChatTokenCounter()
    task = "Fix the failing tests."
    p = build_orchestrator_prompt(
        root=email_ws.root, files=email_ws.files(), instructions="Be good.",
        task=task, tools=TOOLS, budget_tokens=budget, counter=counter,
    )  # fmt: skip
    measured = counter.count_prompt(
        [{"role": "system", "content": p.system}, {"role": "user", "content": p.user}], TOOLS
    )
    assert measured == p.tokens
    assert budget * 0.97 <= p.tokens <= budget * 1.01
    # the system message is the scenario's words alone: the static prefix sessions share
    assert p.system == "Be good.\n"
    lines = p.user.splitlines()
    assert lines[0] == contract.REPO_MAP_HEADING  # then the repository context, then the task
    assert p.user.endswith(f"\n\n{contract.TASK_HEADING}\n{task}")
    start = lines.index(contract.REPO_MAP_HEADING) + 1
    assert lines[start : start + len(email_ws.files())] == email_ws.files()
    shown = [ln.removeprefix("## File: ") for ln in lines if ln.startswith("## File: ")]
    assert tuple(shown) == p.files and shown and all(f in email_ws.files() for f in shown)
    assert shown[0] == "email/__init__.py"  # package entry point first
    assert (email_ws.root / shown[1]).read_text().rstrip() in p.user or p.cut_file == shown[1]


def test_files_named_in_the_task_come_first(email_ws: Workspace) -> None:
    p = build_orchestrator_prompt(
        root=email_ws.root, files=email_ws.files(), instructions="x",
        task="Look at email/quoprimime.py first.", tools=TOOLS, budget_tokens=8_000,
        counter=ChatTokenCounter(),
    )  # fmt: skip
    assert p.files[0] == "email/quoprimime.py"


def test_same_inputs_same_prompt(email_ws: Workspace, tmp_path: Path) -> None:
    other = materialise("stdlib:email", tmp_path / "again", "qp-header-decode")
    kw = dict(instructions="x", task="t", tools=TOOLS, budget_tokens=20_000)
    a = build_orchestrator_prompt(
        root=email_ws.root,
        files=email_ws.files(),
        counter=ChatTokenCounter(),
        **kw,  # type: ignore[arg-type]
    )
    b = build_orchestrator_prompt(
        root=other.root,
        files=other.files(),
        counter=ChatTokenCounter(),
        **kw,  # type: ignore[arg-type]
    )
    assert a == b


def test_subagent_prompt_is_its_instructions_alone() -> None:
    assert build_subagent_prompt("  Find things. ") == "Find things.\n"
