"""agentload.wire: the three LLM APIs as they travel on the wire, read into one chat shape.

agentload's trace, replay and simulator think in OpenAI Chat Completions. Agents also speak
OpenAI Responses (Codex, the Agents SDK) and Anthropic Messages (Claude Code). This package reads
each of them into the chat shape, one module per API:

* ``apis``      — ``Api`` (``chat``, ``responses``, ``messages``) and the request path of each
* ``reply``     — ``WireReply`` (an answer in the chat shape: text, OpenAI-shaped tool calls,
  finish reason in chat's words, usage in chat's keys) and ``StreamReader`` (incremental SSE
  reading: events split across chunks, token-bearing events counted per chunk)
* ``chat``, ``messages``, ``responses`` — per API: ``to_chat(body)`` (a request body → a Chat
  Completions body), ``reply_from_json(obj)`` (a non-streamed answer → ``WireReply``) and
  ``Stream`` (a ``StreamReader`` for its event stream)
* ``responses_items`` — Responses items (a request's input, an answer's output) read as chat
  messages, for both sides of ``responses``

The chat form of an assistant turn is the same whether it is read from the answer
(``reply_from_json`` / ``Stream``) or from the next request's history (``to_chat``): text
joined, tool arguments as the model's own JSON text (Messages: ``orjson.dumps`` of ``input``).
The recording proxy (``agentload.record``) relies on it to follow an agent from call to call.

Errors: a body that cannot be read raises ``WireError`` naming the field.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from agentload.wire import chat, messages, responses
from agentload.wire.apis import API_PATHS, Api, api_for_path
from agentload.wire.reply import StreamReader, WireReply

__all__ = [
    "API_PATHS",
    "Api",
    "StreamReader",
    "WireReply",
    "api_for_path",
    "reply_from_json",
    "stream_reader",
    "to_chat",
]

_MODULES: dict[str, ModuleType] = {"chat": chat, "messages": messages, "responses": responses}


def to_chat(api: Api, body: dict[str, Any]) -> dict[str, Any]:
    """The Chat Completions body a request of ``api`` means (a chat body: a shallow copy)."""
    out: dict[str, Any] = _MODULES[api].to_chat(body)
    return out


def reply_from_json(api: Api, obj: Any) -> WireReply:
    """A non-streamed answer of ``api``, read into the chat shape."""
    out: WireReply = _MODULES[api].reply_from_json(obj)
    return out


def stream_reader(api: Api) -> StreamReader:
    """A fresh reader of one streamed answer of ``api``."""
    out: StreamReader = _MODULES[api].Stream()
    return out
