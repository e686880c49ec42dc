"""The simulator infers which agent a request comes from, from what any server sees.

Checked on the real first requests of every shipped scenario (the orchestrator's first prompt
built on the real workspace, each sub-agent's system prompt and tools), on requests that are not
ours, and over HTTP: a request's reply follows the inferred role.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentload import contract
from agentload.agents.first_prompt import build_orchestrator_prompt
from agentload.agents.session import agent_settings
from agentload.endpoint.policy.roles import infer_role
from agentload.scenarios import list_scenarios, load_scenario
from agentload.scenarios.workspace import materialise
from agentload.tokenizer import ChatTokenCounter

from .conftest import post


@pytest.mark.parametrize("name", list_scenarios())
def test_shipped_scenarios_first_requests_are_recognised(name: str, tmp_path: Path) -> None:
    s = load_scenario(name)
    ws = materialise(s.workspace.recipe, tmp_path / "ws", s.workspace.fault)
    tools = contract.tool_schemas(tuple(s.orchestrator.tools), s.tool_descriptions)
    prompt = build_orchestrator_prompt(
        root=ws.root,
        files=ws.files(),
        instructions=s.orchestrator.system_prompt,
        task=s.task,
        tools=tools,
        budget_tokens=s.orchestrator.initial_context_tokens,
        counter=ChatTokenCounter(),
    )
    first = [{"role": "system", "content": prompt.system}, {"role": "user", "content": prompt.user}]
    assert "agentload" not in prompt.system  # nothing of ours travels
    assert infer_role(first, s.orchestrator.tools) == contract.ORCHESTRATOR
    settings = agent_settings(s, "m", 0)
    assert set(settings.subagents) == set(contract.SUBAGENT_ROLES)
    for kind, sub in settings.subagents.items():
        msgs = [
            {"role": "system", "content": sub.system_prompt},
            {"role": "user", "content": "Find where `decode_q` is defined."},
        ]
        assert "agentload" not in sub.system_prompt
        assert infer_role(msgs, sub.tools) == kind
        # Either clue alone is enough: the wording with other tools, the tools with other words.
        assert infer_role(msgs, [contract.READ_FILE]) == kind
        plain = [{"role": "system", "content": "Help."}, msgs[1]]
        assert infer_role(plain, list(reversed(sub.tools))) == kind


def _sys(text: str) -> list[dict[str, Any]]:
    return [{"role": "system", "content": text}, {"role": "user", "content": "hi"}]


@pytest.mark.parametrize(
    ("messages", "tools", "role"),
    [
        (_sys("You are helpful."), [], None),  # no tools: a plain conversation
        (_sys("You are a code-search sub-agent."), [], None),
        (_sys("Lead.\n\n## Repository map\na.py"), ["read_file", "get_weather"], None),
        (_sys("x"), ["get_weather", "delegate"], None),  # a tool outside the contract
        (_sys("You are helpful."), ["read_file"], None),  # no kind has this set
        (_sys("You are helpful."), ["read_file", "delegate"], contract.ORCHESTRATOR),
        (_sys("You are a Test_Runner subagent."), ["read_file"], contract.TEST_RUNNER),
        (_sys("You are a file reader sub-agent."), ["read_file"], contract.FILE_READER),
        (_sys("Lead.\n\n## Repository map\na.py"), list(contract.DIRECT_TOOLS), "orchestrator"),
        (
            [
                {"role": "system", "content": "Lead."},
                {"role": "user", "content": "## Repository map\na.py\n\n## Task\nfix it"},
            ],
            list(contract.DIRECT_TOOLS),
            "orchestrator",
        ),
        ([{"role": "user", "content": "hi"}], ["list_files", "read_file"], contract.FILE_READER),
    ],
)
def test_inference_rules(messages: list[dict[str, Any]], tools: list[str], role: str) -> None:
    assert infer_role(messages, tools) == role


def test_replies_follow_the_inferred_role(simulator: Any) -> None:
    """Over HTTP: with our tools and wording the reply is an agent's tool call; the same words
    with a foreign tool get the plain reply (one call of that tool)."""
    names = list(contract.SUBAGENT_TOOLS[contract.CODE_SEARCH])
    msgs = [
        {"role": "system", "content": "You are a code-search sub-agent."},
        {"role": "user", "content": "Find where `parse_amount` is defined."},
    ]
    body = {"model": simulator.model, "messages": msgs, "tools": contract.tool_schemas(names)}
    msg = post(simulator.base_url, body).json()["choices"][0]["message"]
    assert msg["tool_calls"][0]["function"]["name"] == contract.SEARCH_CODE
    assert "parse_amount" in msg["tool_calls"][0]["function"]["arguments"]
    foreign = {
        "type": "function",
        "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}},
    }
    body["tools"] = [foreign]
    msg = post(simulator.base_url, body).json()["choices"][0]["message"]
    assert [c["function"]["name"] for c in msg["tool_calls"]] == ["get_weather"]
