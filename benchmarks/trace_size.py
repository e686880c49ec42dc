"""How small is a trace, and how fast is it written and read?

Builds, through the public recorder API (``TraceWriter`` + ``CallCapture``), one synthetic
session shaped like the target workload: an orchestrator whose prompt grows from ~60K to ~400K
tokens over ~100 calls, with parallel tool calls and a sub-agent delegation every third round
(each sub-agent: a fresh ~2K-token context growing over 6 calls, its summary appended to the
orchestrator's context). Every call ends a zstd frame, as in a real run where calls are more
than the writer's 1 s frame interval apart (frames compress independently, so this is the
pessimistic case; ``--one-frame`` lets the writer batch instead). All text is real: slices of the Python standard library's source
files on this machine, never repeated, so compression is not flattered.

Figures (last line, one JSON object):

* ``naive_bytes``: the JSON of every call's full message list (what a log that stores each
  request verbatim would hold), summed over all calls of all agents.
* ``trace_bytes``: size of the ``.agentload.jsonl.zst`` file.
* ``ratio``: ``trace_bytes / naive_bytes`` (goal: <= 0.03).
* ``write_mb_s``: naive MB recorded per second of capture (tokenizing, prefix hashing,
  serializing, compressing, writing): the request traffic the recorder keeps up with.
* ``read_mb_s``: naive MB per second of ``load_trace`` + resolving every call's messages: how
  fast a trace turns back into the traffic it represents.

Usage: ``python benchmarks/trace_size.py [--calls 100] [--out DIR] [--one-frame]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from agentload.tokenizer import ChatTokenCounter
from agentload.trace import (
    AgentRecord,
    CallCapture,
    ObservedCall,
    SessionRecord,
    Timings,
    ToolCallRecord,
    TraceWriter,
    assistant_message,
    load_trace,
    make_header,
)

MS = 1_000_000


class Corpus:
    """Consecutive, never-repeated slices of the standard library's source files."""

    def __init__(self) -> None:
        root = Path(sysconfig.get_paths()["stdlib"])
        self.files = sorted(
            p
            for p in root.rglob("*.py")
            if "site-packages" not in p.parts and "test" not in p.parts
        )
        self.root = root
        self._it = self._texts()
        self._buf = ""

    def _texts(self) -> Iterator[str]:
        for p in self.files:
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            yield f"# {p.relative_to(self.root)}\n{text}"

    def take(self, chars: int) -> str:
        while len(self._buf) < chars:
            self._buf += next(self._it)
        out, self._buf = self._buf[:chars], self._buf[chars:]
        return out

    def paths(self, n: int) -> list[str]:
        return [str(p.relative_to(self.root)) for p in self.files[:n]]


class Clock:
    """Synthetic monotonic ns (the benchmark does not sleep)."""

    def __init__(self) -> None:
        self.t = 1_000_000 * MS

    def advance(self, ms: float) -> int:
        self.t += int(ms * MS)
        return self.t


def timings(clock: Clock, out_tokens: int) -> Timings:
    submit = clock.t
    first = clock.advance(150)
    last = clock.advance(out_tokens * 12)
    return Timings(submit_ns=submit, first_token_ns=first, last_token_ns=last)


def tool_call(i: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": i,
        "type": "function",
        "function": {"name": name, "arguments": orjson.dumps(args).decode()},
    }


TOOLS = [
    {
        "type": "function",
        "function": {
            "name": n,
            "description": d,
            "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}},
        },
    }
    for n, d in [
        ("search_code", "grep the workspace"),
        ("read_file", "read a file"),
        ("run_tests", "run the test command"),
        ("delegate", "hand off to a sub-agent"),
    ]
]


