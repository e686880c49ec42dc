"""``generate --agent 'cmd:...'``: the sandbox a command runs in, said on the start line and in
the summary; a program of the host that is outside the Docker image runs there from its folder
mounted read-only; what cannot run in the chosen sandbox is one line and exit 2 before anything
starts; the usual model variables are set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cmd_agent import AGENT

from agentload.trace.trace import load_trace


def _generate(
    out: Path, agent: str, sandbox: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", agent, "-s", "quick",
            "--sandbox", sandbox, "-o", str(out), "--json"]  # fmt: skip
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=300, check=False, env=env or None
    )


@pytest.fixture
def agent_prefix() -> Iterator[Path]:
    """A folder of its own outside the Docker image (``PREFIX/bin/tiny-agent``), open to the
    sandbox's user (pytest's own temp folders are not)."""
    prefix = Path(tempfile.mkdtemp(prefix="agentload-test-agent-", dir="/var/tmp"))
    try:
        prefix.chmod(0o755)
        (prefix / "bin").mkdir(mode=0o755)
        exe = prefix / "bin" / "tiny-agent"
        exe.write_text("#!/usr/bin/env python3\n" + AGENT)
        exe.chmod(0o755)
        yield prefix
    finally:
        import shutil

        shutil.rmtree(prefix, ignore_errors=True)


def test_a_host_program_on_the_users_path_runs_in_docker_from_its_folder(
    docker_client: Any, agent_prefix: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "PATH": f"{agent_prefix / 'bin'}:{os.environ['PATH']}"}
    done = _generate(tmp_path, "cmd:tiny-agent", "docker", env)
    assert done.returncode == 0, done.stderr[-3000:]
    start = [ln for ln in done.stderr.splitlines() if ln.startswith("agentload: --agent ")]
    assert start == [
        "agentload: --agent cmd:tiny-agent: sandbox docker (--sandbox docker); "
        f"mounted read-only: {agent_prefix}"
    ]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["sandbox"] == "docker (--sandbox docker)"
    [row] = out["sessions"]
    assert row["end_reason"] == "done" and row["calls"] == 3, row
    [session] = load_trace(Path(out["trace"])).sessions.values()
    assert session.sandbox == "docker" and not session.meta["sandbox_id"].startswith("local-")


def test_the_summary_says_which_sandbox_ran_the_product(tmp_path: Path) -> None:
    argv = [sys.executable, "-m", "agentload", "generate", "--agent", "cmd:true", "-s", "quick",
            "--sandbox", "local", "-o", str(tmp_path)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "agentload: --agent cmd:true: sandbox local (--sandbox local)\n" in done.stderr
    assert "sandbox: local (--sandbox local)\n" in done.stdout


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("cmd:/nonexistent/agentload-agent --task x", "/nonexistent/agentload-agent does not "
         "exist on this host"),
        ("cmd:agentload-no-such-agent -p x", "`agentload-no-such-agent` is found neither on "
         "this host's PATH nor on the local sandbox's"),
    ],
)  # fmt: skip
def test_a_program_that_cannot_run_is_one_line_and_exit_2(
    command: str, says: str, tmp_path: Path
) -> None:
    done = _generate(tmp_path / "out", command, "local")
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"agentload: error: --agent {command!r}: {says}"), line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_an_interpreter_the_sandbox_lacks_is_one_line_and_exit_2(
    agent_prefix: Path, tmp_path: Path
) -> None:
    exe = agent_prefix / "agent"  # open to the confined sandbox's user (pytest's folder is not)
    exe.write_text("#!/usr/bin/env agentload-no-such-node\nconsole.log('hi')\n")
    exe.chmod(0o755)
    done = _generate(tmp_path / "out", f"cmd:{exe}", "local")
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert (
        "its interpreter `agentload-no-such-node` (#!/usr/bin/env agentload-no-such-node) is "
        "found neither on this host's PATH nor on the local sandbox's" in line
    ), line


def test_a_program_nobody_can_reach_is_refused_for_docker(
    docker_client: Any, tmp_path: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("the sandbox's user is yours: it reaches what you reach")
    exe = tmp_path / "bin" / "agent"  # under pytest's temp folder: rwx for root only
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\necho hi\n")
    exe.chmod(0o755)
    done = _generate(tmp_path / "out", f"cmd:{exe}", "docker")
    assert done.returncode == 2, done.stderr[-2000:]
    [line] = done.stderr.strip().splitlines()
    assert "the Docker sandbox's user (nobody) cannot reach it" in line, line
    assert "chmod o+rx" in line and "--sandbox local" in line


def test_the_usual_model_variables_are_set(tmp_path: Path) -> None:
    check = ('test "$OPENAI_MODEL" = "$AGENTLOAD_MODEL" && test "$ANTHROPIC_MODEL" = "$OPENAI_MODEL"'
             ' && test "$GEMINI_MODEL" = "$OPENAI_MODEL" && test -n "$GEMINI_API_KEY"'
             ' && test "$GOOGLE_GEMINI_BASE_URL/v1" = "$OPENAI_BASE_URL" && echo all set')  # fmt: skip
    done = _generate(tmp_path, f"cmd:{check}", "local")
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = json.loads(done.stdout.strip().splitlines()[-1])["sessions"]
    assert row["end_reason"] == "done", row


def _offline_image_view() -> Any:
    """What a Docker sandbox of the offline image sees (no daemon needed to know it)."""
    from agentload.sandboxes.choice import SandboxChoice
    from agentload.sandboxes.image import host_mounts, image_path

    return SandboxChoice("docker", "test", tuple(host_mounts()), tuple(image_path().split(":")))


@pytest.mark.parametrize(
    "command",
    ["cd sub && agentload-no-such-agent", "$AGENT_HOME/bin/agent", "./in-the-workspace -p x",
     "(agentload-no-such-agent)", "FOO=1 exec true"],
)  # fmt: skip
def test_shell_syntax_and_workspace_paths_are_left_to_the_shell(command: str) -> None:
    from agentload.products.placement import place
    from agentload.products.registry import product

    chosen = product(f"cmd:{command}")
    assert chosen is not None
    placed = place(chosen, None, _offline_image_view())
    assert (placed.mounts, placed.path) == ([], [])


def test_a_cached_install_is_mounted_whole_for_its_bin_entry() -> None:
    from real_agents import agent_exe

    from agentload.products.placement import place
    from agentload.products.registry import product

    exe = agent_exe("qwen-code@0.15.10")  # node_modules/.bin/qwen -> ../@qwen-code/.../cli.js
    chosen = product(f"cmd:env NO_COLOR=1 {exe} --yolo 'fix it'")
    assert chosen is not None
    placed = place(chosen, None, _offline_image_view())
    assert placed.mounts == [str(exe.parents[2])] and placed.path == []  # node: /usr/bin


@pytest.mark.parametrize("sandbox", ["docker", "local"])
def test_the_cached_qwen_code_runs_as_a_command_in_either_sandbox(
    sandbox: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The issue's user: ``cmd:`` with the path of an installed product, the first time, in
    Docker (mounted read-only) and in the local sandbox (Node under its memory limit)."""
    from real_agents import agent_exe

    if sandbox == "docker":
        request.getfixturevalue("docker_client")
    exe = agent_exe("qwen-code@0.15.10")
    done = _generate(tmp_path, f'cmd:{exe} --yolo "$AGENTLOAD_TASK"', sandbox)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    [row] = out["sessions"]
    assert row["end_reason"] == "done" and row["calls"] >= 3, row
    assert out["sandbox"] == f"{sandbox} (--sandbox {sandbox})"
