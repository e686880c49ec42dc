"""Import: Weka / Claude Code traces (one JSON object per conversation).

A conversation (``*.json``; or one per line of a ``*.jsonl``) holds ``requests[]``: API calls of
type ``n`` (normal) and ``s`` (streaming) with ``t`` (seconds from the conversation's start),
``in``/``out`` lengths, ``hash_ids`` (``block_size``-token blocks, one namespace per
conversation), ``api_time``, ``think_time``, ``ttft``; and ``subagent`` entries (a Task-tool
sub-agent) with their own nested ``requests``. Each conversation becomes one session: the main
agent (role ``orchestrator``), and one child agent per sub-agent, started by the parent's
preceding call (a ``delegate`` tool call), the parent's next call waiting for its end, as
Claude Code's Task tool blocks (a sub-agent of status ``async_launched`` does not block).
The mapping of every field is in docs/trace-formats.md ("Import: Weka").

The schema is the published one (AIPerf's ``weka_trace_models``, the kv-cache-tester docs). Real
files depart from it in ways that lose no meaning (``"subagent_type": null``, an ``_analysis``
key, a field missing that has a default, a number as a string): those are accepted and counted
(``content_free.Deviations``), one warning line at the end: ``weka_fields`` reads them.
``hash_id_scope`` ``global`` (one namespace across the import, as kv-cache-tester writes it) is
part of the format, not a deviation.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import orjson

from agentload.errors import ConfigError, TraceFormatError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes, why_unreadable
from agentload.interop.content_free import At, Deviations, Progress, need_tokens, show
from agentload.interop.import_io import (
    ContentFreeCall,
    count_lines,
    import_header,
    json_lines,
    ns,
    prefix_of,
    summary,
    write_trace,
)
from agentload.interop.weka_fields import (
    Request,
    Subagent,
    read_conversation,
    read_request,
    read_scope,
    read_subagent,
)
from agentload.trace.schema import TurnKind

__all__ = ["FINISH", "import_weka"]

_EPS_S = 1e-6
FINISH = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}
"""Weka's ``stop`` → ``response.finish_reason`` (the export maps it back)."""


def _sources(files: list[Path]) -> list[Path]:
    """The files to import: ``files``, a directory standing for its ``*.json``/``*.jsonl``."""
    out: list[Path] = []
    for f in files:
        if f.is_dir():
            found = sorted(
                p for p in f.iterdir() if p.is_file() and p.suffix in (".json", ".jsonl")
            )
            if not found:
                raise ConfigError(f"{f}: no Weka conversations (*.json, *.jsonl) in this directory")
            out.extend(found)
        elif f.is_file():
            out.append(f)
        else:
            raise ConfigError(f"{f}: {why_unreadable(f)}")
    return out


def _is_jsonl(path: Path) -> bool:
    """Whether ``path`` holds one conversation per line (else one conversation)."""
    return path.name.endswith((".jsonl", ".jsonl.gz"))


def _conversations(paths: list[Path], dev: Deviations) -> Iterator[tuple[At, dict[str, Any]]]:
    """Each conversation of ``paths`` with its place, read one at a time."""
    for path in paths:
        if _is_jsonl(path):
            for lineno, obj in json_lines(path):
                yield At(str(path), f"line {lineno}", dev), obj
            continue
        data = read_bytes(path, limit=MAX_DOCUMENT_BYTES, label=str(path), error=TraceFormatError)
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise TraceFormatError(f"{path}: invalid JSON (cut short?): {exc}") from None
        if not isinstance(obj, dict):
            raise TraceFormatError(f"{path}: expected one JSON object (a conversation)")
        yield At(str(path), "", dev), obj


