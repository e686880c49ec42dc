"""Full-content imports: an agent's own log played through the recording proxy's pipeline.

An agent's log (Claude Code's session JSONL, Codex's rollouts) holds what went over the wire:
each request's conversation, each answer, their times. An importer turns it into
``Exchange``s: one request in its own API (rebuilt from the log; what the log lacks is derived
and named in ``header.source.derived``), the answer as the API gave it, the request's submit and
the answer's end on the wall clock, and the headers the agent sends that name its session and
thread. ``write_sessions`` feeds them, session by session, to ``record.transcribe.Recorder`` in
the order the proxy would have seen them (each request at its submit, each answer at its end;
a request that must come after the answer that spawned it, ``Exchange.after``, waits for it).
So an imported trace is stored exactly as ``agentload record`` stores one, and its sessions,
agents and sub-agents are rebuilt by the same rules (``record.threads``). Times keep their
wall-clock values: the header's clock anchor has ``unix_ns == mono_ns`` (the first session's
start). ``import_sessions`` is the end every full-content importer shares: the sessions
written, the deviations' warning, the summary's start.

Memory is bounded by the largest session: the recorder forgets each session once written.
"""

from __future__ import annotations

import asyncio
import heapq
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from agentload.errors import AgentloadError, ConfigError, TraceFormatError
from agentload.infile import why_unreadable
from agentload.interop.content_free import At, Deviations, Progress
from agentload.outfile import atomic_output
from agentload.record.native import AGENT_HEADER, SESSION_HEADER
from agentload.record.transcribe import Recorder
from agentload.trace import make_header
from agentload.trace.schema import ClockAnchor, Header, SourceInfo, Timings
from agentload.trace.writer import TraceWriter, replace_header
from agentload.wire import Api, WireReply, reply_from_json

__all__ = [
    "MAX_FILES_NAMED",
    "Exchange",
    "Pacer",
    "Tally",
    "chat_exchange",
    "chat_usage",
    "full_header",
    "import_sessions",
    "iso_ns",
    "jsonl_files",
    "jsonl_values",
    "read_lines",
    "unreadable",
    "write_sessions",
]

MAX_FILES_NAMED = 1000
"""Source files named in the header (``files_total`` counts them all)."""
MAX_LINE = 64 << 20
"""A longer line is not read (counted): no real log entry is near it."""


@dataclass
class Exchange:
    """One model call as a proxy would have seen it (see the module docstring)."""

    api: Api
    body: dict[str, Any]
    reply: WireReply
    submit_ns: int
    end_ns: int
    headers: dict[str, str] = field(default_factory=dict)
    first_token_ns: int | None = None
    error: str | None = None
    emits: tuple[str, ...] = ()
    """Ids of the tool calls its answer made (``after`` of another exchange may name one)."""
    after: str | None = None
    """A tool call id whose emitting answer this request follows (a sub-agent's first call
    and the delegation that started it), when the log's times may say otherwise."""


@dataclass
class Tally:
    """What an import met on its way: departures from the source's format that lose no meaning
    (``content_free.Deviations``: one warning line, counted in the header) and the fields it
    derived (header)."""

    fmt: str
    dev: Deviations = field(init=False)
    derived: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.dev = Deviations(self.fmt)

    def note(self, fld: str, kind: str) -> None:
        self.dev.note(fld, kind)


PACE_TOKENS_PER_S = 50.0
"""Output tokens a second of a call whose source has no times (``Pacer``)."""
PACE_FIRST_TOKEN_S = 0.5
"""Seconds before the first token of such a call."""
PACE_GAP_S = 1.0
"""Seconds between an answer and the next request when the source gives no tool time."""


@dataclass
class Pacer:
    """Times for a source that has none (or only tool delays): each call starts when the one
    before ended plus the gap (the source's tool time when it gives one, else ``PACE_GAP_S``)
    and lasts ``PACE_FIRST_TOKEN_S`` plus its output at ``PACE_TOKENS_PER_S``. What it derived
    goes into the import's ``Tally`` (the header's ``source.derived``)."""

    tally: Tally
    now_ns: int
    gaps_given: bool = False

    def call(self, output_tokens: int | None, gap_s: float | None = None) -> tuple[int, int]:
        """``(submit_ns, end_ns)`` of the next call; ``gap_s``: the source's time between the
        previous answer and this request, if it gives one."""
        if gap_s is not None and gap_s >= 0:
            self.gaps_given = True
            self.now_ns += round(gap_s * 1e9)
        else:
            self.now_ns += round(PACE_GAP_S * 1e9)
        submit = self.now_ns
        n = output_tokens or 0
        self.now_ns += round((PACE_FIRST_TOKEN_S + n / PACE_TOKENS_PER_S) * 1e9)
        self.tally.derived["times"] = (
            f"not in the source: each call {PACE_FIRST_TOKEN_S:g} s to its first token, then "
            f"{PACE_TOKENS_PER_S:g} output tokens/s; between calls "
            + ("the source's tool times (else " if self.gaps_given else "")
            + f"{PACE_GAP_S:g} s"
            + (")" if self.gaps_given else "")
        )
        return submit, self.now_ns


