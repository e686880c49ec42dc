"""One ATIF trajectory, and those it refers to, read into a session's calls (see ``atif``).

``Importer`` loads trajectory files and finds the trajectory a reference names (a path, a
session id, one embedded in the root file); ``Importer.trajectory`` reads a trajectory's steps
into calls (``_Trajectory``), its sub-agents and its continuation in the same session
(``Walk``: what they share).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError, WireError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.interop.atif_steps import (
    called,
    check_step,
    step_results,
    step_text,
    step_usage,
    tool_calls,
)
from agentload.interop.chat_rows import answer_tokens, clean_tools, named_tools
from agentload.interop.content_free import MISSING, At, extra_keys, show
from agentload.interop.exchanges import (
    PACE_FIRST_TOKEN_S,
    PACE_TOKENS_PER_S,
    Exchange,
    Pacer,
    Tally,
    chat_exchange,
    iso_ns,
)
from agentload.record.native import SESSION_HEADER

__all__ = ["Importer", "Source", "Walk", "looks_like_atif"]

MAX_DEPTH = 32
"""Sub-agent nesting followed (deeper references are counted and not imported)."""
_ROOT_KEYS = frozenset(
    {
        "schema_version",
        "session_id",
        "trajectory_id",
        "agent",
        "steps",
        "notes",
        "final_metrics",
        "extra",
        "continued_trajectory_ref",
        "subagent_trajectories",
    }
)


def looks_like_atif(first: dict[str, Any]) -> bool:
    """Whether a JSON document is an ATIF trajectory (``schema_version`` ``ATIF-...``)."""
    v = first.get("schema_version")
    return isinstance(v, str) and v.upper().startswith("ATIF")


@dataclass
class Source:
    """One trajectory: its file (or the file that embeds it), where in it, and its object."""

    path: Path
    record: str
    obj: dict[str, Any]

    def at(self, part: str) -> str:
        """The place of ``part`` of the trajectory (inside the record that embeds it)."""
        return f"{self.record}.{part}" if self.record else part


@dataclass(frozen=True)
class Walk:
    """What the trajectories of one session share as they are read: the root trajectory (whose
    embedded sub-agents a reference may name), the session's name, its pacer, the trajectories
    being read (outermost first: a reference back to one is not followed) and the calls so far."""

    root: Source
    session: str
    pacer: Pacer
    stack: tuple[str, ...]
    out: list[Exchange]

    def into(self, key: str) -> Walk:
        """The same walk, inside the trajectory ``key`` too."""
        return replace(self, stack=(*self.stack, key))


@dataclass
class Importer:
    """The trajectory files of an import: loading them, following their references."""

    tally: Tally
    walked: set[Path]
    by_session: dict[str, Path] = field(default_factory=dict)
    docs: int = 0

    def load(self, path: Path) -> dict[str, Any] | None:
        """A trajectory file's object; None (counted) for a walked file that is not one."""
        data = read_bytes(path, limit=MAX_DOCUMENT_BYTES, label=str(path), error=TraceFormatError)
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            if path in self.walked:
                self.tally.note("file", "not JSON, skipped")
                return None
            raise TraceFormatError(f"{path}: not JSON ({exc})") from None
        if isinstance(obj, dict) and looks_like_atif(obj):
            return obj
        if path in self.walked:
            self.tally.note("file", "not an ATIF trajectory, skipped")
            return None
        if isinstance(obj, dict) and isinstance(obj.get("steps"), list):
            self.tally.note(
                "schema_version", MISSING if "schema_version" not in obj else "not ATIF"
            )
            return obj
        At(str(path), "").fail(
            "schema_version", "not an ATIF trajectory (no ATIF-v1.x and no steps)"
        )

    def resolve(self, ref: Any, src: Source, root: Source) -> Source | None:
        """The trajectory a ``subagent_trajectory_ref`` entry names, if it is to be had."""
        if not isinstance(ref, dict):
            return None
        tp = ref.get("trajectory_path")
        if isinstance(tp, str) and tp:
            cand = src.path.parent / tp
            if cand.is_file():
                obj = self.load(cand)
                if obj is not None:
                    return Source(cand, "", obj)
        sid = ref.get("session_id")
        if isinstance(sid, str) and sid in self.by_session:
            p = self.by_session[sid]
            obj = self.load(p)
            if obj is not None:
                return Source(p, "", obj)
        embedded = root.obj.get("subagent_trajectories")
        if isinstance(embedded, list):
            for k, t in enumerate(embedded):
                if not isinstance(t, dict):
                    continue
                tid = ref.get("trajectory_id")
                if (tid is not None and t.get("trajectory_id") == tid) or (
                    sid is not None and t.get("session_id") == sid
                ):
                    return Source(root.path, root.at(f"subagent_trajectories[{k}]"), t)
        return None

    def trajectory(self, src: Source, walk: Walk, after: str | None) -> str:
        """Append ``src``'s calls (and its sub-agents') to ``walk.out``, the first one after the
        answer that emitted the call ``after``; returns its last answer's text (what a parent's
        result that only refers to it carried)."""
        return _Trajectory(self, src, walk, after).read()

    def subagents(
        self, result: dict[str, Any], at: At, src: Source, walk: Walk, after: str | None
    ) -> str:
        """The sub-agents a result refers to, imported; the last one's last answer."""
        refs = result.get("subagent_trajectory_ref")
        if refs is None:
            return ""
        if isinstance(refs, dict):
            refs = [refs]
        if not isinstance(refs, list):
            at.fail("subagent_trajectory_ref", f"expected a list, got {show(refs)}")
        text = ""
        for ref in refs:
            text = self.follow(ref, "subagent_trajectory_ref", src, walk, after) or text
        return text

    def follow(self, ref: Any, fld: str, src: Source, walk: Walk, after: str | None) -> str:
        """Import the trajectory ``ref`` names (counted when it is not to be had)."""
        child = self.resolve(ref, src, walk.root)
        if child is None:
            self.tally.note(fld, "file not found")
            return ""
        key = f"{child.path.resolve()}#{child.record}"
        if key in walk.stack:
            self.tally.note(fld, "refers back to a trajectory it is part of, not followed")
            return ""
        if len(walk.stack) >= MAX_DEPTH:
            self.tally.note(fld, f"nested deeper than {MAX_DEPTH}, not followed")
            return ""
        return self.trajectory(child, walk.into(key), after)


