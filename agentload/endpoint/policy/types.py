"""The policy's data types: its knobs, a request as it sees it, and its reply.

``PolicyConfig`` holds the knobs of the simulated agent behaviour; lengths are ``LengthDist``
(log-normal, set by median and p90, clipped). ``Conversation`` is a request as the policy reads
it (messages, their content ids, the tools offered, the seeded random generators, the agent
role it plays, inferred by ``roles``); ``Decision`` is its reply before length limits.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentload.contract import CODE_SEARCH, FILE_READER, SUBAGENT_ROLES, TEST_RUNNER
from agentload.endpoint.policy.facts import Facts, extract
from agentload.fitted import CountModel
from agentload.tokenizer import _content_text

__all__ = ["Conversation", "Decision", "LengthDist", "PolicyConfig", "call_of"]


class LengthDist(CountModel):
    """Log-normal token-count distribution given by its median and 90th percentile (the one
    log-normal count of ``agentload.fitted``, its sampler included)."""

    model_config = ConfigDict(extra="forbid", frozen=False)

    max: int = Field(default=8192, ge=1, description="Upper clip.")


class PolicyConfig(BaseModel):
    """Knobs of the simulated agent behaviour (defaults calibrated to real coding agents)."""

    model_config = ConfigDict(extra="forbid")

    reasoning_tokens: LengthDist = Field(
        default=LengthDist(median=180, p90=1200, min=12, max=4000),
        description="Text an agent writes alongside its tool calls.",
    )
    answer_tokens: LengthDist = Field(
        default=LengthDist(median=250, p90=1500, min=8, max=6000),
        description="Plain answers to conversations that are not agentload agents.",
    )
    summary_tokens: LengthDist = Field(
        default=LengthDist(median=1000, p90=1800, min=500, max=2000),
        description="A sub-agent's final summary (the delegate tool result).",
    )
    final_answer_tokens: LengthDist = Field(
        default=LengthDist(median=900, p90=2000, min=200, max=4000),
        description="The orchestrator's final answer.",
    )
    orchestrator_weights: dict[str, float] = Field(
        default={
            "delegate": 0.02,
            "read_file": 0.36,
            "search_code": 0.22,
            "run_tests": 0.06,
            "list_files": 0.03,
            "edit_file": 0.03,
        },
        description="Relative odds of the orchestrator's next action (after its first round).",
    )
    oracle: bool = Field(
        default=False,
        description="Eval's oracle mode: the orchestrator of an eval task applies the task's "
        "reference fix once it has read the faulty code through its tools (policy/oracle).",
    )
    first_round_delegations: int = Field(
        default=3, ge=1, description="Parallel delegations in the orchestrator's first round."
    )
    parallel_delegations: list[float] = Field(
        default=[0.55, 0.3, 0.15],
        description="Odds of 1, 2, 3 ... parallel delegate calls when delegating.",
    )
    parallel_direct_prob: float = Field(
        default=0.25,
        ge=0,
        le=1,
        description="Odds that a direct-tool round issues two calls at once.",
    )
    whole_file_prob: float = Field(
        default=0.16, ge=0, le=1, description="Odds that a direct read_file reads the whole file."
    )
    read_window: tuple[int, int] = Field(
        default=(30, 90),
        description="Lines before/after a location that a ranged read_file covers.",
    )
    search_max_results: int = Field(
        default=20, ge=1, description="max_results asked of search_code."
    )
    subagent_turns: tuple[int, int] = Field(
        default=(8, 22),
        description="Range of tool-calling turns a sub-agent takes before summarising.",
    )
    subagent_calls: LengthDist | None = Field(
        default=None,
        description="Calls a sub-agent makes, its summary included (a scenario's "
        "pacing.subagent_calls, fitted to real sessions); null: subagent_turns.",
    )
    turn_calls: LengthDist | None = Field(
        default=None,
        description="Calls the orchestrator makes in one user turn, its answer included (a "
        "scenario's pacing.turn_calls, fitted to real sessions): it answers without tool calls "
        "at the turn's last, and the user's next follow-up opens the next; null: it works on "
        "until the context target.",
    )
    subagent_whole_file_prob: float = Field(
        default=0.25, ge=0, le=1, description="Odds that a file_reader reads a whole file."
    )
    # Pacing: when the simulated model itself decides it is done. A real model learns this in
    # training; nothing in a request tells it. `generate` sets these from the scenario when it
    # starts the built-in simulator; `agentload serve` uses the profile's (defaults: the
    # coding-session scenario's). The agents' harness enforces its own limits regardless.
    context_target: int = Field(
        default=400_000,
        ge=1,
        description="The orchestrator answers (its final report) once a request's prompt "
        "tokens reach this.",
    )
    max_rounds: int = Field(
        default=300,
        ge=1,
        description="The orchestrator answers once it has made this many calls.",
    )
    max_parallel_delegations: int = Field(
        default=3, ge=1, description="Most delegate calls the orchestrator issues at once."
    )
    subagent_max_turns: dict[str, int] = Field(
        default={CODE_SEARCH: 24, TEST_RUNNER: 20, FILE_READER: 24},
        description="Per sub-agent kind: it summarises by this call at the latest (a kind "
        "not listed: 6).",
    )

    @field_validator("subagent_max_turns")
    @classmethod
    def _known_kinds(cls, v: dict[str, int]) -> dict[str, int]:
        for kind, n in v.items():
            if kind not in SUBAGENT_ROLES:
                raise ValueError(
                    f"unknown sub-agent kind {kind!r}; valid: {', '.join(SUBAGENT_ROLES)}"
                )
            if n < 1:
                raise ValueError(f"{kind}: must be at least 1")
        return v


@dataclass
class Decision:
    """The policy's reply before length limits: draft text segments and tool calls."""

    segments: list[str]
    tool_calls: list[tuple[str, dict[str, Any]]]
    more: Callable[[int], list[str]]
    kind: str = "answer"


