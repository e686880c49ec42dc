"""The policy's common ground: a request read as a ``Conversation``, and the plain reply.

``BasePolicy.conversation`` seeds the conversation's random choices (a hash of the server seed,
the request's seed and the message contents) and which of agentload's agents it comes from
(``roles.infer_role``: from the tools offered and the system message). ``plain`` answers any conversation that is not one of agentload's own
agents: plain text, and tool calls only when tools are offered (honouring ``tool_choice``:
``none``, ``auto``, ``required`` or a named function), their arguments filled from the tool's
JSON schema (and made valid for it, ``argfill``). ``vocab_for``, ``prose`` and ``schema_args``
serve the agent policy as well.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from typing import Any

from agentload.endpoint.policy.argfill import Filler
from agentload.endpoint.policy.facts import Facts
from agentload.endpoint.policy.prose import Prose, Vocab
from agentload.endpoint.policy.roles import infer_role
from agentload.endpoint.policy.textgen import TextTokens
from agentload.endpoint.policy.types import Conversation, Decision, PolicyConfig

__all__ = ["BasePolicy"]


def _digest(seed: int, mids: Sequence[str], extra: str = "") -> int:
    h = hashlib.blake2b(f"{seed}|{extra}".encode(), digest_size=8)
    for m in mids:
        h.update(m.encode())
    return int.from_bytes(h.digest(), "big")


_CODE_EXT = (".py", ".c", ".h", ".js", ".ts", ".go", ".rs", ".java", ".rb", ".cpp")
_WORDS = re.compile(r"[A-Za-z][A-Za-z_\-]{3,}")


class BasePolicy:
    """What every request gets: its ``Conversation``, its vocabulary and prose, tool arguments
    filled from a schema, and ``plain``, the reply to a conversation that is not an agentload
    agent. ``Policy`` (the package's) adds ``decide``, the dispatch on the role."""

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
        return Conversation(
            messages=messages,
            mids=mids,
            tools=list(schemas),
            tool_schemas=schemas,
            tool_choice=tool_choice,
            prompt_tokens=prompt_tokens,
            rng=random.Random(digest := _digest(seed, mids, str(len(tools)))),
            digest=digest,
            stable_rng=random.Random(_digest(seed, mids[:2], "stable")),
            role=infer_role(messages, list(schemas)),
        )

    def turn_rng(self, conv: Conversation, upto: int) -> random.Random:
        """A generator seeded by the conversation's messages after the first (a system message
        the harness may refresh) up to ``upto`` (inclusive): the same for every request of one
        user turn when ``upto`` is that turn's user message."""
        return random.Random(_digest(self.seed, conv.mids[1 : upto + 1], "turn"))

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
        """Arguments for a tool from its JSON schema, filled from the conversation and made
        valid for the schema (``argfill.Filler``)."""
        fn = conv.tool_schemas.get(name, {})
        params, desc = fn.get("parameters"), fn.get("description")
        params = params if isinstance(params, dict) else {}
        props: dict[str, Any] = params.get("properties") or {}
        required = params.get("required") or list(props)[:1]
        given = {key: self._value(conv, key, props.get(key) or {}, vocab) for key in required}
        return Filler(params, desc if isinstance(desc, str) else "").fill(given)

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
