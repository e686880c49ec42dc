"""The policy reads real tool outputs: real search hits, a real failing unittest run."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentload import contract
from agentload.endpoint import SimulatorServer

from .conftest import post
from .harness import MiniTools, email_workspace, run_session

CALC = '''\
"""Tiny calculator."""


def parse_amount(text):
    """Parse '12.50' into cents."""
    whole, _, frac = text.partition(".")
    return int(whole) * 100 + int(frac or 0)


def total(items):
    return sum(parse_amount(i) for i in items)
'''
TEST = """\
import unittest

from pkg.calc import parse_amount, total


class TestCalc(unittest.TestCase):
    def test_parse_amount(self):
        self.assertEqual(parse_amount("$3.00"), 300)

    def test_total(self):
        self.assertEqual(total(["1.5", "2.25"]), 375)


if __name__ == "__main__":
    unittest.main()
"""


def _make_repo(tmp_path: Path, argv: list[str]) -> MiniTools:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "calc.py").write_text(CALC)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "__init__.py").write_text("")
    (tmp_path / "tests" / "test_calc.py").write_text(TEST)
    return MiniTools(tmp_path, argv)


@pytest.fixture
def repo(tmp_path: Path) -> MiniTools:
    return _make_repo(tmp_path, [sys.executable, "-m", "unittest", "-v"])


RUNNERS = {
    "unittest": [sys.executable, "-m", "unittest", "-v"],
    "pytest": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
}
_FRAME = re.compile(r'File "/workspace/([^"]+)", line (\d+)|^([\w/.]+\.py):(\d+):', re.M)


def _ask(srv: Any, messages: list[dict[str, Any]], names: list[str], **kw: Any) -> dict[str, Any]:
    body = {"model": srv.model, "messages": messages, "tools": contract.tool_schemas(names), **kw}
    r = post(srv.base_url, body)
    assert r.status_code == 200, r.text
    msg: dict[str, Any] = r.json()["choices"][0]["message"]
    return msg


def _calls(msg: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (c["function"]["name"], json.loads(c["function"]["arguments"]))
        for c in msg.get("tool_calls") or ()
    ]


def _play(srv: Any, tools: MiniTools, messages: list[dict[str, Any]], names: list[str]) -> Any:
    """One call; run its tool calls for real; return (calls, messages extended)."""
    msg = _ask(srv, messages, names)
    calls = _calls(msg)
    messages = [*messages, {k: v for k, v in msg.items() if k in ("role", "content", "tool_calls")}]
    for tc, (name, args) in zip(msg.get("tool_calls") or (), calls, strict=True):
        messages.append(
            {"role": "tool", "tool_call_id": tc["id"], "content": tools.call(name, args)}
        )
    return calls, messages


def test_code_search_follows_real_hits(simulator: Any, repo: MiniTools) -> None:
    names = list(contract.SUBAGENT_TOOLS[contract.CODE_SEARCH])
    msgs = [
        {"role": "system", "content": "You are a code-search sub-agent. Search."},
        {"role": "user", "content": "Find where `parse_amount` is defined and who calls it."},
    ]
    calls, msgs = _play(simulator, repo, msgs, names)
    assert calls and calls[0][0] == "search_code" and "parse_amount" in calls[0][1]["pattern"]
    hits = msgs[-1]["content"]
    assert "pkg/calc.py:" in hits  # a real hit from the real search
    calls, msgs = _play(simulator, repo, msgs, names)
    reads = [a for n, a in calls if n == "read_file"]
    assert reads, calls
    hit_lines = {(ln.split(":")[0], int(ln.split(":")[1])) for ln in hits.splitlines()}
    for a in reads:
        assert any(p == a["path"] and a["start_line"] <= ln <= a["end_line"] for p, ln in hit_lines)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_test_runner_reads_the_real_traceback_locations(
    simulator: Any, tmp_path: Path, runner: str
) -> None:
    repo = _make_repo(tmp_path, RUNNERS[runner])
    names = list(contract.SUBAGENT_TOOLS[contract.TEST_RUNNER])
    msgs = [
        {"role": "system", "content": "You are a test-runner sub-agent. Run."},
        {"role": "user", "content": "Run the tests and report the failures."},
    ]
    calls, msgs = _play(simulator, repo, msgs, names)
    assert calls == [("run_tests", {})]
    out = msgs[-1]["content"]
    if runner == "unittest":
        assert "ERROR: test_parse_amount" in out and 'File "/workspace/pkg/calc.py"' in out
    else:
        assert "FAILED tests/test_calc.py::TestCalc::test_parse_amount" in out
        assert "pkg/calc.py:7: ValueError" in out
    calls, msgs = _play(simulator, repo, msgs, names)
    reads = [a for n, a in calls if n == "read_file"]
    assert reads
    frames = {
        (m.group(1) or m.group(3), int(m.group(2) or m.group(4))) for m in _FRAME.finditer(out)
    }
    assert frames
    for a in reads:
        assert any(p == a["path"] and a["start_line"] <= n <= a["end_line"] for p, n in frames)
    # It ends with a summary that quotes the real failure, without tool calls.
    for _ in range(6):
        msg = _ask(simulator, msgs, names)
        if not msg.get("tool_calls"):
            break
        _, msgs = _play(simulator, repo, msgs, names)
    assert not msg.get("tool_calls")
    assert "test_calc.py" in msg["content"] or "calc.py" in msg["content"]


def _orchestrator_messages(repo: MiniTools) -> list[dict[str, Any]]:
    system = "Lead the team.\n\n## Repository map\n" + "\n".join(repo.files())
    hits = repo.search_code("parse_amount")
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "The totals are wrong; fix `parse_amount`."},
        {
            "role": "assistant",
            "content": "Searching.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "search_code", "arguments": '{"pattern": "parse_amount"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": hits},
    ]


def test_orchestrator_targets_real_paths_and_is_deterministic(
    make_server: Callable[..., SimulatorServer], repo: MiniTools
) -> None:
    msgs = _orchestrator_messages(repo)
    names = [*contract.DIRECT_TOOLS, contract.DELEGATE]
    known = set(repo.files())
    read_hits = 0
    first_by_seed = {}
    for seed in range(12):
        srv = make_server(seed=seed)
        msg = _ask(srv, msgs, names)
        again = _ask(srv, msgs, names)
        # Same seed, same request -> same reply, tool call ids included (they go into the
        # next request, so a run stays reproducible).
        assert msg["tool_calls"] == again["tool_calls"] and msg["content"] == again["content"]
        assert len({c["id"] for c in msg["tool_calls"]}) == len(msg["tool_calls"])
        first_by_seed[seed] = json.dumps(_calls(msg))
        for name, args in _calls(msg):
            if name == "list_files" and args.get("path"):
                assert any(k.startswith(args["path"] + "/") for k in known)
            elif "path" in args:
                assert args["path"] in known
            if name == "read_file" and args["path"] == "pkg/calc.py":
                read_hits += 1
            if name == "delegate":
                assert args["kind"] in contract.SUBAGENT_ROLES and args["task"]
        srv.stop()
    assert read_hits >= 1  # some seeds read the file the search hit
    assert len(set(first_by_seed.values())) > 1  # seeds change choices


def test_orchestrator_answers_at_context_target_and_honours_tool_choice(
    simulator: Any, make_server: Callable[..., SimulatorServer], repo: MiniTools
) -> None:
    """The target is the server's own pacing (its PolicyConfig), not anything in the request."""
    names = [*contract.DIRECT_TOOLS, contract.DELEGATE]
    assert _ask(simulator, _orchestrator_messages(repo), names).get("tool_calls")
    paced = make_server(policy_overrides={"context_target": 100})
    done = _ask(paced, _orchestrator_messages(repo), names)
    assert not done.get("tool_calls") and done["content"].startswith("## Report")
    msgs = _orchestrator_messages(repo)
    none = _ask(simulator, msgs, names, tool_choice="none")
    assert not none.get("tool_calls")
    named = _ask(
        simulator, msgs, names, tool_choice={"type": "function", "function": {"name": "read_file"}}
    )
    (call,) = _calls(named)
    assert call[0] == "read_file" and call[1]["path"] in set(repo.files())


