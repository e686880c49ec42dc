"""Google's Gemini API (``…/models/{model}:generateContent``) read into the chat shape.

The model and whether the answer streams are in the request's path, not in its body
(``/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse``): ``to_chat(body, path)``
reads them there (``apis.gemini_target``): ``model`` is the path's model, and a
``:streamGenerateContent`` call is ``stream: true`` (and asks for usage,
``stream_options.include_usage``). Every field is read under its camelCase name or its
snake_case one (the API takes both: ``systemInstruction``, ``system_instruction``).

* ``systemInstruction`` (a content, or a string) → one leading ``system`` message, its parts'
  text joined with ``"\\n\\n"``;
* ``contents[]``, by ``role`` (missing: ``user``): a ``model`` turn →
  ``agentload.trace.capture.assistant_message``: each ``functionCall {name, args, id}`` a tool
  call whose arguments are ``orjson.dumps(args)``, every other part's text joined with ``""``;
  a turn of any other role → one ``tool`` message per ``functionResponse {name, response,
  id}`` (content: a response of one string field is that string, any other its JSON), then one
  ``user`` message of its other parts joined with ``"\\n\\n"``, when there is any;
* a part: ``text`` its text; ``inlineData``/``fileData`` the placeholder of its MIME type
  (``[image]``, ``[audio]``, ``[video]``, else ``[document]``: ``wire.reply.placeholder``);
  any other data its placeholder (``executableCode`` → ``[executable_code]``); a part with
  ``thought: true`` is dropped, and so is one that carries only metadata
  (``thoughtSignature``...);
* tool-call ids: a ``functionCall`` without an ``id`` (the API often sends none) gets
  ``call_id(name, args, position)``: ``gc-`` and a hash of its name, its arguments and its
  place among the turn's calls, the same whether read from the answer or from the next
  request's history; a ``functionResponse`` without an ``id``, or with one that no call of
  the model turn before it has, answers the first call of that name in that turn that no
  response answered yet (Gemini CLI's sub-agents carry an id-less call back as it came and
  answer it with an id of their own);
* ``tools[].functionDeclarations[]`` → function tools (``parametersJsonSchema`` as it is, else
  ``parameters`` with its OpenAPI type names in lower case); hosted tools (``googleSearch``,
  ``codeExecution``, ``urlContext``...) have no chat form; ``toolConfig.functionCallingConfig
  .mode`` ``AUTO``/``VALIDATED``/``ANY``/``NONE`` → ``auto``/``auto``/``required`` (a function
  when ``allowedFunctionNames`` names one)/``none``;
* ``generationConfig``: ``maxOutputTokens`` → ``max_tokens``, ``temperature``, ``topP`` →
  ``top_p``, ``stopSequences`` → ``stop``, ``candidateCount`` → ``n``, ``seed``,
  ``presencePenalty``/``frequencyPenalty``, ``responseMimeType: application/json`` →
  ``response_format`` (its schema when it has one); the engines' length fields
  (``apis.ENGINE_FIELDS``) carry over; other keys (``topK``, ``thinkingConfig``,
  ``safetySettings``, ``cachedContent``...) are kept only in the body as sent.

Parts are read by ``gemini_parts``, for a request's history and an answer alike.

A body broken in shape (``contents`` not a list, a content whose ``parts`` is not a list, a
part that is not an object, a text that is not a string, a call without its string ``name``)
raises ``ShapeError`` (a ``WireError``) naming the field.

Answers (a ``GenerateContentResponse``, a JSON array of them, or their SSE events, each a
partial candidate: text parts concatenate, function calls come whole) read the first
candidate's parts as a model turn of a history reads, so the assistant message is the same
either way; ``finishReason`` ``STOP`` → ``stop`` (``tool_calls`` when the answer has a
function call), ``MAX_TOKENS`` → ``length``, the safety reasons → ``content_filter``, another
as it came; ``usageMetadata`` in chat's keys (``prompt_tokens`` = ``promptTokenCount`` +
``toolUsePromptTokenCount``, ``completion_tokens`` = ``candidatesTokenCount`` +
``thoughtsTokenCount``, ``cached_tokens`` = ``cachedContentTokenCount``).
"""

from __future__ import annotations

from typing import Any

from agentload.wire.apis import ENGINE_FIELDS, gemini_target
from agentload.wire.gemini_parts import (
    call_id,
    field,
    is_thought,
    model_turn,
    part_text,
    read_call,
    tool_result,
)
from agentload.wire.reply import (
    ShapeError,
    StreamReader,
    WireReply,
    error_text,
    event_object,
    need,
)

__all__ = ["Stream", "call_id", "chat_usage", "reply_from_json", "to_chat"]

