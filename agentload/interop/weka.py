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
(``content_free.Deviations``), one warning line at the end. ``hash_id_scope`` ``global`` (one
namespace across the import, as kv-cache-tester writes it) is part of the format, not a
deviation.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from agentload.errors import ConfigError, TraceFormatError
from agentload.infile import MAX_DOCUMENT_BYTES, read_bytes
from agentload.interop.content_free import (
    MISSING,
    NULL,
    At,
    Deviations,
    Progress,
    call_record,
    count_lines,
    extra_keys,
    import_header,
    json_lines,
    need_ids,
    need_int,
    need_str,
    need_time,
    need_tokens,
    ns,
    opt_str,
    opt_time,
    prefix_of,
    show,
    summary,
    time_s,
    write_trace,
)

__all__ = ["FINISH", "SUBAGENT_ROLE", "import_weka"]

_EPS_S = 1e-6
FINISH = {"tool_use": "tool_calls", "end_turn": "stop", "max_tokens": "length"}
"""Weka's ``stop`` → ``response.finish_reason`` (the export maps it back)."""
_SCOPES = ("local", "global")
SUBAGENT_ROLE = "subagent"
"""The role of a sub-agent whose ``subagent_type`` is null or absent (real files have it null)."""
_CONVERSATION_KEYS = frozenset(
    ("id", "models", "block_size", "hash_id_scope", "tool_tokens", "system_tokens", "requests",
     "totals")
)  # fmt: skip
_CALL_KEYS = frozenset(
    ("t", "type", "model", "in", "out", "input_length", "output_length", "hash_ids",
     "input_types", "output_types", "stop", "api_time", "think_time", "ttft")
)  # fmt: skip
_SUBAGENT_KEYS = frozenset(
    ("t", "type", "agent_id", "subagent_type", "duration_ms", "total_tokens", "tool_use_count",
     "status", "requests", "models", "tool_tokens", "system_tokens")
)  # fmt: skip


def _sources(files: list[Path]) -> list[Path]:
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
            raise ConfigError(f"{f}: no such file or directory")
    return out


def _is_jsonl(path: Path) -> bool:
    return path.name.endswith((".jsonl", ".jsonl.gz"))


def _conversations(paths: list[Path], dev: Deviations) -> Iterator[tuple[At, dict[str, Any]]]:
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
    scope = _scope(first[1], peek)
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


def _scope(conv: dict[str, Any], at: At) -> str:
    scope = need_str(conv, "hash_id_scope", at, default="local", nullable=False, required=True)
    if scope not in _SCOPES:
        at.fail("hash_id_scope", f"expected 'local' or 'global', got {scope!r}")
    return scope


def _models(d: dict[str, Any], at: At) -> list[str]:
    """``d["models"]``: a list of strings (empty when null or absent, counted: the schema
    requires it, the requests name their own models)."""
    models = d.get("models")
    if models is None:
        at.deviate("models", NULL if "models" in d else MISSING)
        return []
    if not isinstance(models, list) or not all(isinstance(m, str) for m in models):
        at.fail("models", "expected a list of strings")
    return models


