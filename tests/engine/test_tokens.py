"""One token unit against a real engine: llama.cpp's llama-server serving Gemma 3 270M.

Gemma's tokenizer counts well above o200k on agentload's prompts (the issue saw 28% more on
every call; 1.18 on the calibration text here). ``generate`` measures that ratio before its
sessions (one text completion of a sample of the first prompt), records it in the trace
header and the JSON summary, and sizes
the orchestrator's first prompt by ``initial_context_tokens / ratio`` of ours, so the engine's
own count of that prompt lands on the scenario's size. One short run: the session is cut by
a 2-second wall budget (an 8K-token first call takes far longer on CPU); then the first
prompt, rebuilt exactly as the session built it, is sent once with ``max_tokens`` 1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentload import contract
from agentload.agents.first_prompt import build_orchestrator_prompt
from agentload.scenarios import load_scenario
from agentload.scenarios.workspace import materialise
from agentload.tokenizer import ChatTokenCounter
from agentload.trace import load_trace

pytestmark = pytest.mark.engine


def test_generate_sizes_the_first_prompt_in_the_engines_tokens(engine: Any, tmp_path: Path) -> None:
    out = tmp_path / "t.agentload.jsonl.zst"
    argv = ["generate", "-s", "quick", "--endpoint", engine.url, "--model", engine.model]
    argv += ["--sandbox", "local", "-c", "wall_budget_s=2", "--json", "--out", str(out)]
    proc = subprocess.run(
        [sys.executable, "-m", "agentload", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "calibration failed" not in proc.stderr
    trace = load_trace(out)
    cal = trace.header.token_calibration
    assert cal is not None and cal.error is None and cal.sample_tokens_server
    ratio = cal.server_per_ours
    assert ratio > 1.1, ratio  # Gemma counts well above o200k
    assert json.loads(proc.stdout)["token_ratio"] == ratio
    (sess,) = trace.sessions.values()
    budget = sess.meta["initial_context_budget_ours"]
    assert budget == round(8_000 / ratio)

    # The session's first prompt, rebuilt from the same inputs, as the engine counts it.
    s = load_scenario("quick")
    ws = materialise(s.workspace.recipe, tmp_path / "ws", s.workspace.fault)
    tools = contract.tool_schemas(tuple(s.orchestrator.tools))
    prompt = build_orchestrator_prompt(
        root=ws.root,
        files=ws.files(),
        instructions=s.orchestrator.system_prompt,
        task=s.task,
        tools=tools,
        budget_tokens=budget,
        counter=ChatTokenCounter(),
    )
    assert prompt.tokens == sess.meta["initial_context_tokens_ours"]
    body = {
        "model": engine.model,
        "messages": [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
        ],
        "tools": tools,
        "max_tokens": 1,
    }
    resp = httpx.post(f"{engine.url}/chat/completions", json=body, timeout=600)
    assert resp.status_code == 200, resp.text
    server = resp.json()["usage"]["prompt_tokens"]
    print(f"server/ours {ratio:.3f}; first prompt {server} engine tokens ({prompt.tokens} ours)")
    # Within 10% of the scenario's 8K; our own count would have been off by the ratio.
    assert abs(server - 8_000) <= 800, (server, prompt.tokens, ratio)