_CONFIG = {
    "maxOutputTokens": "max_tokens",
    "temperature": "temperature",
    "topP": "top_p",
    "candidateCount": "n",
    "seed": "seed",
    "presencePenalty": "presence_penalty",
    "frequencyPenalty": "frequency_penalty",
}
_MODES = {"AUTO": "auto", "VALIDATED": "auto", "ANY": "required", "NONE": "none"}
_FILTERED = ("SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY")
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"} | dict.fromkeys(_FILTERED, "content_filter")


# -- requests --------------------------------------------------------------------------------
def to_chat(body: dict[str, Any], path: str = "") -> dict[str, Any]:
    """The Chat Completions body a Gemini request to ``path`` means (see the module
    docstring); ``WireError`` naming the field for one that cannot be read."""
    if not isinstance(body, dict):
        raise ShapeError("body", ("an object",), body)
    out: dict[str, Any] = {}
    target = gemini_target(path)
    if target is not None:
        out["model"] = target[0]
    messages: list[dict[str, Any]] = []
    system = field(body, "systemInstruction")
    if system is not None:
        messages.append({"role": "system", "content": _system(system)})
    messages.extend(_turns(need(body, "contents", list, "body")))
    out["messages"] = messages
    if target is not None and target[1] == "streamGenerateContent":
        out["stream"] = True
        out["stream_options"] = {"include_usage": True}
    _generation(body, out)
    tools = body.get("tools")
    if tools is not None:
        out["tools"] = _tools(tools)
    config = field(body, "toolConfig")
    if isinstance(config, dict):
        _tool_choice(config, out)
    for key in ENGINE_FIELDS:
        if key in body:
            out[key] = body[key]
    return out


def _system(system: Any) -> str:
    if isinstance(system, str):
        return system
    parts = need(system, "parts", list, "systemInstruction")
    texts = (part_text(p, f"systemInstruction.parts[{j}]") for j, p in enumerate(parts))
    return "\n\n".join(t for t in texts if t)


