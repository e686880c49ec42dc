"""What the foreign agent writes: a line before each call, its sub-agent reports and its final
answer, quoting what the tool results really showed (``foreign``).

Reports are short and concrete: the definition a search found (``path:line: code``), the
summary and failure lines a test run printed, the first lines of the sub-agents' answers, the
file an edit changed; then a paragraph of ``prose`` (the conversation's own vocabulary) sized
by ``PolicyConfig``, as a model's answer varies in length.
"""

from __future__ import annotations

import re
from typing import Any

from agentload.endpoint.policy.moves import Call, Intent, Play, intent
from agentload.endpoint.policy.prose import Prose
from agentload.endpoint.policy.session import Step, as_json
from agentload.endpoint.policy.types import Decision

__all__ = ["Reporter"]

_SUMMARY = re.compile(
    r"^.*(?:\b\d+ (?:passed|failed|errors?)\b|^Ran \d+ tests?|^OK\b|^FAILED\b|"
    r"^(?:\w+\.)*\w*(?:Error|Exception)\b:?|^E\s{2,}).*$",
    re.M,
)
_SAY = {
    Intent.DELEGATE: "I'll hand parts of this to helper agents and look around meanwhile.",
    Intent.WAIT: "Waiting for the helper agents to report back.",
    Intent.LIST: "Let me see which files the repository has.",
    Intent.SEARCH: "Searching the code for `{what}`.",
    Intent.READ: "Reading `{what}`.",
    Intent.TEST: "Running the tests.",
    Intent.EDIT: "Applying the fix in `{what}`.",
    Intent.FINISH: "The work is done; submitting.",
}
_MAX_REASONING = 120
_MAX_PROSE = 160


def _quote(text: str, n: int = 4) -> list[str]:
    lines = [m.group(0).strip() for m in _SUMMARY.finditer(text)]
    return list(dict.fromkeys(ln[:200] for ln in lines if ln))[-n:]


def _first(text: str) -> str:
    """The first line of ``text`` that says something (not a tag, not a bracket)."""
    for ln in text.splitlines():
        s = ln.strip()
        if s and not re.fullmatch(r"</?[\w\-]+>.*|[\[\]{}(),]*|```\w*", s):
            return s[:200]
    return ""


def _said(obj: Any) -> list[str]:
    """The answers (``completed`` texts) a Codex spawn or wait result holds."""
    if isinstance(obj, dict):
        return [v for k, v in obj.items() if k == "completed" and isinstance(v, str)] + [
            t for v in obj.values() for t in _said(v)
        ]
    return []


def _finding(what: Intent, text: str, ident: str | None) -> list[str]:
    """The bullets one call's result gives (quoting it)."""
    if what in ("delegate", "wait"):
        said_text = "\n".join(_said(as_json(text))) if text.startswith("{") else text
        bullets = [ln.strip() for ln in said_text.splitlines() if ln.strip().startswith("- ")]
        said = bullets[:1] or [f"- {_first(said_text)}"]
        return [f"- A helper agent reported: {b[2:]}" for b in said if b[2:]]
    if what == Intent.SEARCH:
        hits = [ln.strip() for ln in text.splitlines() if re.match(r"\S+:\d+[:\-]", ln.strip())]
        defs = [h for h in hits if ident and re.search(rf"(?:def|class)\s+{ident}\b", h)]
        if defs:
            uses = [f"- It is used at `{h[:160]}`" for h in hits if h not in defs]
            return [f"- `{ident}` is defined at `{defs[0][:160]}`", *uses[:2]]
        return [f"- The search found {len(hits)} line(s), e.g. `{hits[0][:160]}`"] if hits else []
    if what == Intent.READ:
        code = [re.sub(r"^\s*\d+(?:\t|→)", "", ln) for ln in text.splitlines()]
        code = [c for c in code if c.strip()]
        at = next((k for k, c in enumerate(code) if ident and ident in c), len(code) // 2)
        shown = code[max(0, at - 1) : at + 2]
        return ["- The code there reads:", "```", *shown, "```"] if shown else []
    if what == Intent.LIST:
        files = [ln.strip().removeprefix("./") for ln in text.splitlines() if ln.strip()]
        names = ", ".join(f"`{f}`" for f in files[:4])
        return [f"- The repository has {len(files)} file(s): {names}"]
    if what == Intent.TEST:
        quoted = _quote(text)
        return [f"- Tests: `{q}`" for q in quoted] or [f"- The test run printed: `{_first(text)}`"]
    return [f"- {what.capitalize()}: `{_first(text)}`"] if what != Intent.OTHER else []


class Reporter:
    """The texts of one request's reply (see the module docstring)."""

    def __init__(self, p: Play, ident: str | None) -> None:
        self.p = p
        self.ident = ident
        vocab = p.policy.vocab_for(p.conv, p.work_facts())
        self.prose: Prose = p.policy.prose(p.conv, vocab)

    def more(self, n: int) -> list[str]:
        return self.prose.reasoning(n)

    def _words(self, text: str) -> list[str]:
        return re.findall(r"\s*\S+|\s+$", text)

    def before(self, calls: list[Call]) -> list[str]:
        """The line an agent writes before its calls, and some thinking aloud."""
        p = self.p
        name, args = calls[0]
        what = intent(p.kit, Step(name, args, ""), p.s, p.test_cmd)
        detail = next((str(v) for k, v in args.items() if "path" in k or k == "pattern"), "")
        cmd = str(args.get("command", args.get("cmd", "")))
        if what == Intent.READ and cmd.startswith("nl -ba "):
            detail = cmd.split()[2].strip("'")
        elif what == Intent.SEARCH and " -e " in cmd:
            detail = cmd.split(" -e ", 1)[1].split()[0].strip("'")
        line = _SAY.get(what, "Next step.").format(what=p.s.rel(detail) or "the code")
        n = min(p.policy.config.reasoning_tokens.sample(p.conv.rng), _MAX_REASONING) // 2
        return self._words(line + "\n\n") + self.prose.reasoning(n)

    def findings(self) -> list[str]:
        """Bullet lines of what the results showed, each quoting them."""
        p, out = self.p, []
        for step, what in zip(p.s.steps, p.intents, strict=True):
            text = p.s.rel(step.result or "").strip()
            if text:
                out += _finding(what, text, self.ident)
        for text in p.s.answers:  # answers that came as messages (Codex multi_agent_v2)
            if text.startswith("Message Type: FINAL_ANSWER"):
                out += _finding(Intent.DELEGATE, text.partition("Payload:")[2], self.ident)
        return list(dict.fromkeys(out))

    def final(self) -> list[str]:
        p = self.p
        head = "## Report" if p.s.subtask is not None else "## Summary"
        body = self.findings() or ["- Nothing in the results needed a change."]
        n = min(p.policy.config.answer_tokens.sample(p.conv.rng), _MAX_PROSE)
        return self._words("\n".join([head, "", *body, "", ""])) + self.prose.reasoning(n)

    def answer(self) -> Decision:
        kind = "summary" if self.p.s.subtask is not None else "final"
        return Decision(self.final(), [], self.more, kind)