def chat_exchange(
    body: dict[str, Any],
    answer: dict[str, Any],
    times: tuple[int, int],
    *,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Exchange:
    """A Chat Completions call: ``body`` as sent (``messages``, ``tools``...), ``answer`` the
    assistant message (OpenAI shape: ``content``, ``tool_calls``), ``times`` its (submit, end)
    on the wall clock, ``usage`` in chat's keys when the source reports it; raises
    ``WireError`` when the answer does not read as one."""
    finish = finish_reason or ("tool_calls" if answer.get("tool_calls") else "stop")
    obj: dict[str, Any] = {"choices": [{"index": 0, "message": answer, "finish_reason": finish}]}
    if usage is not None:
        obj["usage"] = usage
    calls = answer.get("tool_calls")
    emits = tuple(
        str(c["id"]) for c in calls or () if isinstance(c, dict) and isinstance(c.get("id"), str)
    )
    return Exchange(
        api="chat",
        body=body,
        reply=reply_from_json("chat", obj),
        submit_ns=times[0],
        end_ns=times[1],
        headers=dict(headers or {}),
        emits=emits,
    )


def chat_usage(
    prompt: int | None, completion: int | None, cached: int | None
) -> dict[str, Any] | None:
    """A call's Chat Completions ``usage`` from its token counts (``prompt`` includes the
    ``cached`` ones); None when it has neither prompt nor completion tokens."""
    if prompt is None and completion is None:
        return None
    usage: dict[str, Any] = {}
    if prompt is not None:
        usage["prompt_tokens"] = prompt
    if completion is not None:
        usage["completion_tokens"] = completion
    if prompt is not None and completion is not None:
        usage["total_tokens"] = prompt + completion
    if cached is not None:
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


@contextmanager
def unreadable(tally: Tally, what: str) -> Iterator[None]:
    """Skip, and count, a ``what`` (a session, a thread) whose damaged content the reader's
    checks did not foresee: one damaged session does not stop the import of the others."""
    try:
        yield
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        if isinstance(exc, AgentloadError):
            raise
        tally.note(what, f"unreadable ({type(exc).__name__}), skipped")


def iso_ns(value: Any, at: At, fld: str = "timestamp") -> int:
    """An ISO-8601 time (``2026-12-03T19:55:28.242Z``) as Unix nanoseconds, else a one-line
    error."""
    if not isinstance(value, str):
        at.fail(fld, f"expected an ISO-8601 time, got {value!r:.40}")
    try:
        t = datetime.fromisoformat(value[:-1] + "+00:00" if value.endswith("Z") else value)
    except ValueError:
        at.fail(fld, f"expected an ISO-8601 time, got {value!r:.40}")
    if t.tzinfo is None:
        t = t.replace(tzinfo=datetime.now().astimezone().tzinfo)
    return round(t.timestamp() * 1_000_000) * 1000


def _size(n: int) -> str:
    """A byte count as the notes say it (``64 MiB``, ``1 GiB``)."""
    return f"{n >> 30} GiB" if n >= 1 << 30 and not n % (1 << 30) else f"{n >> 20} MiB"


def jsonl_values(
    f: BinaryIO, tally: Tally, max_line: int = MAX_LINE
) -> Iterator[tuple[int, int, int, Any]]:
    """``(line number, offset, length, value)`` of each line of ``f`` that is JSON; blank lines
    are passed over, a line longer than ``max_line`` bytes or not JSON (one cut short by a
    killed agent, say) is counted and skipped."""
    offset = 0
    for lineno, raw in enumerate(f, 1):
        start, offset = offset, offset + len(raw)
        if not raw.strip():
            continue
        if len(raw) > max_line:
            tally.note("line", f"over {_size(max_line)}, skipped")
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            tally.note("line", "not JSON, skipped")
            continue
        yield lineno, start, len(raw), value


def read_lines(
    path: Path, tally: Tally, limit: int | None = None, *, max_line: int = MAX_LINE
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of each line (the first ``limit``, at least 1); lines that are
    not JSON objects (one cut short by a killed agent, say) or longer than ``max_line`` bytes
    are counted and skipped."""
    n = 0
    try:
        with open(path, "rb") as f:
            for lineno, _, _, obj in jsonl_values(f, tally, max_line):
                if not isinstance(obj, dict):
                    tally.note("line", "not a JSON object, skipped")
                    continue
                n += 1
                yield lineno, obj
                if limit is not None and n >= limit:
                    return
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc}") from None


def jsonl_files(paths: Iterable[Path], pattern: str) -> Iterator[Path]:
    """Each path that is a file, and under each directory every file matching ``pattern``
    (recursively, sorted); a path that is neither is a one-line error."""
    for p in paths:
        if p.is_dir():
            yield from sorted(q for q in p.rglob(pattern) if q.is_file())
        elif p.is_file():
            yield p
        else:
            raise ConfigError(f"{p}: {why_unreadable(p)}")


def full_header(fmt: str, files: list[Path], records: int, tally: Tally, t0_ns: int) -> Header:
    """The header of a full-content import: wall-clock times (anchored at ``t0_ns``, the first
    session's start: ``mono_ns == unix_ns``), its source."""
    return make_header(
        clock=ClockAnchor(unix_ns=t0_ns, mono_ns=t0_ns),
        source=SourceInfo(
            format=fmt,
            files=[str(f) for f in files[:MAX_FILES_NAMED]],
            files_total=len(files) if len(files) > MAX_FILES_NAMED else None,
            records=records,
            derived=dict(tally.derived),
            deviations=tally.dev.as_dict(),
        ),
    )


async def _play(rec: Recorder, exchanges: list[Exchange]) -> None:
    """One session's exchanges through the recorder, in the order a proxy would see them."""
    events: list[tuple[int, int, int]] = []  # (time, 0 end / 1 begin, index)
    for i, x in enumerate(exchanges):
        x.end_ns = max(x.end_ns, x.submit_ns + 1)
        events.append((x.submit_ns, 1, i))
        events.append((x.end_ns, 0, i))
    heapq.heapify(events)
    emitted: set[str] = set()
    waiting: dict[str, list[int]] = {}
    pending: dict[int, Any] = {}
    started: set[int] = set()

    def begin(i: int, wait: bool = True) -> None:
        x = exchanges[i]
        if i in started:
            return
        if wait and x.after is not None and x.after not in emitted:
            waiting.setdefault(x.after, []).append(i)
            return
        started.add(i)
        pending[i] = rec.begin(x.api, orjson.dumps(x.body), x.headers, x.submit_ns)

    while events:
        _, kind, i = heapq.heappop(events)
        if kind == 1:
            begin(i)
            continue
        if i not in pending:  # still waiting for an answer that never came: begin it now
            begin(i, wait=False)
        p = pending.pop(i)
        x = exchanges[i]
        if p is not None:
            t = Timings(
                submit_ns=x.submit_ns, first_token_ns=x.first_token_ns, last_token_ns=x.end_ns
            )
            await rec.end(p, x.reply, t, x.error)
        for cid in x.emits:
            emitted.add(cid)
            for j in waiting.pop(cid, ()):
                begin(j, wait=False)


async def _write(
    tmp: Path,
    header: Callable[[int], Header],
    sessions: Iterable[list[Exchange]],
    progress: Progress,
) -> tuple[int, int]:
    writer = TraceWriter(tmp, header(0))
    await writer.open()
    rec = Recorder(writer, session_header=SESSION_HEADER, agent_header=AGENT_HEADER)
    n_sessions = 0
    t0: int | None = None
    last = 0
    try:
        for group in sessions:
            if t0 is None and group:
                t0 = min(x.submit_ns for x in group)
            last = max([last, *(x.end_ns for x in group)])
            await _play(rec, group)
            n_sessions += len(rec.threads.sessions)
            rec.forget()
            progress.done += 1
            progress.show()
            await writer.flush()
    finally:
        await writer.close(end_ns=last)
    progress.show(final=True)
    replace_header(tmp, writer.header_bytes, header(t0 or 0))
    return n_sessions, rec.calls


def write_sessions(
    out: Path,
    header: Callable[[int], Header],
    sessions: Iterable[list[Exchange]],
    progress: Progress,
) -> tuple[int, int]:
    """Write every session's exchanges to ``out`` (beside it, renamed into place when whole)
    under the header ``header(t0_ns)`` gives once they are all read (what was derived and
    met is known only then; ``t0_ns``: the first session's start); returns (sessions, calls) written."""
    with atomic_output(out, force=True, option="-o") as tmp:
        return asyncio.run(_write(tmp, header, sessions, progress))


def import_sessions(
    out: Path,
    tally: Tally,
    sessions: Iterable[list[Exchange]],
    source: Callable[[], tuple[list[Path], int]],
    label: str,
    total: int = 0,
) -> str:
    """What every full-content import ends with: ``sessions`` written to ``out`` (progress shown
    as ``label``, of ``total`` when known) under a full-content header of the format ``tally``
    counts for (``source()``: the files and records read, known once all are), then the
    deviations' warning; returns the summary's start (``wrote OUT: N sessions, M calls``)."""
    n_sessions, calls = write_sessions(
        out,
        lambda t0: full_header(tally.fmt, *source(), tally, t0),
        sessions,
        Progress(label, total=total),
    )
    warning = tally.dev.warning()
    if warning:
        print(warning, file=sys.stderr)
    return f"wrote {out}: {n_sessions:,} sessions, {calls:,} calls"