@dataclass(frozen=True)
class _Shared:
    """What the calls of a trajectory share: its tools, its agent's model, whether every agent
    step has a time."""

    tools: list[dict[str, Any]] | None
    agent_model: str | None
    timed: bool


def _shared(obj: dict[str, Any], steps: list[Any], top: At, tally: Tally) -> _Shared:
    """What a trajectory's calls share (the tools: the functions called, where the agent names
    none; agent steps with and without times counted)."""
    agent = obj.get("agent")
    if not isinstance(agent, dict):
        tally.note("agent", MISSING if agent is None else "not an object")
        agent = {}
    tools = clean_tools(agent.get("tool_definitions"), top, "agent.tool_definitions", tally)
    names = called(steps)
    if tools is None and names:
        tools = named_tools(names)
        tally.derived["tools"] = "not in the trajectory: the functions called, empty schemas"
    model = agent.get("model_name")
    agent_steps = [
        s
        for s in steps
        if isinstance(s, dict) and s.get("source") == "agent" and not s.get("is_copied_context")
    ]
    stamped = [isinstance(s.get("timestamp"), str) for s in agent_steps]
    timed = bool(stamped) and all(stamped)
    if any(stamped) and not timed:
        tally.note("steps[].timestamp", "on some agent steps only (times derived)")
    return _Shared(tools, model if isinstance(model, str) else None, timed)


