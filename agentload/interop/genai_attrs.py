"""An LLM span's GenAI attributes as the chat call they record: its request messages, tools,
model and parameters, its answer and finish reason, its usage; and which spans are calls.

* request messages: ``gen_ai.input.messages`` (the semantic conventions' parts form, read by
  ``genai_parts``), else the flattened ``gen_ai.prompt.N.*`` (OpenLLMetry before the parts form)
  or ``llm.input_messages.N.message.*`` (OpenInference), else OpenInference's raw
  ``input.value``; ``gen_ai.system_instructions`` first as a system message;
* tools: ``gen_ai.tool.definitions``, ``llm.tools.N.tool.json_schema`` or
  ``llm.request.functions.N.*``; model and parameters: ``gen_ai.request.*`` (``llm.model_name``
  and ``llm.invocation_parameters`` for OpenInference);
* the answer: ``gen_ai.output.messages`` (its first message), ``gen_ai.completion.0.*``,
  ``llm.output_messages.0.message.*`` or ``output.value``; its finish reason in chat's words;
* usage: ``gen_ai.usage.input_tokens`` / ``output_tokens`` / ``cache_read.input_tokens`` /
  ``reasoning_tokens`` (or OpenInference's ``llm.token_count.*``) in chat's keys.
"""

from __future__ import annotations

from typing import Any

import orjson

from agentload.interop.content_free import At
from agentload.interop.exchanges import Tally, chat_usage
from agentload.interop.genai_parts import chat_content, chat_messages, chat_tool_call
from agentload.interop.otlp_json import inside

__all__ = [
    "LLM_OPERATIONS",
    "request_body",
    "request_messages",
    "span_answer",
    "span_kind",
    "span_usage",
    "str_attr",
]

LLM_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
"""``gen_ai.operation.name`` values of a model call."""
_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "length": "length",
    "max_tokens": "length",
    "tool_call": "tool_calls",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}
"""Finish reasons in chat's words (the conventions say ``tool_call``, Anthropic ``tool_use``)."""
_PARAMS = (
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "seed",
    "stop",
    "frequency_penalty",
    "presence_penalty",
    "stream",
)
"""Request parameters taken from OpenInference's ``llm.invocation_parameters``."""
_NO_CONTENT = (
    "no request messages (nor gen_ai.prompt.*, llm.input_messages.*, input.value): spans "
    "without content cannot be imported (agentload: export with `trace export otel --content`)"
)


def span_kind(attrs: dict[str, Any]) -> str:
    """What a span is by its attributes: ``llm`` (a model call), ``agent``, ``tool`` or ``""``."""
    op = attrs.get("gen_ai.operation.name")
    oi = attrs.get("openinference.span.kind")
    oi = oi.upper() if isinstance(oi, str) else None
    if op in LLM_OPERATIONS or oi == "LLM":
        return "llm"
    if op is None and oi is None and attrs.get("llm.request.type") in ("chat", "completion"):
        return "llm"
    if op == "invoke_agent" or oi == "AGENT":
        return "agent"
    if op == "execute_tool" or oi == "TOOL":
        return "tool"
    return ""


def str_attr(attrs: dict[str, Any], *keys: str) -> str | None:
    """The first of ``keys`` that holds a non-empty string or an integer, as a string."""
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, (str, int)) and not isinstance(v, bool) and str(v):
            return str(v)
    return None


def _json_attr(value: Any, at: At, fld: str) -> Any:
    """An attribute that holds JSON: a string (as the conventions record it), or a value an
    ``arrayValue`` / ``kvlistValue`` already holds."""
    if not isinstance(value, str):
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        at.fail(fld, f"not JSON: {value!r:.60}")