def test_summary_lengths_follow_the_config(
    make_server: Callable[..., SimulatorServer], repo: MiniTools
) -> None:
    simulator = make_server(policy_overrides={"subagent_max_turns": {"file_reader": 1}})
    names = list(contract.SUBAGENT_TOOLS[contract.FILE_READER])
    sizes = []
    for i in range(6):
        msgs = [
            {"role": "system", "content": "You are a file-reader sub-agent."},
            {"role": "user", "content": f"Read `pkg/calc.py` ({i}) and summarise it."},
        ]
        r = post(
            simulator.base_url,
            {"model": simulator.model, "messages": msgs, "tools": contract.tool_schemas(names)},
        ).json()
        assert not r["choices"][0]["message"].get("tool_calls")
        sizes.append(r["usage"]["completion_tokens"])
    assert all(450 <= s <= 2100 for s in sizes), sizes


@pytest.mark.slow
def test_session_on_real_email_package_never_invents_paths(tmp_path: Path) -> None:
    root = email_workspace(tmp_path)
    with SimulatorServer(seed=5, policy_overrides={"context_target": 24_000}) as srv:
        s = run_session(
            srv.base_url,
            srv.model,
            root,
            [sys.executable, "-m", "unittest", "test.test_email.test_email"],
            initial=6000,
            task=textwrap.dedent("""\
                The test suite (the `email` package, tests under test/test_email) fails after
                a recent change. Find the failing tests and the cause, and fix the code."""),
        )
    assert s.invented == []
    assert s.final.startswith("## Report")
    assert s.orchestrator_prompts[-1] >= 24_000 > s.orchestrator_prompts[-2]
    roles = {r for r, _, _, _ in s.tool_calls}
    assert {"orchestrator"} < roles  # sub-agents ran
    runs = [out for _, n, _, out in s.tool_calls if n == "run_tests"]
    assert any("FAIL" in o or "ERROR" in o for o in runs)
    assert httpx.Client  # the harness used the official client over real HTTP


