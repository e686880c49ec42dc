"""Scenario presets, files, extends, -c overrides and one-line validation errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentload import contract
from agentload.cli import main
from agentload.errors import ScenarioError
from agentload.scenarios import (
    dump_scenario,
    list_scenarios,
    load_scenario,
    scenario_hash,
)


def test_presets_ship_with_the_documented_budgets() -> None:
    assert {"coding-session", "quick", "typical-session"} <= set(list_scenarios())
    cs = load_scenario("coding-session")
    assert cs.orchestrator.initial_context_tokens == 60_000
    assert cs.context_target == 400_000
    assert cs.tool_output_max_chars == 100_000  # Claude Code's Read: 25K tokens
    assert cs.waits is not None and cs.pacing is not None and cs.by_design
    assert cs.workspace.recipe == "stdlib:email" and cs.workspace.fault == "qp-header-decode"
    assert set(cs.subagents) == set(contract.SUBAGENT_ROLES)
    assert contract.DELEGATE in cs.orchestrator.tools
    quick = load_scenario("quick")
    assert (quick.orchestrator.initial_context_tokens, quick.context_target) == (8_000, 40_000)
    # `extends: coding-session` keeps what quick does not override
    assert quick.task == cs.task and quick.test_command == cs.test_command
    assert quick.subagents["code_search"].max_turns == 4
    assert quick.subagents["code_search"].tools == cs.subagents["code_search"].tools
    assert quick.waits is None and quick.pacing is None  # a replay of a quick trace is quick
    typical = load_scenario("typical-session")
    assert (typical.orchestrator.initial_context_tokens, typical.context_target) == (
        24_000,
        133_000,
    )
    assert typical.waits == cs.waits and typical.by_design == {}  # `by_design: null` drops them
    assert contract.DELEGATE not in typical.orchestrator.tools


def test_overrides_parse_values_as_yaml() -> None:
    s = load_scenario(
        "quick",
        [
            "orchestrator.max_rounds=5",
            "sandbox.image=python:3.12-slim",
            "sandbox.cpus=0.5",
            "workspace.fault=null",
            "test_command=[python3, -m, unittest]",
            "tool_timeouts_s.run_tests=7.5",
        ],
    )
    assert s.orchestrator.max_rounds == 5
    assert s.sandbox.image == "python:3.12-slim" and s.sandbox.cpus == 0.5
    assert s.workspace.fault is None
    assert s.test_command == ["python3", "-m", "unittest"]
    assert s.tool_timeouts_s.for_tool("run_tests") == 7.5


def test_user_file_extends_a_preset_relative_to_itself(tmp_path: Path) -> None:
    (tmp_path / "base.yaml").write_text("extends: quick\nname: base\nseed: 11\n")
    (tmp_path / "mine.yaml").write_text("extends: base.yaml\nname: mine\ncontext_target: 20000\n")
    s = load_scenario(str(tmp_path / "mine.yaml"))
    assert (s.name, s.seed, s.context_target) == ("mine", 11, 20_000)
    assert s.orchestrator.initial_context_tokens == 8_000


def test_hash_is_stable_and_sensitive() -> None:
    a, b = load_scenario("quick"), load_scenario("quick")
    assert scenario_hash(a) == scenario_hash(b)
    assert len(scenario_hash(a)) == 32
    assert scenario_hash(load_scenario("quick", ["seed=1"])) != scenario_hash(a)


def test_dump_round_trips(tmp_path: Path) -> None:
    s = load_scenario("coding-session", ["seed=9"])
    p = tmp_path / "resolved.yaml"
    p.write_text(dump_scenario(s))
    assert load_scenario(str(p)) == s


BAD_TYPE = """\
name: bad
extends: quick
orchestrator:
  max_parallel_delegations: 2
  max_rounds: lots
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (BAD_TYPE, ":5: orchestrator.max_rounds: Input should be a valid integer"),
        ("extends: quick\nsandbox:\n  kind: podman\n", ":3: sandbox.kind: Input should be"),
        ("extends: quick\n\nseeed: 3\n", ":3: seeed: unknown field"),
        ("name: x\ntask: t\n", ":1: test_command: Field required"),
        (
            "extends: quick\nsubagents:\n  reviewer:\n    system_prompt: x\n    tools: []\n",
            ":2: subagents: unknown sub-agent kind 'reviewer'",
        ),
        (
            "extends: quick\norchestrator:\n  tools: [read_file, shell]\n",
            ":3: orchestrator.tools: unknown tool 'shell'",
        ),
        (  # delegate is the orchestrator's alone (contract.TOOLS["delegate"].roles)
            "extends: quick\nsubagents:\n  file_reader:\n    tools: [read_file, delegate]\n",
            ":4: subagents.file_reader.tools: unknown tool 'delegate'; valid: search_code",
        ),
        ("extends: quick\ncontext_target: 100\n", ":2: context_target: must exceed"),
        ("extends: quick\nname: [unclosed\n", ":3: invalid YAML"),
        ("- a\n- b\n", ":1: a scenario must be a YAML mapping"),
    ],
)
def test_validation_errors_name_file_line_and_field(
    tmp_path: Path, text: str, expected: str
) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(text)
    with pytest.raises(ScenarioError) as err:
        load_scenario(str(p))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(str(p)), msg
    assert expected in msg, msg