def import_weka(files: list[Path], out: Path, *, deviations: Deviations | None = None) -> str:
    """Import ``files`` into the trace ``out``; returns the summary line. The deviations from
    the schema that were accepted are counted into ``deviations`` when given (the caller shows
    ``deviations.warning()``), else printed as one warning line on stderr; either way they are
    recorded in the header's ``source.deviations``."""
    paths = _sources(files)
    total = sum(count_lines(p) if _is_jsonl(p) else 1 for p in paths)
    dev = deviations if deviations is not None else Deviations("weka")
    convs = _conversations(paths, dev)
    first = next(convs, None)
    if first is None:
        raise TraceFormatError(f"{paths[0]}: no conversation in the file")
    peek = replace(first[0], dev=None)  # (counted when the conversation itself is read)
    block_size = need_tokens(first[1], "block_size", peek, lo=1)
    scope = read_scope(first[1], peek)
    models = first[1].get("models")
    model = (
        models[0] if isinstance(models, list) and models and isinstance(models[0], str) else None
    )
    header = import_header("weka", paths, block_size, scope, total, model)
    progress = Progress("importing weka", total=total)
    importer = _Importer(block_size, scope, header.clock.mono_ns, progress)
    counts = write_trace(out, header, importer.records(first, convs), progress, dev)
    if deviations is None and (line := dev.warning()):
        print(line, file=sys.stderr)
    return summary(out, counts, header)


@dataclass
class _Agent:
    """One agent being built: its records and what its next call extends."""

    id: str
    sid: str
    at: At
    spawn_s: float | None  # a sub-agent's spawn time (its requests' t may be relative to it)
    calls: list[dict[str, Any]] = field(default_factory=list)
    prev: tuple[str, list[str]] | None = None
    prev_end_ns: int | None = None


