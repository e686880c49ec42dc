"""The traffic that made the samples of this folder (README.md): a small multi-agent run sent to
a real Dynamo frontend whose request trace is on, with harness tool events published on its ZMQ
tool-event ingress. Run with the Dynamo venv's python (pyzmq, msgspec):

    python make_samples.py URL MODEL tcp://127.0.0.1:PORT

Session ``s1`` (the root) sends three turns, each prompt the one before plus the answer and a
tool result: between its first two a tool runs (``call_1``, ``bash``); after its second its
``task`` tool (``call_2``) runs the sub-agent ``s1-sub`` (``X-Dynamo-Parent-Session-ID: s1``),
whose two turns are separated by a tool that fails (``call_1`` again: ids are unique per
session); its third turn follows the task's end and is marked final. ``s2`` is a second root
session of one call, and one call carries no session header (Dynamo's compact replay row).
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from typing import Any

import msgspec
import zmq

SCHEMA = "dynamo.request.trace.v1"
WORDS = (
    "def parse(tokens): the parser reads each token and returns a tree of nodes for the "
    "compiler; every node keeps its line number and the names it binds. "
)


def chat(url: str, model: str, messages: list[dict[str, Any]], out: int,
         headers: dict[str, str]) -> str:  # fmt: skip
    """One streamed chat completion; returns the answer's text."""
    body = {"model": model, "messages": messages, "max_tokens": out, "stream": True}
    req = urllib.request.Request(
        url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **headers},
    )
    text = []
    with urllib.request.urlopen(req, timeout=60) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: ") and line != "data: [DONE]":
                for choice in json.loads(line[6:]).get("choices", []):
                    text.append(choice.get("delta", {}).get("content") or "")
    return "".join(text)


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def called(text: str, call_id: str, name: str) -> list[dict[str, Any]]:
    """The assistant's answer ``text`` as a turn that called tool ``name``."""
    fn = {"name": name, "arguments": "{}"}
    return [{"role": "assistant", "content": text,
             "tool_calls": [{"id": call_id, "type": "function", "function": fn}]}]  # fmt: skip


def result(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def now_ms() -> int:
    return int(time.time() * 1000)


class Tools:
    """Harness tool events, pushed to Dynamo's tool-event ingress."""

    def __init__(self, endpoint: str) -> None:
        self.sock = zmq.Context.instance().socket(zmq.PUSH)
        self.sock.connect(endpoint)
        self.seq = 0
        time.sleep(0.3)

    def send(self, event: str, sid: str, tool: dict[str, object], parent: str | None) -> None:
        rec: dict[str, object] = {
            "schema": SCHEMA,
            "event_type": event,
            "event_time_unix_ms": now_ms(),
            "session_id": sid,
            "tool": tool,
        }
        if parent is not None:
            rec["parent_session_id"] = parent
        self.seq += 1
        frames = [b"agent-tool-events", self.seq.to_bytes(8, "big"), msgspec.msgpack.encode(rec)]
        self.sock.send_multipart(frames)

    def run(self, sid: str, call_id: str, cls: str, ms: int, parent: str | None = None,
            error: str | None = None) -> None:  # fmt: skip
        start = now_ms()
        self.send("tool_start", sid, {"tool_call_id": call_id, "tool_class": cls,
                                      "status": "running", "started_at_unix_ms": start}, parent)  # fmt: skip
        time.sleep(ms / 1000)
        end = now_ms()
        tool: dict[str, object] = {
            "tool_call_id": call_id,
            "tool_class": cls,
            "status": "error" if error else "succeeded",
            "started_at_unix_ms": start,
            "ended_at_unix_ms": end,
            "duration_ms": float(end - start),
            "output_bytes": 0 if error else 512,
        }
        if error:
            tool["error_type"] = error
        self.send("tool_error" if error else "tool_end", sid, tool, parent)


def main(url: str, model: str, endpoint: str) -> None:
    tools = Tools(endpoint)
    root = {"X-Dynamo-Session-ID": "s1"}
    sub = {"X-Dynamo-Session-ID": "s1-sub", "X-Dynamo-Parent-Session-ID": "s1"}
    h1 = [user("Refactor the parser. " + WORDS * 6)]
    a1 = chat(url, model, h1, 16, {**root, "x-request-id": "s1-turn-1"})
    tools.run("s1", "call_1", "bash", 300)
    time.sleep(0.1)
    h2 = [*h1, *called(a1, "call_1", "bash"), result("call_1", "3 files changed. " + WORDS * 2)]
    a2 = chat(url, model, h2, 24, {**root, "x-request-id": "s1-turn-2"})
    # the root's task tool runs the sub-agent
    tools.send("tool_start", "s1", {"tool_call_id": "call_2", "tool_class": "task",
                                    "status": "running", "started_at_unix_ms": now_ms()}, None)  # fmt: skip
    task_start = now_ms()
    time.sleep(0.2)
    g1 = [user("Find every caller of parse(). " + WORDS * 3)]
    b1 = chat(url, model, g1, 12, sub)
    tools.run("s1-sub", "call_1", "grep", 200, parent="s1", error="timeout")
    g2 = [*g1, *called(b1, "call_1", "grep"), result("call_1", "error: timeout. " + WORDS)]
    b2 = chat(url, model, g2, 8, sub)
    time.sleep(0.1)
    end = now_ms()
    tools.send("tool_end", "s1", {"tool_call_id": "call_2", "tool_class": "task",
                                  "status": "succeeded", "started_at_unix_ms": task_start,
                                  "ended_at_unix_ms": end,
                                  "duration_ms": float(end - task_start)}, None)  # fmt: skip
    time.sleep(0.05)
    h3 = [*h2, *called(a2, "call_2", "task"), result("call_2", b2 + WORDS)]
    chat(url, model, h3, 10, {**root, "X-Dynamo-Session-Final": "true"})
    chat(url, model, [user("Summarize the build log. " + WORDS * 2)], 6,
         {"X-Dynamo-Session-ID": "s2"})  # fmt: skip
    chat(url, model, [user("Say hello. " + WORDS)], 4, {})


if __name__ == "__main__":
    main(*sys.argv[1:4])
