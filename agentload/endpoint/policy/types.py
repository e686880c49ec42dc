"""The simulator's "model": decides what each request gets back.

Deterministic: a hash of the server seed and the request content seeds every choice, so the
same conversation always gets the same reply. Conversations of agentload's own agents (role
marker on the first line of the system message, see ``agentload.contract``) are played
by ``agent_policy`` as a competent coding agent reading the real tool outputs; any other
conversation gets a plain-text answer, and tool calls only when tools are offered (honouring
``tool_choice``: ``none``, ``auto``, ``required`` or a named function).

Lengths come from ``PolicyConfig`` (log-normal, set by median and p90, clipped).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from agentload.contract import parse_marker
from agentload.endpoint.policy.facts import Facts, extract
from agentload.endpoint.policy.prose import Prose, Vocab
from agentload.endpoint.policy.textgen import TextTokens
from agentload.tokenizer import _content_text

__all__ = ["Conversation", "Decision", "LengthDist", "Policy", "PolicyConfig"]


class LengthDist(BaseModel):
    """Log-normal token-count distribution given by its median and 90th percentile."""

    model_config = ConfigDict(extra="forbid")

    median: int = Field(description="Median length in tokens.")
    p90: int = Field(description="90th percentile in tokens (>= median).")
    min: int = Field(default=1, description="Lower clip.")
    max: int = Field(default=8192, description="Upper clip.")

    def sample(self, rng: random.Random) -> int:
        sigma = math.log(max(self.p90, self.median) / self.median) / 1.2816
        v = rng.lognormvariate(math.log(self.median), sigma) if sigma > 0 else self.median
        return int(min(self.max, max(self.min, round(v))))


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
            "delegate": 0.30,
            "read_file": 0.36,
            "search_code": 0.22,
            "run_tests": 0.06,
            "list_files": 0.03,
            "edit_file": 0.03,
        },
        description="Relative odds of the orchestrator's next action (after its first round).",
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
        default=(2, 5),
        description="Range of tool-calling turns a sub-agent takes before summarising.",
    )
    subagent_whole_file_prob: float = Field(
        default=0.25, ge=0, le=1, description="Odds that a file_reader reads a whole file."
    )


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
    attrs: dict[str, str] = field(default_factory=dict)

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
        out = []
        for m in self.messages:
            if m.get("role") != "assistant":
                continue
            for tc in m.get("tool_calls") or ():
                fn = tc.get("function") or {}
                try:
                    args = orjson.loads(fn.get("arguments") or "{}")
                except orjson.JSONDecodeError:
                    args = {}
                out.append((str(fn.get("name")), args if isinstance(args, dict) else {}))
        return out

    @property
    def turns(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    def forced_tool(self) -> str | None:
        tc = self.tool_choice
        if isinstance(tc, dict):
            return str(tc["function"]["name"])
        return None


def _digest(seed: int, mids: Sequence[str], extra: str = "") -> int:
    h = hashlib.blake2b(f"{seed}|{extra}".encode(), digest_size=8)
    for m in mids:
        h.update(m.encode())
    return int.from_bytes(h.digest(), "big")


_CODE_EXT = (".py", ".c", ".h", ".js", ".ts", ".go", ".rs", ".java", ".rb", ".cpp")
_WORDS = re.compile(r"[A-Za-z][A-Za-z_\-]{3,}")


class Policy:
    """Entry point: ``decide(...)`` for one request."""

    def __init__(self, seed: int, tokens: TextTokens, config: PolicyConfig | None = None) -> None:
        self.seed = seed
        self.tok = tokens
        self.config = config or PolicyConfig()

    def conversation(
        self,
        messages: Sequence[dict[str, Any]],
        mids: Sequence[str],
        tools: Sequence[dict[str, Any]],
        tool_choice: str | dict[str, Any],
        prompt_tokens: int,
        request_seed: int | None = None,
    ) -> Conversation:
        seed = self.seed if request_seed is None else self.seed * 1_000_003 + request_seed
        schemas = {t["function"]["name"]: t["function"] for t in tools}
        conv = Conversation(
            messages=messages,
            mids=mids,
            tools=list(schemas),
            tool_schemas=schemas,
            tool_choice=tool_choice,
            prompt_tokens=prompt_tokens,
            rng=random.Random(digest := _digest(seed, mids, str(len(tools)))),
            digest=digest,
            stable_rng=random.Random(_digest(seed, mids[:2], "stable")),
        )
        first = messages[0] if messages else {}
        if first.get("role") in ("system", "developer"):
            text = _content_text(first.get("content"))
            parsed = parse_marker(text.split("\n", 1)[0])
            if parsed is not None:
                conv.role, conv.attrs = parsed
        return conv

    def decide(self, conv: Conversation) -> Decision:
        if conv.role is not None:
            from agentload.endpoint.policy.agent_policy import decide_agent

            return decide_agent(self, conv)
        return self.plain(conv)

    # -- any other conversation --------------------------------------------------------------
    def vocab_for(self, conv: Conversation, facts: Facts | None = None) -> Vocab:
        f = facts or conv.facts()
        last_user = next(
            (
                conv.text(i)
                for i in range(len(conv.messages) - 1, -1, -1)
                if conv.messages[i].get("role") == "user"
            ),
            "",
        )
        words = list(dict.fromkeys(w.lower() for w in _WORDS.findall(last_user)))[:60]
        code_first = sorted(f.paths[:200], key=lambda p: not p.endswith(_CODE_EXT))
        return Vocab(
            paths=code_first,
            locs=[f"{loc.path}:{loc.line}" for loc in f.locations][:200],
            idents=(f.defs + f.idents)[:300],
            errors=f.errors,
            code=f.code_lines,
            words=words,
        )

    def prose(self, conv: Conversation, vocab: Vocab) -> Prose:
        return Prose(conv.rng, vocab, self.tok)

    def plain(self, conv: Conversation) -> Decision:
        vocab = self.vocab_for(conv)
        prose = self.prose(conv, vocab)
        wants_tool = (
            conv.tools
            and conv.tool_choice != "none"
            and (conv.tool_choice != "auto" or conv.messages[-1].get("role") == "user")
        )
        if wants_tool:
            name = conv.forced_tool() or conv.rng.choice(conv.tools)
            args = self.schema_args(conv, name, vocab)
            n = self.config.reasoning_tokens.sample(conv.rng) // 3
            segs = prose.plain(n) if conv.rng.random() < 0.5 else []
            return Decision(segs, [(name, args)], prose.plain, "tool")
        n = self.config.answer_tokens.sample(conv.rng)
        return Decision(prose.plain(n), [], prose.plain, "answer")

    def schema_args(self, conv: Conversation, name: str, vocab: Vocab) -> dict[str, Any]:
        """Arguments for a tool from its JSON schema, filled from the conversation."""
        params = conv.tool_schemas.get(name, {}).get("parameters") or {}
        props: dict[str, Any] = params.get("properties") or {}
        required = params.get("required") or list(props)[:1]
        out: dict[str, Any] = {}
        for key in required:
            spec = props.get(key) or {}
            out[key] = self._value(conv, key, spec, vocab)
        return out

    def _value(self, conv: Conversation, key: str, spec: dict[str, Any], vocab: Vocab) -> Any:
        rng = conv.rng
        if spec.get("enum"):
            return rng.choice(spec["enum"])
        t = spec.get("type", "string")
        if isinstance(t, list):
            t = next((x for x in t if x != "null"), "string")
        if t == "integer":
            return rng.randint(1, 10)
        if t == "number":
            return round(rng.uniform(0, 10), 2)
        if t == "boolean":
            return rng.random() < 0.5
        if t == "array":
            return []
        if t == "object":
            return {}
        if ("path" in key or "file" in key) and vocab.paths:
            return rng.choice(vocab.paths)
        pool = vocab.idents or vocab.words
        return rng.choice(pool) if pool else "example"
