"""Every tool call the simulator emits is valid for its tool's JSON schema, for the real tool
lists of every agent the project supports.

The lists in ``data/tools/`` are what the real binaries sent to a capture server (see its
README): Claude Code, Codex CLI (multi_agent v1, v2, and its freeform ``apply_patch``), Qwen
Code, opencode, Gemini CLI and mini-swe-agent; agentload's own agents' tools come from
``contract.TOOLS`` (the orchestrator's, and each sub-agent kind's set). Each list is played in-process by the simulator's policy (``Policy.decide``,
what the HTTP server answers with) over whole sessions — several tasks and seeds, oracle mode on
eval tasks (edits), each delegation's sub-agent, and a call of every tool forced by
``tool_choice`` — with results fed back as a product would. Every emitted call is checked
against the tool's schema with ``jsonschema`` (the draft the schema declares, else 2020-12),
and against what the descriptions say: no empty required string, a path absolute where the
property or the tool's description asks for one. The bugs this was written for are asserted
by name: opencode's ``task`` got ``"subagent_type": ""`` (it takes ``explore`` or ``general``),
Qwen Code's ``read_file`` a relative path, its ``glob``/``grep_search`` an empty ``path``.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from agentload import contract
from agentload.endpoint.policy import Policy, PolicyConfig
from agentload.endpoint.policy.argfill import Filler
from agentload.endpoint.policy.session import SUBTASK
from agentload.endpoint.policy.textgen import text_tokens
from agentload.evals.tasks import all_tasks

DATA = Path(__file__).parent / "data" / "tools"
CONTEXTS: dict[str, list[dict[str, Any]]] = json.loads((DATA / "contexts.json").read_text())
"""Each agent's first messages around the task (``{TASK}``), from its capture: where it says it
works (``{CWD}``) and the agent kinds it lists."""
LISTS = sorted(p.stem for p in DATA.glob("*.json") if p.stem != "contexts")
OWN = "agentload-contract"
CWD = "/work/repo"
HOME = "/home/agent"
TASKS = (
    "Fix the bug in calc.py: add(2, 3) returns -1 instead of 5. Run the tests.",
    "The function `parse_line` in parser.py drops the last field of a line. Fix it and run "
    "`python -m pytest tests/test_parser.py`.",
    "Why does tokenize() fail on empty input? Find the cause and fix it.",
)
SEEDS = range(3)
RESULT = (
    "calc.py\nparser.py\ntests/test_parser.py\ntest_calc.py\n"
    "calc.py:1:def add(a, b):\nparser.py:12:def parse_line(line):\n"
    "tests/test_parser.py:8: AssertionError: assert ['a'] == ['a', 'b']\n"
    "test_calc.py:5: AssertionError: assert -1 == 5\n1 failed, 3 passed"
)
"""What every workspace call returns: a listing, search hits and a test failure at once."""

# The agent kinds each product's delegate tool takes (its enum, or the kinds its description or
# instructions list), as the captures show them, and the ones a search and a test run get (an
# explorer where one is listed; Gemini CLI's codebase_investigator runs on a pinned model and
# must return a structured report, so its generalist does both).
KINDS = {
    "claude-code-2.1.332": ("Agent", "subagent_type",
                            {"claude", "Explore", "general-purpose", "Plan", "statusline-setup"}),
    "qwen-code-0.15.10": ("agent", "subagent_type",
                          {"general-purpose", "Explore", "statusline-setup"}),
    "opencode-1.18.33": ("task", "subagent_type", {"explore", "general"}),
    "gemini-cli-0.61.0": ("invoke_agent", "agent_name",
                          {"codebase_investigator", "cli_help", "generalist"}),
}  # fmt: skip
SUITED = {
    "claude-code-2.1.332": ("Explore", "general-purpose"),
    "qwen-code-0.15.10": ("Explore", "general-purpose"),
    "opencode-1.18.33": ("explore", "general"),
    "gemini-cli-0.61.0": ("generalist", "generalist"),
}
# The tools each list's sessions must work with (root agents and sub-agents, not forced).
WORK = {
    "claude-code-2.1.332": {"Agent", "Bash", "Read", "Grep", "Glob", "Edit"},
    "codex-0.171.0": {"exec_command", "spawn_agent", "wait_agent"},
    "codex-0.171.0-multi_agent_v2": {"exec_command", "spawn_agent", "wait_agent"},
    "codex-0.171.0-gpt-5.5": {"exec_command", "apply_patch"},
    "gemini-cli-0.61.0": {"invoke_agent", "run_shell_command", "read_file", "grep_search", "glob",
                          "replace"},
    "mini-swe-agent-2.4.6": {"bash"},
    "opencode-1.18.33": {"task", "bash", "read", "grep", "glob", "edit"},
    "qwen-code-0.15.10": {"agent", "run_shell_command", "read_file", "grep_search", "glob", "edit"},
    OWN: {"delegate", "list_files", "search_code", "read_file", "run_tests"},
}  # fmt: skip


# -- the tool lists and the conversations around them ------------------------------------------
def tool_list(name: str) -> list[dict[str, Any]]:
    if name == OWN:
        return contract.tool_schemas(list(contract.TOOLS))
    tools: list[dict[str, Any]] = json.loads((DATA / f"{name}.json").read_text())
    return tools


def opening(name: str, task: str) -> list[dict[str, Any]]:
    """The first messages of a session, as the agent sends them (``CONTEXTS``)."""
    if name == OWN:
        return [{"role": "system", "content": f"You are a coding agent working in {CWD}."},
                {"role": "user", "content": task}]  # fmt: skip
    text = json.dumps(CONTEXTS[name]).replace("{CWD}", CWD).replace("{HOME}", HOME)
    msgs: list[dict[str, Any]] = json.loads(text.replace("{TASK}", json.dumps(task)[1:-1]))
    return msgs


@dataclass
class Emitted:
    """Every call the policy emitted for one tool list, with the conversation kind it came in."""

    calls: list[tuple[str, dict[str, Any], str]] = field(default_factory=list)

    def of(self, tool: str) -> list[dict[str, Any]]:
        return [args for name, args, _ in self.calls if name == tool]


def _mid(m: dict[str, Any]) -> str:
    return hashlib.blake2b(json.dumps(m, sort_keys=True).encode(), digest_size=8).hexdigest()


def _result(name: str, args: dict[str, Any], spawned: list[str]) -> str:
    """What the product would return (enough for the policy to go on)."""
    if "wait" in name:
        return json.dumps({"status": {a: {"completed": "done: calc.py:1"} for a in spawned}})
    if any(isinstance(v, str) and v.startswith(SUBTASK) for v in args.values()):
        spawned.append(f"agent-{len(spawned) + 1}")
        return json.dumps({"agent_id": spawned[-1], "nickname": "helper"})
    return RESULT


def play(policy: Policy, tools: list[dict[str, Any]], msgs: list[dict[str, Any]],
         choice: Any = "auto", turns: int = 16) -> list[tuple[str, dict[str, Any]]]:  # fmt: skip
    """One session: decide, feed each call's result back, until the policy answers."""
    out: list[tuple[str, dict[str, Any]]] = []
    spawned: list[str] = []
    ids = itertools.count()
    for _ in range(turns):
        conv = policy.conversation(msgs, [_mid(m) for m in msgs], tools, choice, 1000)
        decision = policy.decide(conv)
        if not decision.tool_calls:
            break
        out += decision.tool_calls
        tcs = [{"id": f"call_{next(ids)}", "type": "function",
                "function": {"name": n, "arguments": json.dumps(a)}}
               for n, a in decision.tool_calls]  # fmt: skip
        said = {"role": "assistant", "content": "".join(decision.segments), "tool_calls": tcs}
        msgs = [*msgs, said]
        msgs += [{"role": "tool", "tool_call_id": tc["id"], "content": _result(n, a, spawned)}
                 for tc, (n, a) in zip(tcs, decision.tool_calls, strict=True)]  # fmt: skip
        if choice != "auto":
            break
    return out


