"""agentload.wire: the four LLM APIs as they travel on the wire, read into one chat shape.

agentload's trace, replay and simulator think in OpenAI Chat Completions. Agents also speak
OpenAI Responses (Codex, the Agents SDK), Anthropic Messages (Claude Code) and Google's Gemini API
(Gemini CLI). This package reads each of them into the chat shape, one module per API:

* ``apis``      — ``Api`` (``chat``, ``responses``, ``messages``, ``gemini``) and the request
  path of each (a Gemini path also names the model and whether the answer streams)
* ``reply``     — ``WireReply`` (an answer in the chat shape: text, OpenAI-shaped tool calls,
  finish reason in chat's words, usage in chat's keys) and ``StreamReader`` (incremental SSE
  reading: events split across chunks, token-bearing events counted per chunk)
* ``chat``, ``messages``, ``responses``, ``gemini`` — per API: ``to_chat(body)`` (a request
  body → a Chat Completions body; Gemini's ``to_chat(body, path)``: its model and streaming are
  in the path), ``reply_from_json(obj)`` (a non-streamed answer → ``WireReply``) and ``Stream``
  (a ``StreamReader`` for its event stream)
* ``gemini_parts`` — Gemini contents' parts read as chat pieces, for both sides of ``gemini``
* ``responses_items`` — Responses items (a request's input, an answer's output) read as chat
  messages, for both sides of ``responses``

The chat form of an assistant turn is the same whether it is read from the answer
(``reply_from_json`` / ``Stream``) or from the next request's history (``to_chat``): text
joined, tool arguments as the model's own JSON text (Messages: ``orjson.dumps`` of ``input``;
Gemini: of ``args``, and a call sent without an id gets one made of its content, ``call_id``).
The recording proxy (``agentload.record``) relies on it to follow an agent from call to call.

Errors: a body that cannot be read raises ``WireError`` naming the field.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from agentload.wire import chat, gemini, messages, responses
from agentload.wire.apis import (
    API_PATHS,
    UNRECORDED,
    Api,
    Unrecorded,
    api_for_path,
    azure_deployment,
    counts_tokens,
    gemini_target,
    match_path,
    unrecorded_api,
)
from agentload.wire.reply import StreamReader, WireReply

__all__ = [
    "API_PATHS",
    "UNRECORDED",
    "Api",
    "StreamReader",
    "Unrecorded",
    "WireReply",
    "api_for_path",
    "counts_tokens",
    "gemini_target",
    "match_path",
    "reply_from_json",
    "stream_reader",
    "to_chat",
    "unrecorded_api",
]

_MODULES: dict[str, ModuleType] = {
    "chat": chat,
    "messages": messages,
    "responses": responses,
    "gemini": gemini,
}


def to_chat(api: Api, body: dict[str, Any], path: str = "") -> dict[str, Any]:
    """The Chat Completions body a request of ``api`` to ``path`` means (a chat body: a shallow
    copy; ``path`` names a Gemini call's model and streaming, and an Azure deployment, the model
    of a body that names none)."""
    if api == "gemini":
        return gemini.to_chat(body, path)
    out: dict[str, Any] = _MODULES[api].to_chat(body)
    deployment = azure_deployment(path) if "model" not in out else None
    if deployment is not None:
        out["model"] = deployment
    return out


def reply_from_json(api: Api, obj: Any) -> WireReply:
    """A non-streamed answer of ``api``, read into the chat shape."""
    out: WireReply = _MODULES[api].reply_from_json(obj)
    return out


def stream_reader(api: Api) -> StreamReader:
    """A fresh reader of one streamed answer of ``api``."""
    out: StreamReader = _MODULES[api].Stream()
    return out
