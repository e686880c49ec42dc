"""Plausible English / code-review prose built from the conversation's own vocabulary.

Sentences come from templates whose slots are filled with paths, ``file:line`` locations,
identifiers, error lines and code lines the conversation really contains, so a summary talks
about the code that was actually read. Output is a list of word-sized segments (what
``TextTokens.fit`` cuts at) and stops once it reaches the requested token count.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

from agentload.endpoint.policy.textgen import TextTokens

__all__ = ["Prose", "Vocab"]

_WORD_RE = re.compile(r"\s*\S+|\s+$")


@dataclass
class Vocab:
    """Slot fillers, all taken from the conversation."""

    paths: list[str] = field(default_factory=list)
    locs: list[str] = field(default_factory=list)
    idents: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    code: list[str] = field(default_factory=list)
    words: list[str] = field(default_factory=list)


_REASON = (
    "Looking at `{loc}`, the `{i}` branch is where the behaviour diverges, so I want to see how `{j}` is called there.",
    "The failure `{e}` points at `{p}`; next I will check the code around it.",
    "`{i}` is defined in `{p}` and used by `{j}`; I will read that part before deciding on a fix.",
    "So far the evidence is consistent: `{i}` handles the common case, but the edge case reaches `{j}` unchanged.",
    "I still need to confirm whether `{p}` is the only caller of `{i}`.",
    "Let me look for other uses of `{i}` to make sure a change there is safe.",
    "The output shows `{e}`, which suggests the regression is in `{i}` rather than in the tests.",
    "The line `{c}` looks suspicious: it assumes the value was already normalised.",
    "Before editing anything I want the full picture of `{p}`, in particular `{i}` and `{j}`.",
    "This narrows it down to `{loc}`.",
    "Two things remain unclear: how `{i}` treats an empty input, and whether `{j}` is covered by a test.",
    "I'll delegate the broader search and read `{p}` myself in the meantime.",
)
_NEUTRAL = (
    "This matches what the earlier results showed.",
    "Nothing else in the module seems to depend on that behaviour.",
    "The rest of the function only formats the result.",
    "That would explain why only some of the tests fail.",
    "The change should stay small and local.",
    "I have not found a second code path that does the same work.",
    "The existing tests cover the normal case but not this one.",
    "Error handling here is defensive, so a wrong value propagates quietly instead of raising.",
)
_FINDING = (
    "- `{loc}`: `{c}` is where `{i}` is handled.",
    "- `{p}` defines `{i}`; it is called from `{j}`.",
    "- The failure reads `{e}`.",
    "- `{i}` and `{j}` share the same helper, so a fix in one affects the other.",
    "- `{loc}` is the first frame inside the repository in the traceback.",
    "- Search hits for `{i}` cluster in `{p}`.",
    "- `{c}` runs before the value is validated.",
)
_PLAIN = (
    "{W} is a reasonable place to start.",
    "In short, {w} and {w2} are related, and the details depend on the context you have in mind.",
    "A common approach is to handle {w} first and then look at {w2}.",
    "If {w} matters most, keep the solution simple and measure before optimising.",
    "There are a few trade-offs here, mostly around {w} and {w2}.",
    "The key point is that {w} should stay consistent with {w2}.",
    "You can verify this with a small example before relying on it.",
)
_GENERIC = ("the input", "the request", "the result", "the configuration", "the data", "the code")


class Prose:
    """Draws sentences with ``rng`` and renders them to token-bounded segment lists."""

    def __init__(self, rng: random.Random, vocab: Vocab, tokens: TextTokens) -> None:
        self.rng = rng
        self.v = vocab
        self.tok = tokens

    def _pick(self, xs: list[str], fallback: str) -> str:
        """Mostly from the front of ``xs`` (the freshest facts come first), sometimes any."""
        if not xs:
            return fallback
        if len(xs) > 25 and self.rng.random() < 0.6:
            return self.rng.choice(xs[:25])
        return self.rng.choice(xs)

    def _fill(self, template: str) -> str:
        v = self.v
        i = self._pick(v.idents, "the helper")
        j = self._pick(v.idents, "its caller")
        w = self._pick(v.words, self.rng.choice(_GENERIC))
        w2 = self._pick(v.words, self.rng.choice(_GENERIC))
        return template.format(
            p=self._pick(v.paths, "the module"),
            loc=self._pick(v.locs, self._pick(v.paths, "the module")),
            i=i,
            j=j,
            e=self._pick(v.errors, "the assertion").replace("`", "'")[:160],
            c=self._pick(v.code, f"{i}(...)").replace("`", "'"),
            w=w,
            w2=w2,
            W=w[:1].upper() + w[1:],
        ).replace("``", "`")

    def _usable(self, pool: tuple[str, ...]) -> list[str]:
        v = self.v
        out = []
        for t in pool:
            if "{loc}" in t and not (v.locs or v.paths):
                continue
            if "{e}" in t and not v.errors:
                continue
            if "{c}" in t and not v.code:
                continue
            if "{p}" in t and not v.paths:
                continue
            if ("{i}" in t or "{j}" in t) and not v.idents:
                continue
            out.append(t)
        return out or list(_NEUTRAL)

    def _render(self, paragraphs: list[str]) -> list[str]:
        text = "\n\n".join(p for p in paragraphs if p)
        return _WORD_RE.findall(text)

    def _sentences(self, pool: tuple[str, ...], n_tokens: int, per_par: int = 4) -> list[str]:
        usable = self._usable(pool)
        pars: list[str] = []
        cur: list[str] = []
        total = 0
        last = ""
        while total < n_tokens:
            t = self.rng.choice(usable) if self.rng.random() < 0.75 else self.rng.choice(_NEUTRAL)
            s = self._fill(t)
            if s == last:
                continue
            last = s
            cur.append(s)
            total += self.tok.count(s) + 1
            if len(cur) >= per_par:
                pars.append(" ".join(cur))
                cur = []
        if cur:
            pars.append(" ".join(cur))
        return pars

    def reasoning(self, n_tokens: int) -> list[str]:
        """Thinking-aloud text before tool calls."""
        return self._render(self._sentences(_REASON, n_tokens))

    def plain(self, n_tokens: int) -> list[str]:
        """An answer to an arbitrary conversation, from its words."""
        return self._render(self._sentences(_PLAIN, n_tokens))

    def _code_block(self) -> str:
        k = self.rng.randint(2, 6)
        start = self.rng.randrange(max(1, len(self.v.code)))
        lines = self.v.code[start : start + k]
        return "```python\n" + "\n".join(lines) + "\n```" if lines else ""

    def report(self, title: str, n_tokens: int, final: bool = False) -> list[str]:
        """A structured summary (sub-agent) or final answer (orchestrator)."""
        pars = [f"## {title}"]
        total = self.tok.count(title) + 2
        sections = (
            ("Root cause", "Proposed change", "Verification")
            if final
            else ("Findings", "Details", "Next steps")
        )
        k = 0
        while total < n_tokens:
            head = sections[k % len(sections)]
            k += 1
            budget = max(40, min(n_tokens - total, self.rng.randint(120, 400)))
            block = [f"### {head}"]
            findings = []
            bt = 0
            while bt < budget * 0.5:
                s = self._fill(self.rng.choice(self._usable(_FINDING)))
                findings.append(s)
                bt += self.tok.count(s)
            block.append("\n".join(findings))
            if self.v.code and self.rng.random() < 0.6:
                block.append(self._code_block())
            block.extend(
                self._sentences(_REASON if not final else _NEUTRAL + _REASON, budget // 2, 3)
            )
            for b in block:
                total += self.tok.count(b) + 1
            pars.extend(block)
        return self._render(pars)