@functools.cache
def emitted(name: str) -> Emitted:
    """Every call the policy makes with ``name``'s tools (see the module docstring)."""
    tools = tool_list(name)
    got = Emitted()
    tok = text_tokens("o200k_base")
    oracle = [t.issue for t in all_tasks()[:2]]
    for seed in SEEDS:
        for task, config in [*((t, PolicyConfig()) for t in TASKS),
                             *((t, PolicyConfig(oracle=True)) for t in oracle)]:  # fmt: skip
            policy = Policy(seed, tok, config)
            root = play(policy, tools, opening(name, task))
            got.calls += [(n, a, "root") for n, a in root]
            texts = [v for _, a in root for v in a.values() if isinstance(v, str)]
            for prompt in [v for v in texts if v.startswith(SUBTASK)]:
                sub = play(policy, tools, opening(name, prompt))
                got.calls += [(n, a, "sub") for n, a in sub]
            for kit in contract.SUBAGENT_TOOLS.values() if name == OWN else ():
                sub = play(policy, contract.tool_schemas(kit), opening(name, task))
                got.calls += [(n, a, "sub") for n, a in sub]
    policy, start = Policy(0, tok), opening(name, TASKS[0])
    for t in tools:
        forced = {"type": "function", "function": {"name": t["function"]["name"]}}
        got.calls += [(n, a, "forced") for n, a in play(policy, tools, start, forced)]
    got.calls += [(n, a, "required") for n, a in play(policy, tools, start, "required")]
    return got


