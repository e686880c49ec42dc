"""Issue 49, round 3 of hostile input: what still ended in a traceback, a hang, unbounded memory
or a silent exit 0 is one ``agentload: error:`` line and exit 2: stdout that cannot be written
(``/dev/full``, closed), hosts no resolver takes (a bad IDN label, a 64-character label), a
300-character file name, an override of 5,000 digits, a ``--scrape-metrics`` that is no URL,
FIFOs and devices named as inputs, and a YAML list of millions of items. A Docker daemon or image
that is missing was an error printed after ``s0-0: started``: now it is the one line, first."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from genrun import one_line_exit_2

sys.path.insert(0, str(Path(__file__).parents[1] / "replay"))
from replay_traces import agentic_trace

DEAD = "http://127.0.0.1:9/v1"
NAME = "/tmp/" + "b" * 300


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return agentic_trace(tmp_path_factory.mktemp("t") / "t.agentload.jsonl.zst", sessions=1)


def _cli(
    argv: list[str], stdout: Any = subprocess.PIPE, **kw: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentload", *argv],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        timeout=180,  # (a hang is the failure; the YAML refusal takes ~8 s, more under load)
        **kw,
    )


def _one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    shown = f"rc={proc.returncode} stderr={proc.stderr[-2000:]!r}"
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, shown
    assert len(lines) == 1 and lines[0].startswith("agentload: error: "), shown
    return lines[0]


# -- stdout that cannot be written ----------------------------------------------------------


@pytest.mark.parametrize("closed", [False, True], ids=["dev-full", "closed"])
@pytest.mark.parametrize(
    "argv", [["scenarios", "list"], ["trace", "stats", "--json"], ["trace", "validate"]]
)
def test_stdout_that_cannot_be_written_is_one_line(
    trace: Path, argv: list[str], closed: bool
) -> None:
    if argv[0] == "trace":
        argv = [*argv, str(trace)]
    if closed:  # the shell's ``>&-``
        proc, why = _cli(argv, stdout=None, preexec_fn=lambda: os.close(1)), "closed"
    else:
        with open("/dev/full", "w") as full:
            proc, why = _cli(argv, stdout=full), "No space left on device"
    assert _one_line(proc) == f"agentload: error: stdout: cannot write ({why})"


# -- hosts, names, numbers, URLs --------------------------------------------------------------

HOSTS = {"bad-idn": "xn--zz.example", "label-64": "a" * 64 + ".example"}


@pytest.mark.parametrize("host", sorted(HOSTS))
@pytest.mark.parametrize("command", ["generate", "record", "replay"])
def test_a_host_no_resolver_takes_is_one_line_up_front(
    trace: Path, host: str, command: str, tmp_path: Path
) -> None:
    url = f"http://{HOSTS[host]}/v1"
    argv = {
        "generate": ["generate", "-n", "1", "--endpoint", url, "-o", str(tmp_path)],
        "record": ["record", "--upstream", url, "-o", str(tmp_path)],
        "replay": ["replay", str(trace), "--model", "m", "--endpoint", url],
    }[command]
    # (record, in a child with a timeout: a proxy that took the host would serve forever)
    line = _one_line(_cli(argv)) if command == "record" else one_line_exit_2(argv)
    assert "its host is no valid domain name" in line, line
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "validate", NAME],
        ["trace", "stats", NAME],
        ["trace", "inspect", NAME],
        ["scenarios", "show", NAME],
        ["serve", "--profile", NAME],
        ["compare", NAME, NAME],
        ["replay", NAME, "--model", "m", "--endpoint", DEAD],
    ],
    ids=lambda a: "-".join(x for x in a[:2] if not x.startswith("/")),
)
def test_a_300_character_file_name_is_one_line(argv: list[str]) -> None:
    line = one_line_exit_2(argv)
    assert "file name too long" in line.lower(), line


def test_an_override_of_5000_digits_is_one_line() -> None:
    line = one_line_exit_2(["generate", "-n", "1", "-c", "seed=" + "9" * 5000, "--endpoint", DEAD])
    assert "-c" in line and "a value cannot be read" in line and "digits" in line, line


# -- a sandbox that cannot open: one line before any session starts ---------------------------

AGENTS = ["langgraph", "cmd:true"]
"""Our own agent (its sessions open their sandboxes) and an agent product (its run chooses one)."""


@pytest.mark.parametrize("agent", AGENTS)
def test_no_docker_daemon_is_one_line_before_any_session(tmp_path: Path, agent: str) -> None:
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/agentload-49.sock"}
    argv = ["generate", "--agent", agent, "--sandbox", "docker", "-o", str(tmp_path)]
    proc = _cli(argv, env=env)
    line = _one_line(proc)
    assert "no Docker daemon answers" in line and "started" not in proc.stdout, proc.stdout


@pytest.mark.parametrize("sandbox", ["docker", "auto"])
@pytest.mark.parametrize("agent", AGENTS)
def test_a_missing_image_is_one_line_before_any_session(
    docker_client: Any, tmp_path: Path, agent: str, sandbox: str
) -> None:
    image = "agentload-no-such-image:49"
    argv = ["generate", "--agent", agent, "--sandbox", sandbox, "-o", str(tmp_path)]
    proc = _cli([*argv, "-c", f"sandbox.image={image}"])
    line = _one_line(proc)
    assert f"image {image} is not on this Docker host" in line, line
    assert "started" not in proc.stdout, proc.stdout
    assert not any(tmp_path.iterdir()), sorted(p.name for p in tmp_path.iterdir())


def test_a_scrape_url_that_is_no_url_is_refused(trace: Path) -> None:
    argv = ["replay", str(trace), "--model", "m", "--endpoint", DEAD]
    line = one_line_exit_2([*argv, "--scrape-metrics", "not a url"])
    assert "--scrape-metrics" in line and "not an http(s):// URL" in line, line
    # one bad URL among several is refused too
    line = one_line_exit_2([*argv, "--scrape-metrics", "http://127.0.0.1:9/metrics,not a url"])
    assert "--scrape-metrics" in line and "not an http(s):// URL" in line, line


# -- FIFOs and devices named as inputs ---------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "inspect", "{fifo}"],
        ["trace", "stats", "{fifo}"],
        ["trace", "import", "weka", "{fifo}", "-o", "{out}"],
        ["trace", "import", "mooncake", "/dev/zero", "-o", "{out}"],
        ["trace", "import", "auto", "/dev/zero", "-o", "{out}"],
    ],
    ids=lambda a: "-".join(a[:3]),
)
def test_a_fifo_or_device_named_as_input_is_refused_at_once(
    argv: list[str], tmp_path: Path
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    filled = [a.format(fifo=fifo, out=tmp_path / "o.agentload.jsonl.zst") for a in argv]
    line = _one_line(_cli(filled))  # (a FIFO opened for reading would hang: the timeout)
    assert "not a regular file" in line and ("FIFO" in line or "device" in line), line


def _cap_memory() -> None:
    cap = 1536 * 1024 * 1024  # address space: the run needs a few hundred MiB
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))


def test_a_yaml_list_of_millions_is_refused_within_bounded_memory(tmp_path: Path) -> None:
    """A 12 MB scenario of 3M list items composed to ~2 GB before its node count was looked
    at; the count now stops the parser itself (under a 1.5 GiB cap a MemoryError would be a
    traceback)."""
    big = tmp_path / "big.yaml"
    big.write_text("- 1\n" * 3_000_000)
    line = _one_line(_cli(["scenarios", "show", str(big)], preexec_fn=_cap_memory))
    assert "more than 200,000 YAML nodes" in line, line