def _indexed(attrs: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    """Flattened ``PREFIX.N.rest`` keys as one dict per N (by N): ``{rest: value}``."""
    by_n: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if key.startswith(prefix):
            n, _, rest = key[len(prefix) :].partition(".")
            if n.isdigit() and rest:
                by_n.setdefault(int(n), {})[rest] = value
    return [by_n[n] for n in sorted(by_n)]


def _strip(d: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k.removeprefix(prefix): v for k, v in d.items()}


def _flat_message(d: dict[str, Any]) -> dict[str, Any]:
    """One flattened message (OpenLLMetry's ``gen_ai.prompt.N.*``, OpenInference's
    ``llm.input_messages.N.message.*`` less its prefix) as a chat message."""
    role = str(d.get("role") or "user")
    calls = [
        chat_tool_call(
            c.get("id"),
            c.get("name", c.get("function.name")),
            c.get("arguments", c.get("function.arguments")),
        )
        for c in (_strip(c, "tool_call.") for c in _indexed(d, "tool_calls."))
    ]
    content = d.get("content", d.get("user"))
    if content is None:
        items: list[dict[str, Any]] = []
        for c in (_strip(c, "message_content.") for c in _indexed(d, "contents.")):
            if c.get("type", "text") == "text":
                items.append({"type": "text", "text": str(c.get("text") or "")})
            elif c.get("image.image.url"):
                items.append({"type": "image_url", "image_url": {"url": c["image.image.url"]}})
        content = chat_content(items, role == "assistant" and bool(calls))
    elif isinstance(content, str) and content.startswith("[{"):  # OpenLLMetry: parts as JSON
        try:
            parsed = orjson.loads(content)
        except orjson.JSONDecodeError:
            parsed = None
        if isinstance(parsed, list) and all(isinstance(p, dict) and "type" in p for p in parsed):
            content = parsed
    if role == "assistant" and calls and content == "":
        content = None
    msg: dict[str, Any] = {"role": role, "content": content}
    if calls:
        msg["tool_calls"] = calls
    if d.get("tool_call_id") is not None:
        msg["tool_call_id"] = str(d["tool_call_id"])
    if isinstance(d.get("name"), str):
        msg["name"] = d["name"]
    return msg


def _raw_json(attrs: dict[str, Any], key: str) -> dict[str, Any] | None:
    """OpenInference's ``input.value`` / ``output.value`` when it is a JSON object."""
    value = attrs.get(key)
    if not isinstance(value, str) or not value.startswith("{"):
        return None
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _text(value: Any) -> str:
    """System instructions (a string, or a list of parts) as one text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            str(p.get("content", p.get("text", ""))) if isinstance(p, dict) else str(p)
            for p in value
        )
    return "" if value is None else str(value)


def request_messages(attrs: dict[str, Any], at: At) -> list[dict[str, Any]]:
    fld = "gen_ai.input.messages"
    msgs: list[dict[str, Any]] = []
    if attrs.get(fld) is not None:
        value = _json_attr(attrs[fld], at, fld)
        if not isinstance(value, list):
            at.fail(fld, "expected a list of messages")
        for m in value:
            if isinstance(m, dict):
                msgs.extend(chat_messages(m, inside(at, f"{fld}[]")))
            else:
                at.deviate(f"{fld}[]", "not an object, skipped")
    elif flat := _indexed(attrs, "gen_ai.prompt."):
        msgs = [_flat_message(d) for d in flat]
    elif flat := _indexed(attrs, "llm.input_messages."):
        msgs = [_flat_message(_strip(d, "message.")) for d in flat]
    elif (raw := _raw_json(attrs, "input.value")) is not None and isinstance(
        raw.get("messages"), list
    ):
        msgs = [m for m in raw["messages"] if isinstance(m, dict)]
    system = attrs.get("gen_ai.system_instructions")
    if system is not None:
        text = _text(_json_attr(system, at, "gen_ai.system_instructions"))
        if not (msgs and msgs[0].get("role") == "system" and msgs[0].get("content") == text):
            msgs.insert(0, {"role": "system", "content": text})
    if not msgs:
        at.fail(fld, _NO_CONTENT)
    return msgs


def _tool_def(t: Any) -> dict[str, Any] | None:
    if not isinstance(t, dict):
        return None
    if isinstance(t.get("function"), dict):
        return t
    fn = {k: t[k] for k in ("name", "description", "parameters", "strict") if k in t}
    return {"type": str(t.get("type") or "function"), "function": fn}


def _tools(attrs: dict[str, Any], at: At) -> list[dict[str, Any]]:
    raw: list[Any] = []
    if attrs.get("gen_ai.tool.definitions") is not None:
        value = _json_attr(attrs["gen_ai.tool.definitions"], at, "gen_ai.tool.definitions")
        raw = value if isinstance(value, list) else []
    elif flat := _indexed(attrs, "llm.tools."):
        for d in flat:
            schema = d.get("tool.json_schema")
            raw.append(_json_attr(schema, at, "llm.tools[].tool.json_schema"))
    elif flat := _indexed(attrs, "llm.request.functions."):
        for d in flat:
            params = d.get("parameters")
            if isinstance(params, str):
                params = _json_attr(params, at, "llm.request.functions[].parameters")
            fn = {"name": d.get("name"), "description": d.get("description")}
            raw.append({**{k: v for k, v in fn.items() if v is not None}, "parameters": params})
    return [t for t in map(_tool_def, raw) if t is not None]


def span_answer(attrs: dict[str, Any], at: At) -> tuple[dict[str, Any] | None, str | None]:
    """The assistant's answer (chat shape) and its finish reason, as the span gives them."""
    fld = "gen_ai.output.messages"
    msg: dict[str, Any] | None = None
    finish: Any = None
    if attrs.get(fld) is not None:
        value = _json_attr(attrs[fld], at, fld)
        first = (
            next((m for m in value if isinstance(m, dict)), None)
            if isinstance(value, list)
            else None
        )
        if first is not None:
            finish = first.get("finish_reason")
            got = [
                m for m in chat_messages({**first, "role": "assistant"}, at) if m["role"] != "tool"
            ]
            msg = got[0] if got else None
    elif flat := _indexed(attrs, "gen_ai.completion."):
        finish = flat[0].get("finish_reason")
        msg = _flat_message({**flat[0], "role": "assistant"})
    elif flat := _indexed(attrs, "llm.output_messages."):
        msg = _flat_message({**_strip(flat[0], "message."), "role": "assistant"})
    elif (raw := _raw_json(attrs, "output.value")) is not None and isinstance(
        raw.get("choices"), list
    ):
        ch = next((c for c in raw["choices"] if isinstance(c, dict)), {})
        if isinstance(ch.get("message"), dict):
            msg, finish = dict(ch["message"]), ch.get("finish_reason")
    if finish is None:
        reasons = attrs.get("gen_ai.response.finish_reasons")
        finish = reasons[0] if isinstance(reasons, list) and reasons else reasons
        finish = finish if finish is not None else attrs.get("llm.finish_reason")
    if msg is not None:
        content = msg.get("content")
        if isinstance(content, list):  # chat's answer is one text
            msg["content"] = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        msg["role"] = "assistant"
    return msg, _FINISH.get(finish) if isinstance(finish, str) else None


def _int_attr(attrs: dict[str, Any], *keys: str) -> int | None:
    for k in keys:
        v = attrs.get(k)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
        if isinstance(v, float) and v.is_integer() and v >= 0:
            return int(v)
    return None


def span_usage(attrs: dict[str, Any]) -> dict[str, Any] | None:
    prompt = _int_attr(
        attrs, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens", "llm.token_count.prompt"
    )
    completion = _int_attr(
        attrs,
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.completion_tokens",
        "llm.token_count.completion",
    )
    cached = _int_attr(
        attrs,
        "gen_ai.usage.cache_read.input_tokens",
        "gen_ai.usage.cache_read_input_tokens",
        "llm.token_count.prompt_details.cache_read",
    )
    reasoning = _int_attr(
        attrs, "gen_ai.usage.reasoning_tokens", "llm.token_count.completion_details.reasoning"
    )
    usage = chat_usage(prompt, completion, cached)
    if usage is not None and reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return usage


def request_body(
    attrs: dict[str, Any], messages: list[dict[str, Any]], at: At, tally: Tally
) -> dict[str, Any]:
    params = _raw_json(attrs, "llm.invocation_parameters") or {}
    model = str_attr(
        {**attrs, "params.model": params.get("model")},
        "gen_ai.request.model",
        "params.model",
        "llm.model_name",
        "gen_ai.response.model",
    )
    if model is None:
        model = "unknown"
        tally.derived["model"] = "not in a span (gen_ai.request.model, llm.model_name): unknown"
    body: dict[str, Any] = {"model": model, "messages": messages}
    tools = _tools(attrs, at)
    if tools:
        body["tools"] = tools
    for k in _PARAMS:
        if params.get(k) is not None:
            body[k] = params[k]
    for k in (
        "max_tokens",
        "temperature",
        "top_p",
        "seed",
        "frequency_penalty",
        "presence_penalty",
    ):
        v = attrs.get(f"gen_ai.request.{k}")
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            body[k] = v
    stream = attrs.get("gen_ai.request.stream", attrs.get("gen_ai.is_streaming"))
    if isinstance(stream, bool):
        body["stream"] = stream
    return body
