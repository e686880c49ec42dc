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

This module finds the trajectories that are sessions of their own; ``atif_trajectory`` reads
each into calls, the parts of its steps read by ``atif_steps``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentload.errors import TraceFormatError
from agentload.interop.atif_steps import refs as trajectory_refs
from agentload.interop.atif_trajectory import Importer, Source, Walk, looks_like_atif
from agentload.interop.chat_rows import mtime_ns, source_files, unique
from agentload.interop.exchanges import Exchange, Pacer, Tally, import_sessions
from agentload.outfile import check_output

__all__ = ["import_atif", "looks_like_atif"]

FORMAT = "atif"
_DERIVED = {"stream": "true"}


def _scan(
    imp: Importer, files: list[Path]
) -> tuple[list[tuple[Path, str]], list[tuple[Path, Any]]]:
    """The first pass: which files are trajectories (each with its session's name) and the
    references each makes; ``imp.by_session``: the session ids only one file has."""
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
        refs += [(f, r) for r in trajectory_refs(obj)]
    imp.by_session = {sid: ps[0] for sid, ps in sessions_of.items() if len(ps) == 1}
    return found, refs


def _roots(
    found: list[tuple[Path, str]], refs: list[tuple[Path, Any]], by_session: dict[str, Path]
) -> list[tuple[Path, str]]:
    """The trajectories imported as sessions of their own: those no other one refers to (every
    one, when each is referred to: a cycle)."""
    inner: set[Path] = set()
    for f, ref in refs:
        tp = ref.get("trajectory_path") if isinstance(ref, dict) else None
        sid = ref.get("session_id") if isinstance(ref, dict) else None
        if isinstance(tp, str) and tp and (f.parent / tp).is_file():
            inner.add((f.parent / tp).resolve())
        elif isinstance(sid, str) and sid in by_session:
            inner.add(by_session[sid].resolve())
    return [(f, s) for f, s in found if f.resolve() not in inner] or found


def import_atif(paths: list[Path], out: Path, *, force: bool = False) -> str:
    """Import ATIF trajectories (files or directories) into the trace ``out``."""
    tally = Tally(FORMAT)
    files, walked = source_files(paths, (".json",))
    imp = Importer(tally, walked)
    # Trajectories another one refers to are imported inside their parent, not as sessions.
    found, refs = _scan(imp, files)
    if not found:
        raise TraceFormatError(
            f"{', '.join(map(str, paths))}: no ATIF trajectories (*.json, schema_version "
            "ATIF-v1.x) found"
        )
    roots = _roots(found, refs, imp.by_session)
    check_output(out, files, force=force)
    used: dict[str, int] = {}

    def sessions() -> Iterator[list[Exchange]]:
        for f, sid in roots:
            obj = imp.load(f)
            if obj is None:
                continue
            src = Source(f, "", obj)
            session = unique(sid, used)
            walk = Walk(src, session, Pacer(tally, mtime_ns(f)), (f"{f.resolve()}#",), [])
            imp.trajectory(src, walk, None)
            tally.derived.update(_DERIVED)
            yield walk.out

    done = import_sessions(
        out,
        tally,
        sessions(),
        lambda: ([f for f, _ in found], imp.docs),
        "atif trajectories",
        len(roots),
    )
    return (
        f"{done} from {imp.docs:,} ATIF trajectories ({len(roots):,} sessions, "
        f"{len(found):,} files)"
    )
