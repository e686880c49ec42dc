"""``agentload trace import atif``: Harbor's Agent Trajectory Interchange Format → a full-content
trace.

An ATIF file (``trajectory.json``; ``schema_version: "ATIF-v1.x"``) is one agent's trajectory:
``{schema_version, session_id, agent, steps[], final_metrics?, continued_trajectory_ref?}``. A
directory is walked for ``*.json`` (a Harbor job directory as a whole works: files that are not
trajectories, ``config.json``, ``result.json``, are skipped and counted).

| ATIF | trace |
|---|---|
| a trajectory file not referred to by another one imported | one session (``x-agentload-session``:
  its ``session_id``, ``#2``... when two files share one) |
| ``system`` steps before any other step | the system message(s) |
| later ``system`` steps | not sent: the agent's own events ("Added workspace context",
  "Performed context summarization"), which are not model calls and whose text is not what the
  model was given; their sub-agent references are read |
| ``user`` step ``message`` | a ``user`` message |
| ``agent`` step | one model call: its request every message before it, its answer ``message``
  with ``tool_calls`` (``tool_call_id``, ``function_name``, ``arguments``: an object, sent as a
  JSON string); ``reasoning_content`` is not carried in later requests (ATIF keeps it apart) |
| ``agent`` step with ``is_copied_context: true`` (a continuation's copied history) | history only |
| ``observation.results[]`` of an agent step | a ``tool`` message each (``tool_call_id`` =
  ``source_call_id``; a result without one answers the step's calls in order, counted); on a step
  without tool calls (Terminus-2's JSON-in-text protocol) a ``user`` message: the terminal output
  the agent sends next |
| ``metrics`` (``prompt_tokens``: cached included; ``completion_tokens``; ``cached_tokens``;
  ``extra.cache_creation_input_tokens``) | the call's usage, as recorded |
| ``model_name`` (step, else ``agent``) | ``request.model`` |
| ``agent.tool_definitions`` | every request's ``tools`` (``null`` entries dropped, counted) |
| ``timestamp`` | see *Times* |
| ``subagent_trajectory_ref[]`` (``trajectory_path`` relative to the file, else a file imported
  whose ``session_id`` it names, else the root's embedded ``subagent_trajectories`` by
  ``trajectory_id``) on a result | that trajectory, in the same session, started after the call
  the result answers (``Exchange.after``); the recorder makes it that call's child when its
  task text (or id) shows it (``record``'s threading rules 3 and 5), else it is another root
  agent of the session. A result without ``content`` that refers to a sub-agent carries the
  sub-agent's last answer |
| ``continued_trajectory_ref`` | the continuation file, in the same session, after the last call |

A reference to a file that is neither there nor imported is counted (the trajectory imports
without it).

*Times.* When every agent step of a trajectory has a ``timestamp`` (when its answer was in), a
call ends at its step's time and lasts ``exchanges.PACE_FIRST_TOKEN_S`` plus its output at
``PACE_TOKENS_PER_S``, but no longer than the time since the step before; the rest of that
interval is the tool time before it. Otherwise the times are ``exchanges.Pacer``'s, from the
root file's modification time (a sub-agent's calls inside its parent's tool call). A call's
output length is its ``completion_tokens``, else its answer's characters / 4. Both are named in
``header.source.derived``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import TraceFormatError, WireError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.interop.chat_rows import (
    answer_tokens,
    clean_tools,
    mtime_ns,
    named_tools,
    source_files,
    unique,
)
from agentload.interop.content_free import (
    MISSING,
    NULL,
    At,
    Progress,
    extra_keys,
    need_int,
    need_tokens,
    show,
)
from agentload.interop.exchanges import (
    PACE_FIRST_TOKEN_S,
    PACE_TOKENS_PER_S,
    Exchange,
    Pacer,
    Tally,
    chat_exchange,
    full_header,
    iso_ns,
    write_sessions,
)
from agentload.outfile import check_output
from agentload.record.native import SESSION_HEADER

__all__ = ["import_atif", "looks_like_atif"]

FORMAT = "atif"
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
_STEP_KEYS = frozenset(
    {
        "step_id",
        "timestamp",
        "source",
        "model_name",
        "reasoning_effort",
        "message",
        "reasoning_content",
        "tool_calls",
        "observation",
        "metrics",
        "extra",
        "is_copied_context",
    }
)
_SOURCES = ("system", "user", "agent")
_DERIVED = {"stream": "true"}


def looks_like_atif(first: dict[str, Any]) -> bool:
    """Whether a JSON document is an ATIF trajectory (``schema_version`` ``ATIF-...``)."""
    v = first.get("schema_version")
    return isinstance(v, str) and v.upper().startswith("ATIF")


@dataclass
class _Source:
    """One trajectory: its file (or the file that embeds it), where in it, and its object."""

    path: Path
    record: str
    obj: dict[str, Any]

    def at(self, part: str) -> str:
        return f"{self.record}.{part}" if self.record else part


@dataclass
class _Import:
    tally: Tally
    walked: set[Path]
    by_session: dict[str, Path] = field(default_factory=dict)
    docs: int = 0

    # -- files ---------------------------------------------------------------------------------
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

    def resolve(self, ref: Any, src: _Source, root: _Source) -> _Source | None:
        """The trajectory a ``subagent_trajectory_ref`` entry names, if it is to be had."""
        if not isinstance(ref, dict):
            return None
        tp = ref.get("trajectory_path")
        if isinstance(tp, str) and tp:
            cand = src.path.parent / tp
            if cand.is_file():
                obj = self.load(cand)
                if obj is not None:
                    return _Source(cand, "", obj)
        sid = ref.get("session_id")
        if isinstance(sid, str) and sid in self.by_session:
            p = self.by_session[sid]
            obj = self.load(p)
            if obj is not None:
                return _Source(p, "", obj)
        embedded = root.obj.get("subagent_trajectories")
        if isinstance(embedded, list):
            for k, t in enumerate(embedded):
                if not isinstance(t, dict):
                    continue
                tid = ref.get("trajectory_id")
                if (tid is not None and t.get("trajectory_id") == tid) or (
                    sid is not None and t.get("session_id") == sid
                ):
                    return _Source(root.path, root.at(f"subagent_trajectories[{k}]"), t)
        return None

    # -- one trajectory ------------------------------------------------------------------------
    def trajectory(
        self,
        src: _Source,
        root: _Source,
        session: str,
        pacer: Pacer,
        after: str | None,
        stack: tuple[str, ...],
        out: list[Exchange],
    ) -> str:
        """Append ``src``'s calls (and its sub-agents') to ``out``; returns its last answer's
        text (what a parent's result that only refers to it carried)."""
        tally = self.tally
        self.docs += 1
        obj = src.obj
        top = At(str(src.path), src.record, tally.dev)
        extra_keys(obj, _ROOT_KEYS, top)
        steps = obj.get("steps")
        if not isinstance(steps, list) or not steps:
            top.fail("steps", "no steps (a trajectory is a list of steps)")
        agent = obj.get("agent")
        if not isinstance(agent, dict):
            tally.note("agent", MISSING if agent is None else "not an object")
            agent = {}
        tools = clean_tools(agent.get("tool_definitions"), top, "agent.tool_definitions", tally)
        names = _called(steps)
        if tools is None and names:
            tools = named_tools(names)
            tally.derived["tools"] = "not in the trajectory: the functions called, empty schemas"
        agent_model = agent.get("model_name") if isinstance(agent.get("model_name"), str) else None
        agent_steps = [
            s
            for s in steps
            if isinstance(s, dict) and s.get("source") == "agent" and not s.get("is_copied_context")
        ]
        stamped = [isinstance(s.get("timestamp"), str) for s in agent_steps]
        timed = bool(stamped) and all(stamped)
        if any(stamped) and not timed:
            tally.note("steps[].timestamp", "on some agent steps only (times derived)")
        messages: list[dict[str, Any]] = []
        leading = True
        prev_ns: int | None = None
        first_call = True
        last_text = ""
        for i, step in enumerate(steps):
            at = At(str(src.path), src.at(f"steps[{i}]"), tally.dev)
            if not isinstance(step, dict):
                at.fail("step", f"expected an object, got {show(step)}")
            need_int(step, "step_id", at, default=i + 1, required=True)
            extra_keys(step, _STEP_KEYS, at)
            source = step.get("source")
            if source not in _SOURCES:
                at.fail("source", f"expected system, user or agent, got {show(source)}")
            text = _text(step, "message", at, required=True)
            ts = iso_ns(step["timestamp"], at) if isinstance(step.get("timestamp"), str) else None
            results = _results(step, at)
            if source == "system":
                if leading:
                    messages.append({"role": "system", "content": text})
                for j, r in enumerate(results):
                    self.subagents(
                        r,
                        at.sub(f"observation.results[{j}]"),
                        src,
                        root,
                        session,
                        pacer,
                        None,
                        stack,
                        out,
                    )
            elif source == "user":
                leading = False
                messages.append({"role": "user", "content": text})
            else:
                leading = False
                calls = _calls(step, at)
                answer: dict[str, Any] = {"role": "assistant", "content": text}
                if calls:
                    answer["tool_calls"] = calls
                    if not text:
                        answer["content"] = None
                if not step.get("is_copied_context"):
                    if not messages:
                        at.fail(
                            "source", "an agent step with no step before it (nothing was asked)"
                        )
                    usage = _usage(step.get("metrics"), at)
                    if usage is None:
                        tally.derived["usage"] = "not on every agent step: none where missing"
                    out_tokens = (usage or {}).get("completion_tokens")
                    if out_tokens is None:
                        out_tokens = answer_tokens(answer)
                        tally.derived["output_tokens"] = (
                            "for the derived times, where completion_tokens is missing: the "
                            "answer's characters / 4"
                        )
                    if timed and ts is not None:
                        d = round((PACE_FIRST_TOKEN_S + out_tokens / PACE_TOKENS_PER_S) * 1e9)
                        start = ts - d if prev_ns is None else min(ts, max(prev_ns, ts - d))
                        times = (start, ts)
                        pacer.now_ns = ts
                        tally.derived["call times"] = (
                            "each call ends at its step's timestamp and lasts "
                            f"{PACE_FIRST_TOKEN_S:g} s plus its output at {PACE_TOKENS_PER_S:g} "
                            "tokens/s (at most the time since the step before: the rest is tool "
                            "time)"
                        )
                    else:
                        times = pacer.call(out_tokens)
                    model = step.get("model_name")
                    if not isinstance(model, str) or not model:
                        model = agent_model
                    if model is None:
                        model = "unknown"
                        tally.derived["model"] = "not in the trajectory: unknown"
                    body: dict[str, Any] = {"model": model, "messages": list(messages)}
                    if tools:
                        body["tools"] = tools
                    body["stream"] = True
                    try:
                        x = chat_exchange(
                            body, answer, times, usage=usage, headers={SESSION_HEADER: session}
                        )
                    except WireError as exc:
                        at.fail("tool_calls", str(exc))
                    if first_call:
                        x.after = after
                        first_call = False
                    out.append(x)
                    last_text = text
                messages.append(answer)
                ids = [c["id"] for c in calls]
                open_ids = list(ids)
                for j, r in enumerate(results):
                    rat = at.sub(f"observation.results[{j}]")
                    cid = r.get("source_call_id")
                    if cid is not None and not isinstance(cid, str):
                        rat.fail("source_call_id", f"expected a string, got {show(cid)}")
                    if calls and cid is None and open_ids:
                        tally.note(
                            "steps[].observation.results[].source_call_id",
                            "missing, matched by position",
                        )
                        cid = open_ids[0]
                    if cid in open_ids:
                        open_ids.remove(cid)
                    has_refs = bool(r.get("subagent_trajectory_ref"))
                    content = _text(r, "content", rat, required=not has_refs)
                    sub_text = self.subagents(
                        r, rat, src, root, session, pacer, cid if cid in ids else None, stack, out
                    )
                    if not content and has_refs and sub_text:
                        content = sub_text
                        tally.derived["subagent results"] = (
                            "a result that only refers to its sub-agent: the sub-agent's last answer"
                        )
                    if calls and cid in ids:
                        messages.append({"role": "tool", "tool_call_id": cid, "content": content})
                    else:
                        if calls:
                            tally.note(
                                "steps[].observation.results[]",
                                "answers no call of its step (sent as user text)",
                            )
                        messages.append({"role": "user", "content": content})
            if ts is not None:
                prev_ns = ts if prev_ns is None else max(prev_ns, ts)
        cont = obj.get("continued_trajectory_ref")
        if cont is not None:
            ref = cont if isinstance(cont, dict) else {"trajectory_path": cont}
            self.follow(
                ref, "continued_trajectory_ref", top, src, root, session, pacer, None, stack, out
            )
        return last_text

    def subagents(
        self,
        result: dict[str, Any],
        at: At,
        src: _Source,
        root: _Source,
        session: str,
        pacer: Pacer,
        after: str | None,
        stack: tuple[str, ...],
        out: list[Exchange],
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
            text = (
                self.follow(
                    ref, "subagent_trajectory_ref", at, src, root, session, pacer, after, stack, out
                )
                or text
            )
        return text

    def follow(
        self,
        ref: Any,
        fld: str,
        at: At,
        src: _Source,
        root: _Source,
        session: str,
        pacer: Pacer,
        after: str | None,
        stack: tuple[str, ...],
        out: list[Exchange],
    ) -> str:
        """Import the trajectory ``ref`` names (counted when it is not to be had)."""
        child = self.resolve(ref, src, root)
        if child is None:
            self.tally.note(fld, "file not found")
            return ""
        key = f"{child.path.resolve()}#{child.record}"
        if key in stack:
            self.tally.note(fld, "refers back to a trajectory it is part of, not followed")
            return ""
        if len(stack) >= MAX_DEPTH:
            self.tally.note(fld, f"nested deeper than {MAX_DEPTH}, not followed")
            return ""
        return self.trajectory(child, root, session, pacer, after, (*stack, key), out)


def _called(steps: list[Any]) -> list[str]:
    """The function names a trajectory's agent steps call, in order of first use."""
    names: list[str] = []
    for s in steps:
        if not isinstance(s, dict) or not isinstance(s.get("tool_calls"), list):
            continue
        for tc in s["tool_calls"]:
            name = tc.get("function_name") if isinstance(tc, dict) else None
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return names


def _text(d: dict[str, Any], key: str, at: At, *, required: bool) -> str:
    """``d[key]`` as message text: a string, or the text parts of a list of content parts
    (other parts dropped, counted); ``""`` when absent or null (counted when ``required``)."""
    v = d.get(key)
    if v is None:
        if required:
            at.deviate(key, NULL if key in d else MISSING)
        return ""
    if isinstance(v, str):
        return v
    if isinstance(v, list):
        parts: list[str] = []
        for p in v:
            if isinstance(p, dict) and isinstance(p.get("text"), str):
                parts.append(p["text"])
            else:
                at.deviate(f"{key}[]", "not a text part, dropped")
        return "".join(parts)
    at.fail(key, f"expected text, got {show(v)}")


def _calls(step: dict[str, Any], at: At) -> list[dict[str, Any]]:
    """An agent step's tool calls in OpenAI's shape (``arguments`` a JSON string)."""
    calls = step.get("tool_calls")
    if calls is None:
        return []
    if not isinstance(calls, list):
        at.fail("tool_calls", f"expected a list, got {show(calls)}")
    sid = step.get("step_id")
    out: list[dict[str, Any]] = []
    for j, tc in enumerate(calls):
        if not isinstance(tc, dict):
            at.fail(f"tool_calls[{j}]", f"expected a tool call (an object), got {show(tc)}")
        name = tc.get("function_name")
        if not isinstance(name, str) or not name:
            at.fail(f"tool_calls[{j}].function_name", "missing (a tool call names its function)")
        cid = tc.get("tool_call_id")
        if not isinstance(cid, str) or not cid:
            at.deviate(f"tool_calls[{j}].tool_call_id", MISSING if cid is None else "not a string")
            cid = f"call_{sid}_{j}"
        args = tc.get("arguments")
        if args is None:
            at.deviate(f"tool_calls[{j}].arguments", NULL if "arguments" in tc else MISSING)
            text = "{}"
        elif isinstance(args, str):
            at.deviate(f"tool_calls[{j}].arguments", "a JSON string, not an object")
            text = args
        else:
            text = json.dumps(args, ensure_ascii=False)
        out.append({"id": cid, "type": "function", "function": {"name": name, "arguments": text}})
    return out


def _results(step: dict[str, Any], at: At) -> list[dict[str, Any]]:
    obs = step.get("observation")
    if obs is None:
        return []
    if not isinstance(obs, dict):
        at.fail("observation", f"expected an object, got {show(obs)}")
    results = obs.get("results")
    if results is None:
        return []
    if not isinstance(results, list):
        at.fail("observation.results", f"expected a list, got {show(results)}")
    for j, r in enumerate(results):
        if not isinstance(r, dict):
            at.fail(f"observation.results[{j}]", f"expected an object, got {show(r)}")
    return results


def _usage(metrics: Any, at: At) -> dict[str, Any] | None:
    """A step's ``metrics`` as chat usage (``prompt_tokens`` includes the cached ones)."""
    if metrics is None:
        return None
    if not isinstance(metrics, dict):
        at.fail("metrics", f"expected an object, got {show(metrics)}")
    mat = at.sub("metrics")

    def count(d: dict[str, Any], key: str) -> int | None:
        return None if d.get(key) is None else need_tokens(d, key, mat)

    prompt = count(metrics, "prompt_tokens")
    completion = count(metrics, "completion_tokens")
    cached = count(metrics, "cached_tokens")
    if prompt is None and completion is None:
        return None
    u: dict[str, Any] = {}
    if prompt is not None:
        u["prompt_tokens"] = prompt
    if completion is not None:
        u["completion_tokens"] = completion
    if prompt is not None and completion is not None:
        u["total_tokens"] = prompt + completion
    if cached is not None:
        u["prompt_tokens_details"] = {"cached_tokens": cached}
    extra = metrics.get("extra")
    if isinstance(extra, dict):
        created = count(extra, "cache_creation_input_tokens")
        if created is not None:
            u["cache_creation_tokens"] = created
    return u


def import_atif(paths: list[Path], out: Path, *, force: bool = False) -> str:
    """Import ATIF trajectories (files or directories) into the trace ``out``."""
    tally = Tally(FORMAT)
    files, walked = source_files(paths, (".json",))
    imp = _Import(tally, walked)
    # First pass: which files are trajectories, their session ids, and which of them another
    # one refers to (those are imported inside their parent, not as sessions of their own).
    found: list[tuple[Path, str]] = []
    sessions_of: dict[str, list[Path]] = {}
    refs: list[tuple[Path, Any]] = []
    for f in files:
        obj = imp.load(f)
        if obj is None:
            continue
        sid = obj.get("session_id")
        found.append((f, sid if isinstance(sid, str) and sid else f.stem))
        if isinstance(sid, str):
            sessions_of.setdefault(sid, []).append(f)
        refs += [(f, r) for r in _refs(obj)]
    if not found:
        raise TraceFormatError(
            f"{', '.join(map(str, paths))}: no ATIF trajectories (*.json, schema_version "
            "ATIF-v1.x) found"
        )
    imp.by_session = {sid: ps[0] for sid, ps in sessions_of.items() if len(ps) == 1}
    inner: set[Path] = set()
    for f, ref in refs:
        tp = ref.get("trajectory_path") if isinstance(ref, dict) else None
        sid = ref.get("session_id") if isinstance(ref, dict) else None
        if isinstance(tp, str) and tp and (f.parent / tp).is_file():
            inner.add((f.parent / tp).resolve())
        elif isinstance(sid, str) and sid in imp.by_session:
            inner.add(imp.by_session[sid].resolve())
    roots = [(f, s) for f, s in found if f.resolve() not in inner]
    if not roots:  # every file refers to another: a cycle; take them all
        roots = found
    check_output(out, files, force=force)
    progress = Progress("atif trajectories", total=len(roots))
    used: dict[str, int] = {}

    def sessions() -> Iterator[list[Exchange]]:
        for f, sid in roots:
            obj = imp.load(f)
            if obj is None:
                continue
            src = _Source(f, "", obj)
            xs: list[Exchange] = []
            key = f"{f.resolve()}#"
            imp.trajectory(src, src, unique(sid, used), Pacer(tally, mtime_ns(f)), None, (key,), xs)
            tally.derived.update(_DERIVED)
            yield xs

    n_sessions, calls = write_sessions(
        out,
        lambda t0: full_header(FORMAT, [f for f, _ in found], imp.docs, tally, t0),
        sessions(),
        progress,
    )
    warning = tally.dev.warning()
    if warning:
        print(warning, file=sys.stderr)
    return (
        f"wrote {out}: {n_sessions:,} sessions, {calls:,} calls from {imp.docs:,} ATIF "
        f"trajectories ({len(roots):,} sessions, {len(found):,} files)"
    )


def _refs(obj: dict[str, Any]) -> Iterator[Any]:
    """Every trajectory reference of a trajectory object (its results', its continuation)."""
    steps = obj.get("steps")
    for s in steps if isinstance(steps, list) else ():
        obs = s.get("observation") if isinstance(s, dict) else None
        results = obs.get("results") if isinstance(obs, dict) else None
        for r in results if isinstance(results, list) else ():
            refs = r.get("subagent_trajectory_ref") if isinstance(r, dict) else None
            if isinstance(refs, dict):
                refs = [refs]
            yield from refs if isinstance(refs, list) else ()
    cont = obj.get("continued_trajectory_ref")
    if isinstance(cont, str):
        yield {"trajectory_path": cont}
    elif isinstance(cont, dict):
        yield cont
