"""OpenAI Chat Completions: already the chat shape; its answers read into ``WireReply``."""

from __future__ import annotations

from typing import Any

from agentload.wire.reply import (
    StreamReader,
    WireReply,
    error_text,
    event_object,
    need,
    str_or_none,
)

__all__ = ["Stream", "reply_from_json", "to_chat"]


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """A chat body is its own chat form (``messages`` checked to be a list)."""
    need(body, "messages", list, "body")
    return dict(body)


def _usage(obj: dict[str, Any]) -> dict[str, Any] | None:
    u = obj.get("usage")
    return dict(u) if isinstance(u, dict) else None


def reply_from_json(obj: Any) -> WireReply:
    """A ``chat.completion`` object (or an ``{"error": ...}`` body)."""
    if isinstance(obj, dict) and "error" in obj and "choices" not in obj:
        return WireReply(error=error_text(obj["error"]))
    choices = need(obj, "choices", list, "body")
    out = WireReply(usage=_usage(obj), response_id=str_or_none(obj.get("id")))
    if not choices:
        return out
    ch = choices[0]
    msg = need(ch, "message", dict, "choices[0]")
    content = msg.get("content")
    out.content = content if isinstance(content, str) else None
    out.tool_calls = [
        _tool_call(tc, f"choices[0].message.tool_calls[{i}]")
        for i, tc in enumerate(msg.get("tool_calls") or ())
    ]
    out.finish_reason = str_or_none(ch.get("finish_reason"))
    return out


def _tool_call(tc: Any, where: str) -> dict[str, Any]:
    fn = need(tc, "function", dict, where)
    return {
        "id": str(tc.get("id") or ""),
        "type": "function",
        "function": {
            "name": str(fn.get("name") or ""),
            "arguments": str(fn.get("arguments") or ""),
        },
    }


class Stream(StreamReader):
    """``chat.completion.chunk`` events, ``data: [DONE]`` last."""

    def __init__(self) -> None:
        super().__init__()
        self._text: list[str] = []
        self._calls: dict[int, dict[str, Any]] = {}

    def event(self, name: str | None, data: bytes) -> bool:
        if data == b"[DONE]":
            self.done = True
            return False
        obj = event_object(name, data)
        if "error" in obj and "choices" not in obj:
            self.out.error = error_text(obj["error"])
            return False
        if self.out.response_id is None:
            self.out.response_id = str_or_none(obj.get("id"))
        if isinstance(obj.get("usage"), dict):
            self.out.usage = dict(obj["usage"])
        carried = False
        for ch in obj.get("choices") or ():
            if not isinstance(ch, dict):
                continue
            delta = ch.get("delta") or {}
            text = delta.get("content") if isinstance(delta, dict) else None
            if isinstance(text, str) and text:
                self._text.append(text)
                carried = True
            for tc in (delta.get("tool_calls") or ()) if isinstance(delta, dict) else ():
                carried = self._tool_delta(tc) or carried
            if ch.get("finish_reason"):
                self.out.finish_reason = str(ch["finish_reason"])
        return carried

    def _tool_delta(self, tc: Any) -> bool:
        if not isinstance(tc, dict):
            return False
        idx = tc.get("index", len(self._calls))
        call = self._calls.setdefault(
            int(idx), {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        )
        if tc.get("id"):
            call["id"] = str(tc["id"])
        fn = tc.get("function") or {}
        carried = False
        if fn.get("name"):
            call["function"]["name"] += str(fn["name"])
            carried = True
        if fn.get("arguments"):
            call["function"]["arguments"] += str(fn["arguments"])
            carried = True
        return carried

    def reply(self) -> WireReply:
        self.out.content = "".join(self._text) if self._text else None
        self.out.tool_calls = [self._calls[k] for k in sorted(self._calls)]
        return self.out
