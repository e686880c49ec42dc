"""Hostile command lines and files: every one is exit 2 and one line on stderr, never a traceback.

Hypothesis draws option values (out-of-range and special numbers, wrong types, control
characters, huge strings), scenario overrides (``-c key.path=value``) and scenario/profile files
(random bytes, YAML of the wrong shape). The commands run in-process through
``agentload.cli.main``; anything that would send load points at a closed 127.0.0.1 port, so a
value that passes every check still ends at once (exit 2, "unreachable"), never in a run.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentload.cli import one_line
from agentload.errors import ConfigError

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from fuzz_strategies import FILE, VALUE, YAML_VALUE, argv_value, closed_port
from genrun import one_line_exit_2, run_cli
from replay_traces import agentic_trace

_SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
    database=None,
)


DEAD = f"http://127.0.0.1:{closed_port()}/v1"


@pytest.fixture(scope="module")
def tiny_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small agentic trace written by the real writer (load never runs: the endpoint is dead)."""
    return agentic_trace(tmp_path_factory.mktemp("trace") / "t.agentload.jsonl.zst")


GENERATE_OPTIONS = ["-n", "-p", "--seed", "--sandbox", "--model", "-s", "-o"]
REPLAY_OPTIONS = [
    "--concurrency", "--sweep", "--arrival-rate", "--duration", "--sessions", "--gap-scale",
    "--start-at", "--slo", "--gpus", "--power-watts", "--power", "--target-tps-user", "--engine",
    "--session-header", "--session-field", "--max-context", "--fit", "--timeout", "--seed",
]  # fmt: skip


@_SETTINGS
@given(opts=st.lists(st.tuples(st.sampled_from(GENERATE_OPTIONS), VALUE), min_size=1, max_size=3))
def test_generate_options(opts: list[tuple[str, str]], tmp_path: Path) -> None:
    argv = ["generate", "--endpoint", DEAD, "-o", str(tmp_path / "traces")]
    for name, value in opts:
        argv += [name, argv_value(value)]
    # a fuzzed relative -o (generate creates its folder before the run fails) lands here, not
    # in the repository
    with contextlib.chdir(tmp_path):
        one_line_exit_2(argv)


@_SETTINGS
@given(opts=st.lists(st.tuples(st.sampled_from(REPLAY_OPTIONS), VALUE), min_size=1, max_size=3))
def test_replay_options(opts: list[tuple[str, str]], tiny_trace: Path, tmp_path: Path) -> None:
    argv = ["replay", str(tiny_trace), "--endpoint", DEAD, "--model", "m"]
    argv += ["--out", str(tmp_path / "results")]
    for name, value in opts:
        argv += [name, argv_value(value)]
    one_line_exit_2(argv)


# -- scenario overrides and files ------------------------------------------------------------
_KEYS = st.sampled_from(
    [
        "seed", "sessions", "wall_budget_s", "max_rounds", "context_target_tokens",
        "tool_timeouts_s.run_tests", "tool_timeouts_s", "sandbox.memory", "sandbox.pids",
        "sandbox.kind", "subagents.code_search.tools", "subagents", "orchestrator",
        "orchestrator.max_tokens", "endpoint.profile", "workspace", "nope.deeper", "",
    ]
)  # fmt: skip


@_SETTINGS
@given(key=_KEYS, value=st.one_of(VALUE, YAML_VALUE.map(lambda v: yaml.safe_dump(v).strip())))
def test_scenario_overrides(key: str, value: str) -> None:
    code, out, err = run_cli(["scenarios", "show", "quick", "-c", f"{key}={argv_value(value)}"])
    assert "Traceback" not in out + err
    if code == 0:  # a value that validates: the resolved scenario prints, nothing on stderr
        assert err == "" and out.strip()
    else:
        assert code == 2, (key, value, err)
        assert len([line for line in err.splitlines() if line.strip()]) == 1, err


@pytest.fixture
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("files")


@_SETTINGS
@given(data=FILE)
def test_scenario_files(data: bytes, scratch: Path) -> None:
    path = scratch / "scenario.yaml"
    path.write_bytes(data)
    code, out, err = run_cli(["scenarios", "show", str(path)])
    assert "Traceback" not in out + err
    if code != 0:
        assert code == 2, (data, err)
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and str(path) in lines[0], (data, err)


@_SETTINGS
@given(data=FILE)
def test_profile_files(data: bytes, scratch: Path) -> None:
    from agentload.endpoint.timing.profiles import load_profile

    path = scratch / "profile.yaml"
    path.write_bytes(data)
    try:
        load_profile(path)
    except ConfigError as exc:
        text = one_line(str(exc))  # what the CLI prints for it
        assert text.startswith(str(path)) and "Traceback" not in text, text