class _Trajectory:
    """One trajectory being read: what its calls share (tools, model, whether its agent steps
    are timed) and the conversation so far."""

    def __init__(self, imp: Importer, src: Source, walk: Walk, after: str | None) -> None:
        self.imp = imp
        self.tally = imp.tally
        self.src = src
        self.walk = walk
        self.after = after
        self.messages: list[dict[str, Any]] = []
        self.leading = True
        self.prev_ns: int | None = None
        self.first_call = True
        self.last_text = ""
        self.shared = _Shared(None, None, timed=False)

    def read(self) -> str:
        """Its steps into calls, then its continuation; returns its last answer's text."""
        self.imp.docs += 1
        obj = self.src.obj
        top = At(str(self.src.path), self.src.record, self.tally.dev)
        extra_keys(obj, _ROOT_KEYS, top)
        steps = obj.get("steps")
        if not isinstance(steps, list) or not steps:
            top.fail("steps", "no steps (a trajectory is a list of steps)")
        self.shared = _shared(obj, steps, top, self.tally)
        for i, step in enumerate(steps):
            self.step(i, step)
        cont = obj.get("continued_trajectory_ref")
        if cont is not None:
            ref = cont if isinstance(cont, dict) else {"trajectory_path": cont}
            self.imp.follow(ref, "continued_trajectory_ref", self.src, self.walk, None)
        return self.last_text

    def step(self, i: int, step: Any) -> None:
        """Step ``i``: a system message, a user message, or an agent's call and its results."""
        at = At(str(self.src.path), self.src.at(f"steps[{i}]"), self.tally.dev)
        source = check_step(step, i, at)
        text = step_text(step, "message", at, required=True)
        ts = iso_ns(step["timestamp"], at) if isinstance(step.get("timestamp"), str) else None
        results = step_results(step, at)
        if source == "system":
            if self.leading:
                self.messages.append({"role": "system", "content": text})
            for j, r in enumerate(results):
                sub = at.sub(f"observation.results[{j}]")
                self.imp.subagents(r, sub, self.src, self.walk, None)
        elif source == "user":
            self.leading = False
            self.messages.append({"role": "user", "content": text})
        else:
            self.leading = False
            self.agent(step, text, ts, results, at)
        if ts is not None:
            self.prev_ns = ts if self.prev_ns is None else max(self.prev_ns, ts)

    def agent(
        self,
        step: dict[str, Any],
        text: str,
        ts: int | None,
        results: list[dict[str, Any]],
        at: At,
    ) -> None:
        """An agent step: its call (none for copied context), its answer in the conversation,
        then its results."""
        calls = tool_calls(step, at)
        answer: dict[str, Any] = {"role": "assistant", "content": text}
        if calls:
            answer["tool_calls"] = calls
            if not text:
                answer["content"] = None
        if not step.get("is_copied_context"):
            self.call(step, answer, ts, at)
            self.last_text = text
        self.messages.append(answer)
        self.observations(calls, results, at)

    def call(self, step: dict[str, Any], answer: dict[str, Any], ts: int | None, at: At) -> None:
        """The call of an agent step: every message before it, and its answer."""
        if not self.messages:
            at.fail("source", "an agent step with no step before it (nothing was asked)")
        usage = step_usage(step.get("metrics"), at)
        if usage is None:
            self.tally.derived["usage"] = "not on every agent step: none where missing"
        times = self.times(ts, usage, answer)
        body: dict[str, Any] = {"model": self.model(step), "messages": list(self.messages)}
        if self.shared.tools:
            body["tools"] = self.shared.tools
        body["stream"] = True
        try:
            x = chat_exchange(
                body, answer, times, usage=usage, headers={SESSION_HEADER: self.walk.session}
            )
        except WireError as exc:
            at.fail("tool_calls", str(exc))
        if self.first_call:
            x.after = self.after
            self.first_call = False
        self.walk.out.append(x)

    def times(
        self, ts: int | None, usage: dict[str, Any] | None, answer: dict[str, Any]
    ) -> tuple[int, int]:
        """A call's (submit, end): ending at its step's time when every agent step has one,
        else the pacer's (see the module docstring of ``atif``)."""
        tally = self.tally
        out_tokens = (usage or {}).get("completion_tokens")
        if out_tokens is None:
            out_tokens = answer_tokens(answer)
            tally.derived["output_tokens"] = (
                "for the derived times, where completion_tokens is missing: the "
                "answer's characters / 4"
            )
        if not (self.shared.timed and ts is not None):
            return self.walk.pacer.call(out_tokens)
        d = round((PACE_FIRST_TOKEN_S + out_tokens / PACE_TOKENS_PER_S) * 1e9)
        start = ts - d if self.prev_ns is None else min(ts, max(self.prev_ns, ts - d))
        self.walk.pacer.now_ns = ts
        tally.derived["call times"] = (
            "each call ends at its step's timestamp and lasts "
            f"{PACE_FIRST_TOKEN_S:g} s plus its output at {PACE_TOKENS_PER_S:g} "
            "tokens/s (at most the time since the step before: the rest is tool "
            "time)"
        )
        return start, ts

    def model(self, step: dict[str, Any]) -> str:
        """The model a step's call asks for: the step's, else the agent's, else ``unknown``."""
        model = step.get("model_name")
        if not isinstance(model, str) or not model:
            model = self.shared.agent_model
        if model is None:
            model = "unknown"
            self.tally.derived["model"] = "not in the trajectory: unknown"
        return model

    def observations(
        self, calls: list[dict[str, Any]], results: list[dict[str, Any]], at: At
    ) -> None:
        """An agent step's results: a ``tool`` message for each that answers one of its calls,
        else a ``user`` message (a sub-agent's run before it)."""
        ids = [c["id"] for c in calls]
        open_ids = list(ids)
        for j, r in enumerate(results):
            rat = at.sub(f"observation.results[{j}]")
            cid = r.get("source_call_id")
            if cid is not None and not isinstance(cid, str):
                rat.fail("source_call_id", f"expected a string, got {show(cid)}")
            if calls and cid is None and open_ids:
                self.tally.note(
                    "steps[].observation.results[].source_call_id",
                    "missing, matched by position",
                )
                cid = open_ids[0]
            if cid in open_ids:
                open_ids.remove(cid)
            content = self.result_content(r, rat, cid if cid in ids else None)
            if calls and cid in ids:
                self.messages.append({"role": "tool", "tool_call_id": cid, "content": content})
            else:
                if calls:
                    self.tally.note(
                        "steps[].observation.results[]",
                        "answers no call of its step (sent as user text)",
                    )
                self.messages.append({"role": "user", "content": content})

    def result_content(self, r: dict[str, Any], rat: At, after: str | None) -> str:
        """A result's text, once the sub-agents it refers to are imported (after the call
        ``after``); a result with none carries the last sub-agent's last answer."""
        has_refs = bool(r.get("subagent_trajectory_ref"))
        content = step_text(r, "content", rat, required=not has_refs)
        sub_text = self.imp.subagents(r, rat, self.src, self.walk, after)
        if not content and has_refs and sub_text:
            content = sub_text
            self.tally.derived["subagent results"] = (
                "a result that only refers to its sub-agent: the sub-agent's last answer"
            )
        return content