def _turns(turns: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []  # the last model turn's (a response without id answers one)
    for i, turn in enumerate(turns):
        where = f"contents[{i}]"
        parts = need(turn, "parts", list, where)
        role = turn.get("role") or "user"
        if not isinstance(role, str):
            raise ShapeError(f"{where}.role", ("str",), role)
        if role == "model":
            msg = model_turn(parts, f"{where}.parts")
            calls = msg.get("tool_calls", [])
            out.append(msg)
        else:
            out.extend(_user_turn(parts, f"{where}.parts", calls))
            calls = []
    return out


def _user_turn(parts: list[Any], where: str, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    open_ids = [(c["function"]["name"], c["id"]) for c in calls]
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for j, p in enumerate(parts):
        w = f"{where}[{j}]"
        if is_thought(p, w):
            continue
        fr = field(p, "functionResponse")
        if fr is not None:
            out.append(tool_result(fr, f"{w}.functionResponse", open_ids))
        elif text := part_text(p, w):
            texts.append(text)
    if texts:
        out.append({"role": "user", "content": "\n\n".join(texts)})
    return out


def _schema(node: Any) -> Any:
    """An OpenAPI schema (``parameters``: ``"type": "OBJECT"``) as JSON Schema (lower case)."""
    if isinstance(node, dict):
        return {
            k: v.lower() if k == "type" and isinstance(v, str) else _schema(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_schema(v) for v in node]
    return node


def _tools(tools: Any) -> list[dict[str, Any]]:
    if not isinstance(tools, list):
        raise ShapeError("body.tools", ("list",), tools)
    out: list[dict[str, Any]] = []
    for i, t in enumerate(tools):
        if not isinstance(t, dict):
            raise ShapeError(f"tools[{i}]", ("an object",), t)
        decls = field(t, "functionDeclarations")
        if decls is None:
            continue  # a hosted tool (googleSearch, codeExecution...): no call is offered to it
        if not isinstance(decls, list):
            raise ShapeError(f"tools[{i}].functionDeclarations", ("list",), decls)
        out.extend(
            _function(d, f"tools[{i}].functionDeclarations[{j}]") for j, d in enumerate(decls)
        )
    return out


def _function(d: Any, where: str) -> dict[str, Any]:
    fn: dict[str, Any] = {"name": need(d, "name", str, where)}
    if isinstance(d.get("description"), str):
        fn["description"] = d["description"]
    schema = field(d, "parametersJsonSchema")
    if not isinstance(schema, dict):
        given = d.get("parameters")
        schema = _schema(given) if isinstance(given, dict) else {"type": "object", "properties": {}}
    fn["parameters"] = schema
    return {"type": "function", "function": fn}


def _tool_choice(config: dict[str, Any], out: dict[str, Any]) -> None:
    fcc = field(config, "functionCallingConfig")
    if not isinstance(fcc, dict):
        return
    mode, names = fcc.get("mode"), field(fcc, "allowedFunctionNames")
    if mode == "ANY" and isinstance(names, list) and len(names) == 1:
        out["tool_choice"] = {"type": "function", "function": {"name": str(names[0])}}
    elif mode in _MODES:
        out["tool_choice"] = _MODES[mode]


def _generation(body: dict[str, Any], out: dict[str, Any]) -> None:
    cfg = field(body, "generationConfig")
    if cfg is None:
        return
    if not isinstance(cfg, dict):
        raise ShapeError("body.generationConfig", ("an object",), cfg)
    for key, chat_key in _CONFIG.items():
        v = field(cfg, key)
        if v is not None:
            out[chat_key] = v
    stops = field(cfg, "stopSequences")
    if stops is not None:
        if not isinstance(stops, list):
            raise ShapeError("generationConfig.stopSequences", ("list",), stops)
        out["stop"] = stops
    if field(cfg, "responseMimeType") == "application/json":
        schema = field(cfg, "responseJsonSchema") or field(cfg, "responseSchema")
        out["response_format"] = (
            {"type": "json_schema", "json_schema": {"name": "response", "schema": schema}}
            if isinstance(schema, dict)
            else {"type": "json_object"}
        )


# -- answers ---------------------------------------------------------------------------------
def _n(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def chat_usage(u: dict[str, Any]) -> dict[str, Any]:
    """``usageMetadata`` in chat's keys (see the module docstring); missing counts are 0."""
    prompt = _n(field(u, "promptTokenCount")) + _n(field(u, "toolUsePromptTokenCount"))
    thoughts = _n(field(u, "thoughtsTokenCount"))
    completion = _n(field(u, "candidatesTokenCount")) + thoughts
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": _n(field(u, "cachedContentTokenCount"))},
    }
    if thoughts:
        out["completion_tokens_details"] = {"reasoning_tokens": thoughts}
    return out


def reply_from_json(obj: Any) -> WireReply:
    """A ``GenerateContentResponse`` (or a JSON array of them: ``:streamGenerateContent``
    without ``alt=sse``; or an ``{"error": ...}`` body)."""
    reader = Stream()
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            reader.take(item, f"[{i}]")
    else:
        reader.take(obj, "body")
    return reader.reply()


class Stream(StreamReader):
    """SSE events (``alt=sse``), each a ``data:`` line of one ``GenerateContentResponse``; the
    answer ends with the event that carries the ``finishReason`` (or a ``promptFeedback``
    ``blockReason``). Output-bearing: an event with a non-empty text (a thought's included:
    thinking is not content) or a function call."""

    def __init__(self) -> None:
        super().__init__()
        self._texts: list[str] = []
        self._calls: list[dict[str, Any]] = []
        self._reason: str | None = None

    def event(self, name: str | None, data: bytes) -> bool:
        return self.take(event_object(name, data), "stream event")

    def take(self, obj: Any, where: str) -> bool:
        """Read one response object (``where`` names it in an error); whether it carried
        output."""
        if not isinstance(obj, dict):
            raise ShapeError(where, ("an object",), obj)
        if "error" in obj and "candidates" not in obj:
            self.out.error = error_text(obj["error"])
            return False
        rid = field(obj, "responseId")
        if isinstance(rid, str):
            self.out.response_id = rid
        usage = field(obj, "usageMetadata")
        if isinstance(usage, dict):
            self.out.usage = chat_usage(usage)
        feedback = field(obj, "promptFeedback")
        if isinstance(feedback, dict) and field(feedback, "blockReason"):
            self._reason, self.done = "SAFETY", True
        candidates = obj.get("candidates")
        if candidates is None:
            return False
        if not isinstance(candidates, list):
            raise ShapeError(f"{where}.candidates", ("list",), candidates)
        carried = False
        for i, c in enumerate(candidates):
            if isinstance(c, dict) and c.get("index", 0) == 0:
                carried = self._candidate(c, f"{where}.candidates[{i}]") or carried
        return carried

    def _candidate(self, c: dict[str, Any], where: str) -> bool:
        reason = field(c, "finishReason")
        if isinstance(reason, str):
            self._reason, self.done = reason, True
        content = c.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        if not isinstance(parts, list):
            return False
        carried = False
        for j, p in enumerate(parts):
            w = f"{where}.content.parts[{j}]"
            if is_thought(p, w):
                carried = carried or bool(p.get("text"))
                continue
            fc = field(p, "functionCall")
            if fc is not None:
                self._calls.append(read_call(fc, len(self._calls), f"{w}.functionCall"))
                carried = True
            elif text := part_text(p, w):
                self._texts.append(text)
                carried = True
        return carried

    def reply(self) -> WireReply:
        self.out.content = "".join(self._texts) or None
        self.out.tool_calls = list(self._calls)
        reason = self._reason
        if reason is not None:
            calls = bool(self._calls) and reason == "STOP"
            self.out.finish_reason = "tool_calls" if calls else _FINISH.get(reason, reason)
        return self.out
