"""A small, real agent loop for testing the simulator's policy (not the product's agents).

``MiniTools`` executes the contract's tools on a real directory (regex search over real files,
real reads with the ``# path (lines a-b of N)`` header, a real test run in a subprocess whose
output paths are rewritten to ``/workspace/...`` as in a Docker sandbox). ``run_session`` plays
an orchestrator and its sub-agents against a simulator over HTTP with the official client and
returns every request and tool call, so tests can check what the policy did with real outputs.
"""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai

from agentload import contract
from agentload.tokenizer import ChatTokenCounter

STDLIB = Path(json.__file__).parent.parent


class MiniTools:
    """The contract's tools over a real directory."""

    def __init__(self, root: Path, test_argv: list[str], max_chars: int = 30_000) -> None:
        self.root = root
        self.test_argv = test_argv
        self.max_chars = max_chars

    def files(self) -> list[str]:
        return sorted(
            str(p.relative_to(self.root))
            for p in self.root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )

    def call(self, name: str, args: dict[str, Any]) -> str:
        out = getattr(self, name)(**args)
        return out if len(out) <= self.max_chars else out[: self.max_chars] + "\n[truncated]"

    def search_code(self, pattern: str, path: str = "", max_results: int = 50) -> str:
        rx = re.compile(pattern)
        hits = []
        for rel in self.files():
            if not rel.startswith(path) or not rel.endswith(".py"):
                continue
            for i, line in enumerate((self.root / rel).read_text(errors="replace").splitlines(), 1):
                if rx.search(line):
                    hits.append(f"{rel}:{i}: {line.strip()[:200]}")
                    if len(hits) >= max_results:
                        return "\n".join(hits)
        return "\n".join(hits) or "no matches"

    def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> str:
        f = self.root / path
        if not f.is_file():
            return f"error: no such file: {path}"
        lines = f.read_text(errors="replace").splitlines()
        end = min(len(lines), end_line or len(lines))
        body = "\n".join(lines[start_line - 1 : end])
        return f"# {path} (lines {start_line}-{end} of {len(lines)})\n{body}"

    def list_files(self, path: str = "") -> str:
        return "\n".join(p for p in self.files() if p.startswith(path)) or "no files"

    def run_tests(self, target: str = "") -> str:
        argv = [*self.test_argv, target] if target else self.test_argv
        r = subprocess.run(argv, cwd=self.root, capture_output=True, text=True, timeout=300)
        out = (r.stdout + r.stderr).replace(str(self.root) + "/", "/workspace/")
        return f"{out}\nexit code: {r.returncode}"

    def edit_file(self, path: str, old: str, new: str) -> str:
        return "error: edits are disabled in this harness"


def email_workspace(dest: Path) -> Path:
    """A copy of the stdlib ``email`` package and its tests with a fault in header decoding."""
    import shutil

    shutil.copytree(STDLIB / "email", dest / "email", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "test").mkdir()
    (dest / "test" / "__init__.py").write_text("")
    for sub in ("support", "test_email"):
        shutil.copytree(
            STDLIB / "test" / sub, dest / "test" / sub, ignore=shutil.ignore_patterns("__pycache__")
        )
    qp = dest / "email" / "quoprimime.py"
    qp.write_text(qp.read_text().replace("s = s.replace('_', ' ')", "s = s.replace('_', '')"))
    return dest


def system_prompt(tools: MiniTools, counter: ChatTokenCounter, budget: int) -> str:
    files = tools.files()
    text = "You lead a team of coding agents.\n\n## Repository map\n" + "\n".join(files)
    for rel in files:
        if not rel.startswith("email/") or not rel.endswith(".py"):
            continue
        piece = f"\n\n## File: {rel}\n{(tools.root / rel).read_text()}"
        if counter.count_text(text + piece) > budget:
            continue
        text += piece
    return text


@dataclass
class Session:
    """Everything a session did."""

    orchestrator_prompts: list[int] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[tuple[str, str, dict[str, Any], str]] = field(default_factory=list)
    final: str = ""
    invented: list[tuple[str, str]] = field(default_factory=list)


def _complete(client: openai.OpenAI, model: str, messages: list[Any], tools: list[Any]) -> Any:
    return client.chat.completions.create(model=model, messages=messages, tools=tools)