def _requests(d: dict[str, Any], at: At, *, subagent: bool) -> list[Any]:
    """``d["requests"]``: a list. A conversation without requests means nothing (an error); a
    sub-agent's null or absent list is an agent without calls (counted)."""
    reqs = d.get("requests")
    if reqs is None and subagent:
        at.deviate("requests", NULL if "requests" in d else MISSING)
        return []
    if not isinstance(reqs, list):
        at.fail("requests", "missing (a list of requests)" if reqs is None else "expected a list")
    if not reqs and not subagent:
        at.fail("requests", "empty (a conversation without requests)")
    return reqs


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
    block_size: int
    scope: str
    t0_ns: int
    progress: Progress
    sessions: set[str] = field(default_factory=set)
    agents: set[str] = field(default_factory=set)

    def records(
        self, first: tuple[At, dict[str, Any]], rest: Iterator[tuple[At, dict[str, Any]]]
    ) -> Iterator[dict[str, Any]]:
        k = 0
        yield from self._one(k, *first)
        for at, conv in rest:
            k += 1
            yield from self._one(k, at, conv)

    def _one(self, k: int, at: At, conv: dict[str, Any]) -> Iterator[dict[str, Any]]:
        extra_keys(conv, _CONVERSATION_KEYS, at)
        bs = need_tokens(conv, "block_size", at, lo=1)
        if bs != self.block_size:
            at.fail(
                "block_size",
                f"{bs}, but the first conversation's is {self.block_size} "
                "(import conversations of one block size together)",
            )
        scope = _scope(conv, at)
        if scope != self.scope:
            at.fail("hash_id_scope", f"{scope!r}, but the first conversation's is {self.scope!r}")
        # an id is a name: without one, the file's stem (repeats get #K, as any repeated id)
        cid = need_str(conv, "id", at, default="", nullable=False, required=True)
        cid = cid or Path(at.file).stem
        models = _models(conv, at)
        tool_tokens = need_tokens(conv, "tool_tokens", at, default=0, nullable=False)
        system_tokens = need_tokens(conv, "system_tokens", at, default=0, nullable=False)
        reqs = _requests(conv, at, subagent=False)
        sid = cid if cid not in self.sessions else f"{cid}#{k}"
        self.sessions.add(sid)
        ids_prefix = f"{k}:" if scope == "local" else ""
        out: list[dict[str, Any]] = []
        root = _Agent(id=self._agent_id(f"{sid}.main"), sid=sid, at=at, spawn_s=None)
        model = models[0] if models else "unknown"
        end_ns = self._agent(root, reqs, "requests", model, ids_prefix, out)
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
                "source_id": cid,
                "source_file": at.file,
                "models": models,
                "system_tokens": system_tokens,
                "tool_tokens": tool_tokens,
            },
        }
        if at.record:
            session["meta"]["source_record"] = at.record
        yield session
        yield agent_rec
        yield from out
        self.progress.done = k + 1

    def _agent_id(self, want: str) -> str:
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
        extra_keys(r, _CALL_KEYS, at)
        t = need_time(r, "t", at)
        # AIPerf's model reads "in"/"out" by their names "input_length"/"output_length" too
        n_in = need_tokens(r, "input_length" if "in" not in r and "input_length" in r else "in", at)
        n_out = need_tokens(
            r, "output_length" if "out" not in r and "output_length" in r else "out", at
        )
        ids = need_ids(r, "hash_ids", at, n_in, self.block_size, nullable=False)
        call_model = need_str(r, "model", at, default=model, nullable=False, required=True)
        api = opt_time(r, "api_time", at)
        think = opt_time(r, "think_time", at)
        ttft = opt_time(r, "ttft", at)
        stop = opt_str(r, "stop", at, nullable=False)
        for key in ("input_types", "output_types"):
            v = r.get(key)
            if v is None and key in r:
                at.deviate(key, NULL)
            elif v is not None and (
                not isinstance(v, list) or not all(isinstance(x, str) for x in v)
            ):
                at.fail(key, "expected a list of strings")
        if agent.spawn_s is not None and t + _EPS_S < agent.spawn_s:
            t += agent.spawn_s  # an inner t relative to the spawn (older captures)
        if think is not None and agent.prev_end_ns is not None and not waiting:
            submit = agent.prev_end_ns + ns(max(0.0, think))
        else:
            submit = self.t0_ns + ns(t)
        if agent.prev_end_ns is not None and agent.calls:
            submit = max(submit, agent.calls[-1]["timings"]["submit_ns"])
        blocks = [f"{ids_prefix}{x}" for x in ids]
        seq = len(agent.calls)
        call_id = f"{agent.id}.{seq}"
        rec = call_record(
            call_id=call_id,
            session_id=agent.sid,
            agent_id=agent.id,
            seq=seq,
            model=call_model,
            n_in=n_in,
            n_out=n_out,
            submit_ns=submit,
            stream=stream,
            first_token_ns=submit + ns(max(0.0, ttft)) if ttft is not None else None,
            last_token_ns=submit + ns(max(0.0, api)) if api is not None else None,
            prefix=prefix_of(agent.prev, blocks),
            depends_on=list(waiting),
            finish_reason=FINISH.get(stop or ""),
        )
        agent.calls.append(rec)
        agent.prev = (call_id, blocks)
        agent.prev_end_ns = _end_ns(rec)
        return rec

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
        extra_keys(r, _SUBAGENT_KEYS, at)
        spawn_s = need_time(r, "t", at)
        name = need_str(r, "agent_id", at, default="", nullable=False, required=True)
        name = name or f"subagent{index}"
        kind = need_str(
            r, "subagent_type", at, default=SUBAGENT_ROLE, nullable=False, required=True
        )
        status = need_str(r, "status", at, default="completed", nullable=False, required=True)
        duration_ms = need_int(r, "duration_ms", at, default=-1)
        time_s(duration_ms, "duration_ms", at, unit_s=1e-3)
        models = _models(r, at)
        reqs = _requests(r, at, subagent=True)
        child = _Agent(
            id=self._agent_id(f"{parent.sid}.{name}"), sid=parent.sid, at=at, spawn_s=spawn_s
        )
        spawn_ns = self.t0_ns + ns(spawn_s)
        if parent_call is not None:
            spawn_ns = max(spawn_ns, _end_ns(parent_call))
        records: list[dict[str, Any]] = []
        end_ns = self._agent(
            child, reqs, "requests", models[0] if models else model, ids_prefix, records
        )
        if duration_ms >= 0:
            end_ns = max(self.t0_ns + ns(spawn_s) + duration_ms * 1_000_000, spawn_ns)
        end_ns = max(end_ns, spawn_ns)
        tool_id: str | None = None
        if parent_call is not None:
            tool_id = f"{parent_call['id']}.task{len(parent_call['response']['tool_calls'])}"
            args = {"subagent_type": kind, "agent_id": name}
            if r.get("subagent_type") is None:  # the parent asked for no type
                del args["subagent_type"]
            parent_call["response"]["tool_calls"].append(
                {"id": tool_id, "name": "delegate", "arguments": orjson.dumps(args).decode()}
            )
            parent_call["response"]["finish_reason"] = "tool_calls"
        agent_rec: dict[str, Any] = {
            "type": "agent",
            "id": child.id,
            "session_id": parent.sid,
            "parent_agent_id": parent.id,
            "role": kind,
            "start_ns": spawn_ns,
            "end_ns": end_ns,
        }
        if tool_id is not None:
            agent_rec["parent_tool_call_id"] = tool_id
        out.append(agent_rec)
        out.extend(records)
        if parent_call is not None and tool_id is not None:
            out.append(
                {
                    "type": "tool_call",
                    "id": tool_id,
                    "session_id": parent.sid,
                    "agent_id": parent.id,
                    "llm_call_id": parent_call["id"],
                    "name": "delegate",
                    "arguments": args,
                    "start_ns": spawn_ns,
                    "end_ns": end_ns,
                    "child_agent_id": child.id,
                }
            )
            if status not in ("completed", "async_launched"):
                out[-1]["error"] = f"sub-agent status {status}"
        return end_ns, child.id, status != "async_launched"


def _end_ns(call: dict[str, Any]) -> int:
    t = call["timings"]
    end = t.get("last_token_ns") or t.get("first_token_ns") or t["submit_ns"]
    return int(end)