@dataclass
class _Importer:
    """The records of each conversation in turn: one session, its main agent, and its calls and
    sub-agents (agent ids unique across the import)."""

    block_size: int
    scope: str
    t0_ns: int
    progress: Progress
    sessions: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)

    def records(
        self, first: tuple[At, dict[str, Any]], rest: Iterator[tuple[At, dict[str, Any]]]
    ) -> Iterator[dict[str, Any]]:
        """The records of ``first`` and then of each conversation of ``rest``."""
        k = 0
        yield from self._one(k, *first)
        for at, conv in rest:
            k += 1
            yield from self._one(k, at, conv)

    def _one(self, k: int, at: At, conv: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The records of the ``k``-th conversation: its session, its main agent, the rest."""
        c = read_conversation(conv, at, self.block_size, self.scope)
        sid = c.cid if c.cid not in self.sessions else f"{c.cid}#{k}"
        self.sessions.add(sid)
        ids_prefix = f"{k}:" if self.scope == "local" else ""
        out: list[dict[str, Any]] = []
        root = _Agent(id=self._agent_id(f"{sid}.main"), sid=sid, at=at, spawn_s=None)
        model = c.models[0] if c.models else "unknown"
        end_ns = self._agent(root, c.requests, "requests", model, ids_prefix, out)
        start_ns = min((r["start_ns"] for r in out if r["type"] == "agent"), default=self.t0_ns)
        agent_rec = {
            "type": "agent",
            "id": root.id,
            "session_id": sid,
            "role": "orchestrator",
            "start_ns": root.calls[0]["timings"]["submit_ns"] if root.calls else self.t0_ns,
            "end_ns": end_ns,
        }
        session = {
            "type": "session",
            "id": sid,
            "start_ns": min(start_ns, agent_rec["start_ns"]),
            "end_ns": max([end_ns] + [r["end_ns"] for r in out if r["type"] == "agent"]),
            "meta": {
                "source_id": c.cid,
                "source_file": at.file,
                "models": c.models,
                "system_tokens": c.system_tokens,
                "tool_tokens": c.tool_tokens,
            },
        }
        if at.record:
            session["meta"]["source_record"] = at.record
        yield session
        yield agent_rec
        yield from out
        self.progress.done = k + 1

    def _agent_id(self, want: str) -> str:
        """``want``, or ``want~N`` when an agent of the import already has it."""
        aid, n = want, 1
        while aid in self.agents:
            n += 1
            aid = f"{want}~{n}"
        self.agents.add(aid)
        return aid

    def _agent(
        self,
        agent: _Agent,
        reqs: list[Any],
        path: str,
        model: str,
        ids_prefix: str,
        out: list[dict[str, Any]],
    ) -> int:
        """Build ``agent``'s calls (and its sub-agents') into ``out``; returns its end ns."""
        waiting: list[str] = []  # blocking children started since the agent's last call
        end_ns = self.t0_ns + ns(agent.spawn_s or 0.0)
        last: dict[str, Any] | None = None  # the last call (out is written after the whole
        # conversation is built, so the sub-agents that follow it can still attach to it)
        for i, r in enumerate(reqs):
            at = agent.at.sub(f"{path}[{i}]")
            if not isinstance(r, dict):
                at.fail("type", "expected a request object")
            typ = r.get("type")
            if typ in ("n", "s"):
                last = self._call(agent, r, at, typ == "s", model, ids_prefix, waiting)
                out.append(last)
                waiting = []
                end_ns = max(end_ns, _end_ns(last))
            elif typ == "subagent":
                child_end, child_id, blocking = self._subagent(
                    agent, last, r, at, i, model, ids_prefix, out
                )
                end_ns = max(end_ns, child_end)
                if blocking:
                    waiting.append(child_id)
            else:
                at.fail("type", f"unknown request type {show(typ)} (n, s or subagent)")
        return end_ns

    def _call(
        self,
        agent: _Agent,
        r: dict[str, Any],
        at: At,
        stream: bool,
        model: str,
        ids_prefix: str,
        waiting: list[str],
    ) -> dict[str, Any]:
        """Build one API call of ``agent`` (waiting for the blocking sub-agents of ``waiting``)."""
        q = read_request(r, at, self.block_size, model)
        submit = self._submit_ns(agent, q, waiting)
        blocks = [f"{ids_prefix}{x}" for x in q.hash_ids]
        seq = len(agent.calls)
        call_id = f"{agent.id}.{seq}"
        rec = ContentFreeCall(
            call_id=call_id,
            session_id=agent.sid,
            agent_id=agent.id,
            seq=seq,
            model=q.model,
            n_in=q.n_in,
            n_out=q.n_out,
            submit_ns=submit,
            stream=stream,
            first_token_ns=submit + ns(max(0.0, q.ttft)) if q.ttft is not None else None,
            last_token_ns=submit + ns(max(0.0, q.api)) if q.api is not None else None,
            prefix=prefix_of(agent.prev, blocks),
            depends_on=list(waiting),
            finish_reason=FINISH.get(q.stop or ""),
            turn=_turn(q.input_types, seq == 0 and agent.spawn_s is not None),
        ).record()
        agent.calls.append(rec)
        agent.prev = (call_id, blocks)
        agent.prev_end_ns = _end_ns(rec)
        return rec

    def _submit_ns(self, agent: _Agent, q: Request, waiting: list[str]) -> int:
        """When ``agent`` sends request ``q``: its think time after the agent's previous call
        (unless sub-agents it waited on came between), else its ``t``; never before the previous
        call's submit."""
        t = q.t
        if agent.spawn_s is not None and t + _EPS_S < agent.spawn_s:
            t += agent.spawn_s  # an inner t relative to the spawn (older captures)
        if q.think is not None and agent.prev_end_ns is not None and not waiting:
            submit = agent.prev_end_ns + ns(max(0.0, q.think))
        else:
            submit = self.t0_ns + ns(t)
        if agent.prev_end_ns is not None and agent.calls:
            submit = max(submit, agent.calls[-1]["timings"]["submit_ns"])
        return submit

    def _subagent(
        self,
        parent: _Agent,
        parent_call: dict[str, Any] | None,
        r: dict[str, Any],
        at: At,
        index: int,
        model: str,
        ids_prefix: str,
        out: list[dict[str, Any]],
    ) -> tuple[int, str, bool]:
        """Build one sub-agent (``index`` in its parent's list); returns (its end ns, its agent
        id, whether it blocks)."""
        sub = read_subagent(r, at, index)
        aid = self._agent_id(f"{parent.sid}.{sub.name}")
        child = _Agent(id=aid, sid=parent.sid, at=at, spawn_s=sub.spawn_s)
        spawn_ns = self.t0_ns + ns(sub.spawn_s)
        if parent_call is not None:
            spawn_ns = max(spawn_ns, _end_ns(parent_call))
        records: list[dict[str, Any]] = []
        child_model = sub.models[0] if sub.models else model
        end_ns = self._agent(child, sub.requests, "requests", child_model, ids_prefix, records)
        if sub.duration_ms >= 0:
            end_ns = max(self.t0_ns + ns(sub.spawn_s) + sub.duration_ms * 1_000_000, spawn_ns)
        end_ns = max(end_ns, spawn_ns)
        task = _delegate(parent_call, sub) if parent_call is not None else None
        agent_rec: dict[str, Any] = {
            "type": "agent",
            "id": child.id,
            "session_id": parent.sid,
            "parent_agent_id": parent.id,
            "role": sub.kind,
            "start_ns": spawn_ns,
            "end_ns": end_ns,
        }
        if task is not None:
            agent_rec["parent_tool_call_id"] = task.tool_id
        out.append(agent_rec)
        out.extend(records)
        if task is not None:
            out.append(_task_record(task, parent, child.id, (spawn_ns, end_ns), sub.status))
        return end_ns, child.id, sub.status != "async_launched"