def run_agent(
    client: openai.OpenAI,
    model: str,
    tools: MiniTools,
    role: str,
    system: str,
    task: str,
    sess: Session,
    max_calls: int = 400,
) -> str:
    names = contract.SUBAGENT_TOOLS.get(role) or (*contract.DIRECT_TOOLS, contract.DELEGATE)
    schemas = contract.tool_schemas(list(names))
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    for _ in range(max_calls):
        t0 = time.perf_counter()
        r = _complete(client, model, messages, schemas)
        took = time.perf_counter() - t0
        sess.requests.append(
            {"role": role, "messages": len(messages), "usage": r.usage, "seconds": took}
        )
        if role == contract.ORCHESTRATOR:
            sess.orchestrator_prompts.append(r.usage.prompt_tokens)
        msg = r.choices[0].message
        calls = msg.tool_calls or []
        messages.append(
            {
                "role": "assistant",
                "content": msg.content,
                **({"tool_calls": [c.model_dump() for c in calls]} if calls else {}),
            }
        )
        if not calls:
            return msg.content or ""
        seen = "\n".join(str(m.get("content") or "") for m in messages[:-1])
        for c in calls:
            args = json.loads(c.function.arguments)
            path = args.get("path")
            if path and path not in seen:
                sess.invented.append((role, path))
            if c.function.name == contract.DELEGATE:
                wording = args["kind"].replace("_", "-")
                sub_sys = f"You are a {wording} sub-agent. Answer with a summary."
                out = run_agent(client, model, tools, args["kind"], sub_sys, args["task"], sess)
            else:
                out = tools.call(c.function.name, args)
            sess.tool_calls.append((role, c.function.name, args, out))
            messages.append({"role": "tool", "tool_call_id": c.id, "content": out})
    raise AssertionError(f"{role} did not finish within {max_calls} calls")


def run_session(
    base_url: str,
    model: str,
    root: Path,
    test_argv: list[str],
    *,
    initial: int,
    task: str = "",
) -> Session:
    """One session; the server's own pacing (``PolicyConfig.context_target``...) ends it."""
    tools = MiniTools(root, test_argv)
    counter = ChatTokenCounter()
    system = system_prompt(tools, counter, initial)
    sess = Session()
    with openai.OpenAI(base_url=base_url, api_key="x", max_retries=0) as client:
        sess.final = run_agent(client, model, tools, contract.ORCHESTRATOR, system, task, sess)
    return sess


if __name__ == "__main__":  # calibration: python tests/endpoint/harness.py [initial target]
    import statistics
    import tempfile

    from agentload.endpoint import SimulatorServer

    initial, target = (int(a) for a in (sys.argv[1:3] or ("60000", "400000")))
    pacing = {"context_target": target}
    with tempfile.TemporaryDirectory() as d, SimulatorServer(policy_overrides=pacing) as srv:
        root = email_workspace(Path(d))
        s = run_session(
            srv.base_url,
            srv.model,
            root,
            [sys.executable, "-m", "unittest", "test.test_email.test_email"],
            initial=initial,
            task="The test suite of this repository (the `email` package and its tests under "
            "test/test_email) has started failing after a recent change. Find the failing "
            "tests, work out which change causes them, and fix the code.",
        )
        p = s.orchestrator_prompts
        deltas = [b - a for a, b in itertools.pairwise(p)]
        outs = [r["usage"].completion_tokens for r in s.requests]
        print(f"orchestrator calls {len(p)}: prompt {p[0]} -> {p[-1]}")
        print(
            "appended median",
            statistics.median(deltas),
            "p90",
            statistics.quantiles(deltas, n=10)[-1],
            "max",
            max(deltas),
        )
        print(
            "all calls",
            len(outs),
            "output median",
            statistics.median(outs),
            "p90",
            statistics.quantiles(outs, n=10)[-1],
        )
        from collections import Counter

        lat = [r["seconds"] for r in s.requests if r["role"] == "orchestrator"]
        print(
            "orchestrator request latency median",
            round(statistics.median(lat), 4),
            "last 10 mean",
            round(sum(lat[-10:]) / 10, 4),
            "max",
            round(max(lat), 4),
        )

        print(Counter((r, n) for r, n, _, _ in s.tool_calls))