@dataclass
class Conversation:
    """A request as the policy sees it."""

    messages: Sequence[dict[str, Any]]
    mids: Sequence[str]
    tools: list[str]
    tool_schemas: dict[str, dict[str, Any]]
    tool_choice: str | dict[str, Any]
    prompt_tokens: int
    rng: random.Random
    stable_rng: random.Random
    digest: int = 0
    role: str | None = None
    """The agentload agent the request comes from (``roles.infer_role``); None: plain."""

    def text(self, i: int) -> str:
        return _content_text(self.messages[i].get("content"))

    def facts(self, start: int = 0) -> Facts:
        """Facts merged over messages ``start..``, cached per message."""
        out = Facts()
        for i in range(start, len(self.messages)):
            out.merge(extract(self.text(i), self.mids[i]))
            for j, tc in enumerate(self.messages[i].get("tool_calls") or ()):
                fn = tc.get("function") or {}
                out.merge(extract(str(fn.get("arguments") or ""), f"{self.mids[i]}:{j}"))
        return out.dedupe()

    def calls(self) -> list[tuple[str, dict[str, Any]]]:
        """Every tool call made so far (name, parsed arguments)."""
        out: list[tuple[str, dict[str, Any]]] = []
        for m in self.messages:
            if m.get("role") != "assistant":
                continue
            out.extend(call_of(tc) for tc in m.get("tool_calls") or ())
        return out

    @property
    def turns(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    def forced_tool(self) -> str | None:
        tc = self.tool_choice
        if isinstance(tc, dict):
            return str(tc["function"]["name"])
        return None


def call_of(tool_call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A chat tool call's name and parsed arguments (``{}`` when they are not a JSON object)."""
    fn = tool_call.get("function") or {}
    try:
        args = orjson.loads(fn.get("arguments") or "{}")
    except orjson.JSONDecodeError:
        args = {}
    return str(fn.get("name")), args if isinstance(args, dict) else {}
