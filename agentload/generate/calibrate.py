"""One token unit: how many of the server's tokens one of ours is, measured once per run.

``generate`` counts tokens with its own tokenizer (``agentload.tokenizer``, o200k by default),
while the server under test counts with its model's: Gemma 3's tokenizer gives 18-28% more
tokens than o200k on agentload's prompts. The scenario's sizes (``orchestrator.initial_context_tokens``,
``context_target``) are meant in the server's tokens, so before the sessions start
``calibrate`` sends one small request:

    POST {base}/completions  {"model": M, "prompt": SAMPLE, "max_tokens": 1}

where ``SAMPLE`` is the first prompt's kind of text: the orchestrator's first prompt (tool
schemas, instructions, repository map, key files), built on the scenario's own workspace, of
which evenly spaced runs of lines make about ``SAMPLE_TOKENS`` of ours. The ratio is the server's ``usage.prompt_tokens`` over our count of
the same text. Sessions then size first prompts to ``budget / ratio`` tokens of ours, and
compare ``context_target`` with the server-reported prompt tokens (ours × ratio when a reply
carries no usage).

A text completion, not a chat request: both sides count the same text without either side's
chat framing, and the chat route (its prefix cache, its request counts) is left to the
sessions. When the request fails (no ``/completions`` route, an error, no usage, an absurd
count) one warning line says so and the ratio is 1.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from agentload import contract
from agentload.agents.first_prompt import build_orchestrator_prompt
from agentload.auth import api_key_from_env
from agentload.client.failures import answer_text
from agentload.client.stream import StreamClient
from agentload.errors import AgentloadError
from agentload.errortext import one_line
from agentload.masking import redact_url
from agentload.sandboxes.tempdirs import WORKSPACES, owned_tempdir
from agentload.tokenizer import ChatTokenCounter, render_message, render_tools
from agentload.trace.schema import TokenCalibration

if TYPE_CHECKING:
    from agentload.scenarios.models import Scenario

__all__ = ["SAMPLE_TOKENS", "TokenRatio", "calibrate", "measure", "sample_text"]

SAMPLE_TOKENS = 2000
"""Size of the calibration sample, in our tokens (at most the first prompt's own budget)."""
_RUN_LINES = 8
"""Lines per run of the sample (see ``sample_text``)."""
_LINE_CHARS = 240
"""Longer lines are cut into pieces of this many characters before runs are taken."""
RATIO_RANGE = (0.2, 5.0)
"""A measured ratio outside this range is not believed (a server that reports something else)."""


@dataclass(frozen=True)
class TokenRatio:
    """The run's server/ours token ratio and how it was obtained."""

    ratio: float
    sample_tokens_ours: int
    sample_tokens_server: int | None = None
    error: str | None = None
    """Why the ratio is 1 (the calibration failed); None when it was measured."""

    def record(self) -> TokenCalibration:
        """The trace header's ``token_calibration``."""
        return TokenCalibration(
            server_per_ours=self.ratio,
            sample_tokens_ours=self.sample_tokens_ours,
            sample_tokens_server=self.sample_tokens_server,
            error=self.error,
        )


def sample_text(scenario: Scenario, workdir: Path, counter: ChatTokenCounter) -> str:
    """The first prompt's kind of text, at most about ``SAMPLE_TOKENS`` of ours: the
    orchestrator's whole first request (tools piece, system and user messages under our
    framing convention) at the scenario's budget, then, when longer, evenly spaced runs of
    its lines, so the sample mixes schemas, map and files as the prompt does."""
    from agentload.scenarios.workspace import materialise

    ws = materialise(scenario.workspace.recipe, workdir / "ws", scenario.workspace.fault)
    tools = contract.tool_schemas(tuple(scenario.orchestrator.tools), scenario.tool_descriptions)
    prompt = build_orchestrator_prompt(
        root=ws.root,
        files=ws.files(),
        instructions=scenario.orchestrator.system_prompt,
        task=scenario.task,
        tools=tools,
        budget_tokens=scenario.orchestrator.initial_context_tokens,
        counter=counter,
    )
    text = "".join(
        [
            render_tools(tools),
            render_message({"role": "system", "content": prompt.system}),
            render_message({"role": "user", "content": prompt.user}),
        ]
    )
    if prompt.tokens <= SAMPLE_TOKENS:
        return text
    # lines, long ones (the tools piece is one line: ~15K tokens with full manuals) cut into
    # pieces of at most _LINE_CHARS characters, so that every run is small
    lines = [
        line[i : i + _LINE_CHARS]
        for line in text.splitlines(keepends=True)
        for i in range(0, len(line), _LINE_CHARS)
    ]
    runs = ["".join(lines[i : i + _RUN_LINES]) for i in range(0, len(lines), _RUN_LINES)]
    # The first run (the head of the tools piece) always; of the others, run i when the
    # running share crosses an integer: evenly spaced.
    # runs differ in size (tool-manual pieces are denser than file lines), so the share taken
    # is corrected twice by the sample's measured size
    head = counter.count_text(runs[0])
    share = max(0.0, SAMPLE_TOKENS - head) / max(1, prompt.tokens - head)
    sample = runs[0]
    for _ in range(3):
        rest = [r for i, r in enumerate(runs[1:]) if int((i + 1) * share) > int(i * share)]
        sample = runs[0] + "".join(rest)
        got = counter.count_text(sample) - head
        if got <= 0:
            break
        share = min(1.0, share * max(0, SAMPLE_TOKENS - head) / got)
    return sample


async def measure(
    base_url: str, model: str, text: str, counter: ChatTokenCounter, timeout_s: float
) -> TokenRatio:
    """Send ``text`` as one text completion (``max_tokens`` 1) and read the server's count."""
    ours = counter.count_text(text)
    http = StreamClient(base_url, api_key=api_key_from_env(), timeout_s=timeout_s)
    body = {"model": model, "prompt": text, "max_tokens": 1, "stream": False}
    try:
        out = await http.post("/completions", body, timeout_s)
    finally:
        await http.aclose()
    why = out.error or ""
    if out.status is not None and out.status != 200:
        why = " ".join(answer_text(out.status, out.body or b"").split())[:200]
    elif out.status == 200:
        try:
            usage = (orjson.loads(out.body or b"null") or {}).get("usage") or {}
        except (orjson.JSONDecodeError, AttributeError) as exc:
            return TokenRatio(1.0, ours, None, f"{type(exc).__name__}: {exc}")
        server = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(server, int) or isinstance(server, bool) or server <= 0:
            why = "the reply reports no usage.prompt_tokens"
        elif not RATIO_RANGE[0] <= server / ours <= RATIO_RANGE[1]:
            why = f"{server} server tokens for {ours} of ours is not believable"
        else:
            return TokenRatio(server / ours, ours, server)
    return TokenRatio(1.0, ours, None, http.hide(why))


async def calibrate(
    base_url: str, model: str, scenario: Scenario, counter: ChatTokenCounter, timeout_s: float
) -> TokenRatio:
    """The run's ratio (see the module docstring); a failure is one warning line on stderr."""
    workdir = owned_tempdir(WORKSPACES)
    try:
        text = await asyncio.to_thread(sample_text, scenario, workdir, counter)
    except (AgentloadError, OSError) as exc:  # the sessions will meet it and say so
        got = TokenRatio(1.0, 0, None, f"no sample: {exc}")
        where = "the sample"
    else:
        got = await measure(base_url, model, text, counter, timeout_s)
        where = f"POST {redact_url(base_url)}/completions"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if got.error is not None:
        print(
            one_line(
                f"agentload: warning: token calibration failed ({where}: {got.error}); "
                "server tokens are taken as ours (ratio 1)"
            ),
            file=sys.stderr,
            flush=True,
        )
    return got