_REPLY_SCRIPT = """
import json, sys
from agentload.endpoint.server import Simulator
from agentload.endpoint.server.request import parse_chat_request
sim = Simulator(seed=11)
req = parse_chat_request(sys.stdin.buffer.read())
mids, pt, _ = sim.prompt(req)
r = sim.reply(req, mids, pt)
print(json.dumps([r.content, [(i, n, "".join(a)) for i, n, a in r.tool_calls], pt]))
"""


def test_choices_do_not_depend_on_the_process(repo: MiniTools) -> None:
    """Same seed and request in two processes with different hash seeds: the same reply."""
    import os
    import subprocess

    body = json.dumps(
        {
            "model": "agentload-sim",
            "messages": _orchestrator_messages(repo),
            "tools": contract.tool_schemas([*contract.DIRECT_TOOLS, contract.DELEGATE]),
        }
    )
    outs = []
    for hash_seed in ("1", "2"):
        r = subprocess.run(
            [sys.executable, "-c", _REPLY_SCRIPT],
            input=body,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONHASHSEED": hash_seed},
        )
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1]
    assert json.loads(outs[0])[1]  # the orchestrator called tools


def test_orchestrator_edits_a_line_it_read_then_runs_the_tests(
    make_server: Callable[..., SimulatorServer], repo: MiniTools
) -> None:
    from agentload.endpoint import PolicyConfig

    srv = make_server(policy=PolicyConfig(orchestrator_weights={"edit_file": 1.0}))
    names = [*contract.DIRECT_TOOLS, contract.DELEGATE]
    read = repo.read_file("pkg/calc.py")
    msgs = [
        *_orchestrator_messages(repo)[:2],
        {
            "role": "assistant",
            "content": "Reading.",
            "tool_calls": [
                {
                    "id": "call_r",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "pkg/calc.py"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_r", "content": read},
    ]
    msg = _ask(srv, msgs, names)
    ((name, args),) = _calls(msg)
    assert name == "edit_file" and args["path"] == "pkg/calc.py"
    source = (repo.root / "pkg" / "calc.py").read_text()
    assert source.count(args["old"] + "\n") == 1 and args["new"].startswith(args["old"] + "  #")
    # Applied for real, the edit changes no behaviour: the module still compiles and runs.
    edited = source.replace(args["old"], args["new"])
    ns: dict[str, Any] = {}
    exec(compile(edited, "calc.py", "exec"), ns)
    assert ns["parse_amount"]("1.50") == 150
    msgs += [
        {"role": "assistant", "content": msg["content"], "tool_calls": msg["tool_calls"]},
        {"role": "tool", "tool_call_id": msg["tool_calls"][0]["id"], "content": "edited"},
    ]
    after = _calls(_ask(srv, msgs, names))
    assert [n for n, _ in after] == ["run_tests"]


def test_profile_file_carries_policy_knobs(
    make_server: Callable[..., SimulatorServer], tmp_path: Path
) -> None:
    prof = tmp_path / "tuned.yaml"
    prof.write_text(
        "name: tuned\ninstant: true\n"
        "policy:\n  summary_tokens: {median: 600, p90: 650, min: 580, max: 700}\n"
        "  subagent_max_turns: {file_reader: 1}\n"
    )
    srv = make_server(profile=prof)
    msgs = [
        {"role": "system", "content": "Summarise what you read."},
        {"role": "user", "content": "Read `pkg/calc.py` and summarise it."},
    ]
    names = list(contract.SUBAGENT_TOOLS[contract.FILE_READER])
    r = post(
        srv.base_url, {"model": srv.model, "messages": msgs, "tools": contract.tool_schemas(names)}
    ).json()
    assert 580 <= r["usage"]["completion_tokens"] <= 720