class _Task(NamedTuple):
    """The ``delegate`` tool call by which a parent's call started a sub-agent."""

    tool_id: str
    call_id: str
    args: dict[str, str]


def _turn(input_types: tuple[str, ...], brief: bool) -> str | None:
    """``llm_call.turn`` from a request's ``input_types``: a sub-agent's first request is its
    brief; tool results (with or without text) are ``tool``; text alone is a user turn."""
    if brief:
        return TurnKind.BRIEF.value
    if "tool_result" in input_types:
        return TurnKind.TOOL.value
    if "text" in input_types:
        return TurnKind.USER.value
    return None


def _delegate(parent_call: dict[str, Any], sub: Subagent) -> _Task:
    """Add the ``delegate`` tool call that starts ``sub`` to the parent's call."""
    tool_id = f"{parent_call['id']}.task{len(parent_call['response']['tool_calls'])}"
    args = {"subagent_type": sub.kind, "agent_id": sub.name}
    if not sub.typed:  # the parent asked for no type
        del args["subagent_type"]
    parent_call["response"]["tool_calls"].append(
        {"id": tool_id, "name": "delegate", "arguments": orjson.dumps(args).decode()}
    )
    parent_call["response"]["finish_reason"] = "tool_calls"
    return _Task(tool_id, parent_call["id"], args)


def _task_record(
    task: _Task, parent: _Agent, child_id: str, span: tuple[int, int], status: str
) -> dict[str, Any]:
    """The ``tool_call`` record of ``task``, lasting as long as the sub-agent (``span``, in ns);
    a status other than completed or launched is its error."""
    rec: dict[str, Any] = {
        "type": "tool_call",
        "id": task.tool_id,
        "session_id": parent.sid,
        "agent_id": parent.id,
        "llm_call_id": task.call_id,
        "name": "delegate",
        "arguments": task.args,
        "start_ns": span[0],
        "end_ns": span[1],
        "child_agent_id": child_id,
    }
    if status not in ("completed", "async_launched"):
        rec["error"] = f"sub-agent status {status}"
    return rec


def _end_ns(call: dict[str, Any]) -> int:
    """When a call's record ends: its last token, else its first, else its submit."""
    t = call["timings"]
    end = t.get("last_token_ns") or t.get("first_token_ns") or t["submit_ns"]
    return int(end)
