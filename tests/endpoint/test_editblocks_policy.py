"""The text-edit agent policy (``endpoint/policy/editblocks.py``) on the requests aider sends.

``data/aider-0.86.2-requests.json.gz`` holds real aider requests, captured as the file says:
its first request (a repository map, no file in the chat), the next one (the file it was asked
for added), and the one after the edit (its test run's output); and the calendar eval task's
first two. Each is posted to a simulator over HTTP; the reply must be what aider can act on:
a file name of the map alone on a line, then one SEARCH/REPLACE block whose SEARCH lines are
whole lines of the file in the chat (the reference fix in oracle mode), then a closing answer.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentload.endpoint import SimulatorServer
from agentload.evals.tasks import get_task

DATA = json.loads(gzip.decompress(Path(__file__).with_name("data").joinpath(
    "aider-0.86.2-requests.json.gz").read_bytes()))  # fmt: skip
BLOCK = re.compile(
    r"^(?P<path>\S+)\n```\w*\n<<<<<<< SEARCH\n(?P<search>.*?)\n=======\n(?P<replace>.*?)\n"
    r">>>>>>> REPLACE\n```",
    re.M | re.S,
)


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimulatorServer]]:
    with (
        SimulatorServer(profile="instant", model="agentload-sim", seed=0) as plain,
        SimulatorServer(profile="instant", model="agentload-sim", seed=0,
                        policy_overrides={"oracle": True}) as oracle,
    ):  # fmt: skip
        yield {"plain": plain, "oracle": oracle}


def _reply(sim: SimulatorServer, body: dict[str, Any]) -> str:
    r = httpx.post(f"{sim.base_url}/chat/completions", json={**body, "stream": False}, timeout=30)
    r.raise_for_status()
    msg = r.json()["choices"][0]["message"]
    assert not msg.get("tool_calls")
    return str(msg["content"])


def _chat_files(body: dict[str, Any]) -> dict[str, str]:
    for m in body["messages"]:
        text = m["content"] if isinstance(m["content"], str) else ""
        if text.startswith("I have *added these files to the chat*"):
            found = re.finditer(r"^(\S+)\n```\n(.*?)^```$", text, re.M | re.S)
            return {f.group(1): f.group(2) for f in found}
    return {}


def _apply(reply: str, files: dict[str, str]) -> tuple[str, str]:
    """The one block of ``reply`` applied as aider does (whole lines): its path, the new text."""
    [block] = list(BLOCK.finditer(reply))
    path, search, replace = block["path"], block["search"], block["replace"]
    text = files[path]
    lines = text.splitlines(keepends=True)
    want = [ln + "\n" for ln in search.split("\n")]
    at = next(i for i in range(len(lines)) if lines[i : i + len(want)] == want)
    new = lines[:at] + [ln + "\n" for ln in replace.split("\n")] + lines[at + len(want) :]
    return path, "".join(new)


def test_without_the_file_it_names_one_of_the_map_alone_on_a_line(sims: Any) -> None:
    body = DATA["email"][0]
    assert not _chat_files(body)
    reply = _reply(sims["plain"], body)
    named = [ln for ln in reply.splitlines() if re.fullmatch(r"[\w./-]+\.py", ln)]
    assert len(named) == 1 and "test" not in named[0], reply
    repo_map = next(
        m["content"] for m in body["messages"] if "summaries of some files" in str(m["content"])
    )
    assert f"\n{named[0]}:\n" in repo_map
    assert "<<<<<<< SEARCH" not in reply


def test_with_the_file_it_edits_whole_lines_of_it(sims: Any) -> None:
    body = DATA["email"][1]
    files = _chat_files(body)
    reply = _reply(sims["plain"], body)
    path, new = _apply(reply, files)
    old = files[path]
    added = set(new.splitlines()) - set(old.splitlines())
    assert len(new.splitlines()) == len(old.splitlines()) + 1 and len(added) == 1, added
    assert next(iter(added)).strip().startswith("#")  # a comment: no behaviour changes
    compile(new, path, "exec")


def test_after_the_edit_it_closes_on_what_came_back(sims: Any) -> None:
    body = DATA["email"][2]
    assert "I ran this command" in str(body["messages"][-1]["content"])
    reply = _reply(sims["plain"], body)
    assert "<<<<<<< SEARCH" not in reply and reply.startswith("The change is in place"), reply


def test_in_oracle_mode_the_block_is_the_tasks_reference_fix(sims: Any) -> None:
    fault = get_task("calendar-leapdays").fault
    first = _reply(sims["oracle"], DATA["calendar"][0])
    assert f"\n{fault.path}\n" in first, first
    body = DATA["calendar"][1]
    files = _chat_files(body)
    assert fault.new in files[fault.path]
    path, new = _apply(_reply(sims["oracle"], body), files)
    assert path == fault.path and fault.old in new and fault.new not in new
    # without the oracle: the same request gets the harmless edit, not the fix
    _, plain = _apply(_reply(sims["plain"], body), files)
    assert fault.new in plain