# -- what a product checks ------------------------------------------------------------------------
def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def empty_required(schema: dict[str, Any], value: Any, where: str = "") -> list[str]:
    """Required strings given empty (a schema without ``minLength`` lets them through)."""
    out: list[str] = []
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for k in schema.get("required") or ():
            if value.get(k) == "":
                out.append(f"{where}.{k}")
        for k, v in value.items():
            out += empty_required(props.get(k) or {}, v, f"{where}.{k}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, v in enumerate(value):
            out += empty_required(schema["items"], v, f"{where}[{i}]")
    return out


def absolute_keys(fn: dict[str, Any]) -> set[str]:
    """The path properties whose description, or a sentence of the tool's description that names
    them, asks for an absolute path."""
    props = (fn.get("parameters") or {}).get("properties") or {}
    sentences = re.split(r"(?<=[.!?])\s+|\n+", fn.get("description") or "")
    out = set()
    for k, spec in props.items():
        said = str(spec.get("description", ""))
        if not re.search(r"path|file|dir", k, re.I) and "path" not in said.lower():
            continue
        named = [s for s in sentences if re.search(rf"(?<![\w-]){re.escape(k)}(?![\w-])", s)]
        if re.search(r"absolute path", said, re.I) or any("absolute" in s for s in named):
            out.add(k)
    return out


def problems(name: str, calls: list[tuple[str, dict[str, Any], str]]) -> list[str]:
    tools = {t["function"]["name"]: t["function"] for t in tool_list(name)}
    out: list[str] = []
    for tool, args, where in calls:
        if tool not in tools:
            out.append(f"{where} {tool}: not offered")
            continue
        fn = tools[tool]
        schema = fn.get("parameters") or {"type": "object"}
        out += [f"{where} {tool}: {e.message}" for e in validator(schema).iter_errors(args)]
        out += [f"{where} {tool}{p}: empty" for p in empty_required(schema, args)]
        relative = [k for k in absolute_keys(fn) if k in args and not str(args[k]).startswith("/")]
        out += [f"{where} {tool}.{k}: {args[k]!r} is not absolute" for k in relative]
        delegate, key, kinds = KINDS.get(name, ("", "", set()))
        if tool == delegate and key in args and args[key] not in kinds:
            out.append(f"{where} {tool}: {args[key]!r} is not a listed agent kind")
    return out


# -- the tests ------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", [*LISTS, OWN])
def test_every_call_fits_its_tool_schema(name: str) -> None:
    got = emitted(name)
    bad = problems(name, got.calls)
    assert not bad, f"{len(bad)} of {len(got.calls)} calls invalid:\n" + "\n".join(bad[:30])
    used = Counter(tool for tool, _, _ in got.calls)
    offered = [t["function"]["name"] for t in tool_list(name)]
    assert set(used) == set(offered), set(offered) - set(used)  # each one forced at least
    worked = Counter(tool for tool, _, where in got.calls if where in ("root", "sub"))
    assert len(got.calls) >= 60 and WORK[name] <= set(worked), (len(got.calls), worked)


def test_the_real_lists_cover_every_supported_agent() -> None:
    products = {re.sub(r"-\d.*$", "", n) for n in LISTS}
    assert products == {"claude-code", "codex", "qwen-code", "opencode", "gemini-cli",
                        "mini-swe-agent"}  # fmt: skip
    assert set(CONTEXTS) == set(LISTS) == set(WORK) - {OWN}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_delegations_name_a_listed_agent_kind_that_suits_them(name: str) -> None:
    tool, key, kinds = KINDS[name]
    calls = emitted(name).of(tool)
    delegations = [a for a in calls if str(a.get("prompt", "")).startswith(SUBTASK)]
    assert len(delegations) >= 3, calls
    for args in delegations:
        assert args.get(key) in kinds, args
        assert args["prompt"].strip() and (args.get("description", "x")).strip()
    searches = {a[key] for a in delegations if "find where" in a["prompt"]}
    tests = {a[key] for a in delegations if "run the tests" in a["prompt"]}
    assert (searches, tests) == ({SUITED[name][0]}, {SUITED[name][1]})


def test_opencode_task_gets_explore_or_general() -> None:
    calls = [a for a in emitted("opencode-1.18.33").of("task") if "prompt" in a]
    assert calls and {a["subagent_type"] for a in calls} == {"explore", "general"}


def test_qwen_read_file_gets_an_absolute_path() -> None:
    reads = emitted("qwen-code-0.15.10").of("read_file")
    assert len(reads) >= 5
    assert all(a["file_path"].startswith(CWD + "/") for a in reads), reads


def test_qwen_glob_and_grep_search_get_no_empty_path() -> None:
    got = emitted("qwen-code-0.15.10")
    for tool in ("glob", "grep_search"):
        calls = got.of(tool)
        assert len(calls) >= 3, tool
        assert all(a.get("path", CWD).startswith(CWD) and a["pattern"] for a in calls), calls


def test_gemini_lists_and_reads_in_its_workspace() -> None:
    got = emitted("gemini-cli-0.61.0")
    reads = [a for n, a, where in got.calls if n == "read_file" and where != "forced"]
    assert len(reads) >= 5 and all(a["file_path"].startswith(CWD + "/") for a in reads)
    assert all(a.get("dir_path", CWD) == CWD for a in got.of("glob") + got.of("grep_search"))


# -- the filler on what the real lists do not show ------------------------------------------------
def _obj(props: dict[str, Any], required: list[str], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, **more}


DRAFT4 = "http://json-schema.org/draft-04/schema#"
FILLED = [
    pytest.param(_obj({"n": {"type": "integer", "minimum": 5, "exclusiveMinimum": True}}, ["n"],
                      **{"$schema": DRAFT4}), "", {"n": "3"}, {"n": 6}, id="draft4-bound"),
    pytest.param(_obj({"x": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/k"}]}}, ["x"],
                      **{"$defs": {"k": {"type": "string", "enum": ["Alpha", "beta"]}}}),
                 "", {"x": "alpha"}, {"x": "Alpha"}, id="ref-enum"),
    pytest.param(_obj({"todo": {"type": "array", "minItems": 1, "items": _obj(
                          {"id": {"type": "string"}, "done": {"type": "boolean"}},
                          ["id", "done"])}}, ["todo"]),
                 "", {}, {"todo": [{"id": "note", "done": False}]}, id="nested"),
    pytest.param(_obj({"path": {"type": "string"}, "q": {"type": "string", "maxLength": 3}}, ["q"]),
                 "", {"path": "", "q": "abcdef", "zz": 1}, {"q": "abc"}, id="empty-unknown-long"),
    pytest.param(_obj({"dir": {"type": "string", "description": "Directory, relative to the "
                               "repository root"}}, []), "", {"dir": "/w/r/src"}, {"dir": "src"},
                 id="relative"),
    pytest.param(_obj({"file": {"type": "string"}}, ["file"]), "Reads a file.\n- `file` must be "
                 "an absolute path.", {"file": "./a.py"}, {"file": "/w/r/a.py"}, id="absolute"),
]  # fmt: skip


@pytest.mark.parametrize(("schema", "description", "given", "want"), FILLED)
def test_the_filler_makes_any_schema_valid(
    schema: dict[str, Any], description: str, given: dict[str, Any], want: dict[str, Any]
) -> None:
    got = Filler(schema, description, cwd="/w/r", note="note").fill(given)
    assert got == want
    validator(schema).validate(got)