def test_override_errors_name_the_override() -> None:
    with pytest.raises(ScenarioError, match=r"^-c sandbox\.cpus=lots: sandbox\.cpus: "):
        load_scenario("quick", ["sandbox.cpus=lots"])
    with pytest.raises(ScenarioError, match=r"^-c subagents\.x\.max_turns=2: subagents"):
        load_scenario("quick", ["subagents.x.max_turns=2"])
    with pytest.raises(ScenarioError, match=r"expected key\.path=value"):
        load_scenario("quick", ["seed"])
    with pytest.raises(ScenarioError, match="seed is not a mapping"):
        load_scenario("quick", ["seed.x=1"])


def test_unknown_names_and_loops(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"unknown scenario 'nope'.*coding-session.*quick"):
        load_scenario("nope")
    with pytest.raises(ScenarioError, match="scenario file not found"):
        load_scenario(str(tmp_path / "missing.yaml"))
    (tmp_path / "a.yaml").write_text("extends: b.yaml\n")
    (tmp_path / "b.yaml").write_text("extends: a.yaml\n")
    with pytest.raises(ScenarioError, match="loops back"):
        load_scenario(str(tmp_path / "a.yaml"))


def test_cli_list_and_show(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as ex:
        main(["scenarios", "list"])
    assert ex.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("coding-session ") and "\nquick " in out and "qp-header-decode" in out

    with pytest.raises(SystemExit) as ex:
        main(["scenarios", "show", "quick", "-c", "seed=42"])
    assert ex.value.code == 0
    shown = capsys.readouterr().out
    p = tmp_path / "shown.yaml"
    p.write_text(shown)
    assert load_scenario(str(p)) == load_scenario("quick", ["seed=42"])

    with pytest.raises(SystemExit) as ex:
        main(["scenarios", "show", "quick", "-c", "seed=x"])
    assert ex.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "agentload: error: -c seed=x: seed: Input should be a valid integer, "
        "unable to parse string as an integer"
    ]


def test_tool_timeouts_follow_the_registry() -> None:
    t = load_scenario("quick", ["tool_timeouts_s.run_tests=77"]).tool_timeouts_s
    assert t.for_tool(contract.RUN_TESTS) == 77.0
    for name in contract.DIRECT_TOOLS:
        key = contract.TOOLS[name].timeout_key
        assert key is not None and t.for_tool(name) == getattr(t, key)
    with pytest.raises(ValueError, match="delegate has no tool timeout"):
        t.for_tool(contract.DELEGATE)


def test_include_reads_prompt_files_next_to_the_scenario(tmp_path: Path) -> None:
    """`!include FILE` / `!include [FILE, ...]` put the files' text in (joined by a blank
    line); the tools' schemas then carry the scenario's descriptions."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "read.md").write_text("Read one file.\nLine two.\n")
    (tmp_path / "prompts" / "extra.md").write_text("\nMore.\n")
    (tmp_path / "s.yaml").write_text(
        "extends: quick\n"
        "tool_descriptions:\n"
        "  read_file: !include prompts/read.md\n"
        "  search_code: !include [prompts/read.md, prompts/extra.md]\n"
    )
    s = load_scenario(str(tmp_path / "s.yaml"))
    assert s.tool_descriptions == {
        "read_file": "Read one file.\nLine two.\n",
        "search_code": "Read one file.\nLine two.\n\nMore.\n",
    }
    schemas = contract.tool_schemas(["read_file", "list_files"], s.tool_descriptions)
    assert schemas[0]["function"]["description"] == "Read one file.\nLine two.\n"
    assert schemas[1] == contract.TOOLS["list_files"].schema()  # not described: the default
    assert contract.TOOLS["read_file"].schema()["function"]["description"] != schemas[0]


@pytest.mark.parametrize(
    ("yaml_text", "message"),
    [
        (
            "tool_descriptions:\n  read_file: !include nope.md\n",
            r"s\.yaml:3: !include nope\.md: cannot read: No such file",
        ),
        (
            "tool_descriptions:\n  read_file: !include []\n",
            r"s\.yaml:3: !include takes a file name",
        ),
        (
            "tool_descriptions:\n  frob: text\n",
            r"s\.yaml:2: tool_descriptions: unknown tool 'frob'",
        ),
        ("tool_descriptions:\n  read_file: '  '\n", r"tool_descriptions: .*read_file: empty"),
    ],
)
def test_bad_includes_and_descriptions_are_one_line(
    tmp_path: Path, yaml_text: str, message: str
) -> None:
    (tmp_path / "s.yaml").write_text("extends: quick\n" + yaml_text)
    with pytest.raises(ScenarioError, match=message) as exc:
        load_scenario(str(tmp_path / "s.yaml"))
    assert "\n" not in str(exc.value)