class Session:
    def __init__(self, writer: TraceWriter, corpus: Corpus, counter: ChatTokenCounter) -> None:
        self.w = writer
        self.corpus = corpus
        self.counter = counter
        self.cap = CallCapture(writer, counter)
        self.clock = Clock()
        self.bodies: list[list[dict[str, Any]]] = []  # every call's message list, for naive
        self.frame_per_call = True
        self.calls = 0
        self.chars_per_token = 3.6
        self.orch_tokens: list[int] = []

    async def call(
        self,
        agent: str,
        seq: int,
        messages: list[dict[str, Any]],
        content: str,
        tcs: list[dict[str, Any]] | None,
        tools: list[dict[str, Any]] | None,
    ) -> int:
        body: dict[str, Any] = {
            "model": "agentload-sim",
            "messages": list(messages),
            "stream": True,
            "max_tokens": 2048,
        }
        if tools:
            body["tools"] = tools
        self.bodies.append(body["messages"])
        out = max(8, len(content) // 4)
        rec = await self.cap.record(
            ObservedCall(
                call_id=f"{agent}.{seq}",
                session_id="s1",
                agent_id=agent,
                seq=seq,
                body=body,
                content=content or None,
                tool_calls=tcs,
                finish_reason="tool_calls" if tcs else "stop",
                usage=None,
                timings=timings(self.clock, out),
            )
        )
        self.calls += 1
        if self.frame_per_call:
            await self.w.flush()
        return rec.usage.prompt_tokens_ours

    async def tool(self, agent: str, call_id: str, tc: dict[str, Any], ms: float) -> None:
        start = self.clock.t
        end = self.clock.advance(ms)
        await self.w.write(
            ToolCallRecord(
                id=tc["id"],
                session_id="s1",
                agent_id=agent,
                llm_call_id=call_id,
                name=tc["function"]["name"],
                arguments=orjson.loads(tc["function"]["arguments"]),
                start_ns=start,
                end_ns=end,
                exit_code=0,
                sandbox_id="bench",
            )
        )

    async def subagent(self, name: str, parent_tc: str, task: str) -> str:
        await self.w.write(
            AgentRecord(
                id=name,
                session_id="s1",
                parent_agent_id="orch",
                parent_tool_call_id=parent_tc,
                role="code_search",
                start_ns=self.clock.t,
            )
        )
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": "You search code.\n" + self.corpus.take(6_000)},
            {"role": "user", "content": task},
        ]
        for seq in range(6):
            last = seq == 5
            tcs = None if last else [tool_call(f"{name}.t{seq}", "search_code", {"q": f"x{seq}"})]
            content = self.corpus.take(1_200) if last else f"Searching step {seq}."
            await self.call(name, seq, msgs, content, tcs, TOOLS[:2])
            msgs.append(assistant_message(content, tcs))
            if tcs:
                await self.tool(name, f"{name}.{seq}", tcs[0], 300)
                msgs.append(
                    {
                        "role": "tool",
                        "tool_call_id": tcs[0]["id"],
                        "content": self.corpus.take(5_000),
                    }
                )
        await self.w.write(
            AgentRecord(
                id=name,
                session_id="s1",
                parent_agent_id="orch",
                parent_tool_call_id=parent_tc,
                role="code_search",
                start_ns=self.clock.t,
                end_ns=self.clock.t,
            )
        )
        return content

    async def run(self, n_calls: int, start_tokens: int, end_tokens: int) -> None:
        await self.w.write(SessionRecord(id="s1", start_ns=self.clock.t))
        await self.w.write(
            AgentRecord(id="orch", session_id="s1", role="orchestrator", start_ns=self.clock.t)
        )
        system = "You are the orchestrator.\n## Repository map\n" + "\n".join(
            self.corpus.paths(400)
        )
        while (n := self.counter.count_text(system)) < start_tokens - 600:
            system += self.corpus.take(int((start_tokens - n) * self.chars_per_token))
        msgs: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": "Find and fix the failing test in the email package."},
        ]
        tokens = 0
        for seq in range(n_calls):
            last = seq == n_calls - 1
            kinds = ["read_file", "search_code"] if seq % 3 else ["delegate", "read_file"]
            tcs = (
                None
                if last
                else [
                    tool_call(f"orch.t{seq}.{k}", kind, {"arg": f"{kind}-{seq}"})
                    for k, kind in enumerate(kinds)
                ]
            )
            content = "Done: the fix is applied." if last else f"Round {seq}: checking more code."
            tokens = await self.call("orch", seq, msgs, content, tcs, TOOLS)
            self.orch_tokens.append(tokens)
            msgs.append(assistant_message(content, tcs))
            if last or tcs is None:
                break
            # Grow the context so the last call lands near end_tokens.
            growth = (end_tokens - tokens) / max(1, n_calls - 1 - seq)
            for tc in tcs:
                name = tc["function"]["name"]
                if name == "delegate":
                    start = self.clock.t
                    summary = await self.subagent(f"sub{seq}", tc["id"], f"Investigate part {seq}")
                    await self.w.write(
                        ToolCallRecord(
                            id=tc["id"],
                            session_id="s1",
                            agent_id="orch",
                            llm_call_id=f"orch.{seq}",
                            name="delegate",
                            arguments={"task": f"part {seq}"},
                            start_ns=start,
                            end_ns=self.clock.t,
                            child_agent_id=f"sub{seq}",
                        )
                    )
                    text = summary
                else:
                    await self.tool("orch", f"orch.{seq}", tc, 400)
                    text = self.corpus.take(max(200, int(growth * self.chars_per_token / 2)))
                msgs.append({"role": "tool", "tool_call_id": tc["id"], "content": text})
            self.clock.advance(200)
        await self.w.write(
            SessionRecord(id="s1", start_ns=1_000_000 * MS, end_ns=self.clock.t, end_reason="done")
        )


async def build(
    path: Path, n_calls: int, corpus: Corpus, counter: ChatTokenCounter, frame_per_call: bool
) -> Session:
    header = make_header(model="agentload-sim", scenario="benchmark:trace_size", seed=0)
    async with TraceWriter(path, header) as w:
        session = Session(w, corpus, counter)
        session.frame_per_call = frame_per_call
        await session.run(n_calls, 60_000, 400_000)
    return session


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=100, help="orchestrator calls")
    ap.add_argument("--out", type=Path, default=None, help="keep the trace in this folder")
    ap.add_argument(
        "--one-frame", action="store_true", help="let the writer batch frames (1 s interval)"
    )
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.out or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / "trace_size.agentload.jsonl.zst"
        corpus = Corpus()  # outside the timed part: file listing and tokenizer loading
        counter = ChatTokenCounter("o200k_base")
        t0 = time.perf_counter()
        session = asyncio.run(build(path, args.calls, corpus, counter, not args.one_frame))
        write_s = time.perf_counter() - t0
        naive = sum(len(orjson.dumps(m)) for m in session.bodies)
        t0 = time.perf_counter()
        trace = load_trace(path)
        resolved = sum(len(trace.messages(c)) for c in trace.calls.values())
        read_s = time.perf_counter() - t0
        assert trace.truncated is None and len(trace.calls) == session.calls
        trace_bytes = path.stat().st_size
        print(
            f"calls {session.calls} (orchestrator {len(session.orch_tokens)}, "
            f"{len(trace.agents) - 1} sub-agents); orchestrator prompt "
            f"{session.orch_tokens[0]} -> {session.orch_tokens[-1]} tokens; "
            f"{resolved} messages resolved; write {write_s:.2f}s, read {read_s:.2f}s",
            flush=True,
        )
        figures = {
            "naive_bytes": naive,
            "trace_bytes": trace_bytes,
            "ratio": round(trace_bytes / naive, 5),
            "write_mb_s": round(naive / 1e6 / write_s, 1),
            "read_mb_s": round(naive / 1e6 / read_s, 1),
        }
        print(orjson.dumps(figures).decode())


if __name__ == "__main__":
    main()
