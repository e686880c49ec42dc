"""Validation of ``POST /v1/chat/completions`` and ``/v1/completions`` bodies; OpenAI errors.

Every problem with a request becomes an ``APIError`` with an HTTP status and OpenAI's error JSON
(``{"error": {"message", "type", "param", "code"}}``); nothing a client sends can cause a 500.
Unknown fields (vLLM extras such as ``top_k``, ``repetition_penalty``) are accepted and ignored,
and so are content parts of any type; ``custom`` (freeform) tools are accepted and offered no
call (``callable_tools``), a tool of another type is refused as OpenAI words it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from agentload.wire.reply import ShapeError

__all__ = [
    "APIError",
    "ChatRequest",
    "CompletionRequest",
    "body_and_model",
    "callable_tools",
    "chat_request_from",
    "error_body",
    "openai_shape_error",
    "parse_chat_request",
    "parse_completion_request",
]

_ROLES = ("system", "developer", "user", "assistant", "tool", "function")


class APIError(Exception):
    """A client error to send back in OpenAI's error shape."""

    def __init__(
        self, status: int, message: str, param: str | None = None, code: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> bytes:
        return error_body(self.status, self.message, self.param, self.code)


def error_body(status: int, message: str, param: str | None, code: str | None) -> bytes:
    kind = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        404: "invalid_request_error",
    }.get(status, "server_error")
    return orjson.dumps(
        {"error": {"message": message, "type": kind, "param": param, "code": code or status}}
    )


@dataclass
class ChatRequest:
    """A validated chat-completions request."""

    model: str
    messages: list[dict[str, Any]]
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    min_tokens: int = 0
    ignore_eos: bool = False
    seed: int | None = None
    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    stop: list[str] = field(default_factory=list)


def _bad(param: str, message: str) -> APIError:
    return APIError(400, f"{param}: {message}", param=param, code="invalid_value")


def _type(value: Any, types: type | tuple[type, ...], param: str, what: str) -> Any:
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise _bad(param, f"expected {what}, got a boolean")
    if not isinstance(value, types):
        raise _bad(param, f"expected {what}, got {type(value).__name__}")
    return value


def _opt_int(body: dict[str, Any], key: str, minimum: int) -> int | None:
    v = body.get(key)
    if v is None:
        return None
    _type(v, int, key, "an integer")
    if v < minimum:
        raise _bad(key, f"must be >= {minimum}, got {v}")
    return int(v)


def _opt_num(body: dict[str, Any], key: str, lo: float, hi: float) -> None:
    v = body.get(key)
    if v is None:
        return
    _type(v, (int, float), key, "a number")
    if not lo <= v <= hi:
        raise _bad(key, f"must be between {lo} and {hi}, got {v}")


def _messages(value: Any) -> list[dict[str, Any]]:
    if value is None:
        raise APIError(400, "messages: field required", param="messages", code="missing_field")
    _type(value, list, "messages", "an array of messages")
    if not value:
        raise _bad("messages", "must contain at least one message")
    for i, m in enumerate(value):
        p = f"messages[{i}]"
        _type(m, dict, p, "an object")
        role = m.get("role")
        if role is None:
            raise APIError(
                400, f"{p}.role: field required", param=f"{p}.role", code="missing_field"
            )
        _type(role, str, f"{p}.role", "a string")
        if role not in _ROLES:
            raise _bad(f"{p}.role", f"unknown role {role!r}; expected one of {', '.join(_ROLES)}")
        content = m.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise _bad(
                f"{p}.content", f"expected a string or an array, got {type(content).__name__}"
            )
        calls = m.get("tool_calls")
        if calls is not None:
            _type(calls, list, f"{p}.tool_calls", "an array")
            for j, c in enumerate(calls):
                q = f"{p}.tool_calls[{j}]"
                _type(c, dict, q, "an object")
                fn = c.get("function")
                _type(fn, dict, f"{q}.function", "an object")
                _type(fn.get("name"), str, f"{q}.function.name", "a string")
                args = fn.get("arguments")
                if args is not None:
                    _type(args, str, f"{q}.function.arguments", "a JSON string")
    out: list[dict[str, Any]] = value
    return out


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    _type(value, list, "tools", "an array")
    for i, t in enumerate(value):
        p = f"tools[{i}]"
        _type(t, dict, p, "an object")
        kind = t.get("type", "function")
        if kind == "custom":
            continue  # a freeform tool: in the prompt, but no call is offered to it
        if kind != "function":
            raise APIError(
                400,
                f"Invalid value: {kind!r}. Supported values are: 'function' and 'custom'.",
                f"{p}.type",
                "invalid_value",
            )
        fn = t.get("function")
        if fn is None:
            raise APIError(400, f"{p}.function: field required", f"{p}.function", "missing_field")
        _type(fn, dict, f"{p}.function", "an object")
        _type(fn.get("name"), str, f"{p}.function.name", "a string")
        params = fn.get("parameters")
        if params is not None:
            _type(params, dict, f"{p}.function.parameters", "a JSON schema object")
            props = params.get("properties")
            if props is not None:
                _type(props, dict, f"{p}.function.parameters.properties", "an object")
    tools: list[dict[str, Any]] = value
    return tools


def callable_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The function tools of a validated tools list: those the simulated model may call."""
    return [t for t in tools if t.get("type", "function") == "function"]


def _tool_choice(value: Any, tools: list[dict[str, Any]]) -> str | dict[str, Any]:
    tools = callable_tools(tools)
    if value is None:
        return "auto" if tools else "none"
    names = [t["function"]["name"] for t in tools]
    if isinstance(value, str):
        if value not in ("auto", "none", "required"):
            raise _bad("tool_choice", f"expected auto, none, required or a function, got {value!r}")
        if value == "required" and not tools:
            raise _bad("tool_choice", "'required' needs a non-empty tools list")
        return value
    _type(value, dict, "tool_choice", "a string or an object")
    fn = value.get("function")
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise _bad("tool_choice.function.name", "field required")
    if name not in names:
        raise _bad("tool_choice.function.name", f"{name!r} is not one of the offered tools")
    choice: dict[str, Any] = value
    return choice


_OPENAI_TYPES = {
    "int": "an integer",
    "float": "a decimal",
    "str": "a string",
    "bool": "a boolean",
    "list": "an array",
    "dict": "an object",
}


def openai_shape_error(exc: ShapeError) -> APIError:
    """A body broken in shape, in OpenAI's words (``Missing required parameter: 'x'.``, code
    ``missing_required_parameter``; ``Invalid type for 'x': expected ..., but got ...
    instead.``, code ``invalid_type``); ``param`` the field."""
    param = exc.field.removeprefix("body.")
    if exc.got == "NoneType":
        return APIError(
            400, f"Missing required parameter: '{param}'.", param, "missing_required_parameter"
        )
    expected = " or ".join(_OPENAI_TYPES.get(e, e) for e in exc.expected)
    got = _OPENAI_TYPES.get(exc.got, exc.got)
    message = f"Invalid type for '{param}': expected {expected}, but got {got} instead."
    return APIError(400, message, param, "invalid_type")


def body_and_model(raw: bytes) -> tuple[dict[str, Any], str]:
    """A request body that is a JSON object with a string ``model``; else ``APIError`` (400)."""
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise APIError(
            400, f"body: malformed JSON: {exc}", param=None, code="invalid_json"
        ) from None
    _type(body, dict, "body", "a JSON object")
    model = body.get("model")
    if model is None:
        raise APIError(400, "model: field required", param="model", code="missing_field")
    _type(model, str, "model", "a string")
    return body, model


def parse_chat_request(raw: bytes) -> ChatRequest:
    """Validate a request body; raises ``APIError`` (400) naming the field at fault."""
    return chat_request_from(*body_and_model(raw))


def chat_request_from(body: dict[str, Any], model: str) -> ChatRequest:
    """Validate a parsed Chat Completions body (``model`` already read and checked to be a
    string); what ``/v1/messages`` and ``/v1/responses`` call on their translation to chat."""
    messages = _messages(body.get("messages"))
    n = body.get("n")
    if n is not None:
        _type(n, int, "n", "an integer")
        if n != 1:
            raise _bad("n", f"only n=1 is supported, got {n}")
    stream = body.get("stream") or False
    _type(stream, bool, "stream", "a boolean")
    so = body.get("stream_options")
    include_usage = False
    if so is not None:
        _type(so, dict, "stream_options", "an object")
        include_usage = bool(so.get("include_usage", False))
    mt = _opt_int(body, "max_completion_tokens", 1)
    if mt is None:
        mt = _opt_int(body, "max_tokens", 1)
    min_tokens = _opt_int(body, "min_tokens", 0) or 0
    if mt is not None and min_tokens > mt:
        raise _bad("min_tokens", f"{min_tokens} exceeds max_tokens {mt}")
    ignore_eos = body.get("ignore_eos") or False
    _type(ignore_eos, bool, "ignore_eos", "a boolean")
    _opt_num(body, "temperature", 0.0, 2.0)
    _opt_num(body, "top_p", 0.0, 1.0)
    seed = body.get("seed")
    if seed is not None:
        _type(seed, int, "seed", "an integer")
    stop = body.get("stop")
    stops: list[str] = []
    if isinstance(stop, str):
        stops = [stop]
    elif isinstance(stop, list):
        for i, s in enumerate(stop):
            _type(s, str, f"stop[{i}]", "a string")
        stops = list(stop)
    elif stop is not None:
        raise _bad("stop", f"expected a string or an array of strings, got {type(stop).__name__}")
    tools = _tools(body.get("tools"))
    ptc = body.get("parallel_tool_calls", True)
    _type(ptc, bool, "parallel_tool_calls", "a boolean")
    return ChatRequest(
        model=model,
        messages=messages,
        stream=stream,
        include_usage=include_usage,
        max_tokens=mt,
        min_tokens=min_tokens,
        ignore_eos=ignore_eos,
        seed=seed,
        tools=tools,
        tool_choice=_tool_choice(body.get("tool_choice"), tools),
        parallel_tool_calls=ptc,
        stop=stops,
    )


@dataclass
class CompletionRequest:
    """A validated ``/v1/completions`` request (one text prompt, not streamed)."""

    model: str
    prompt: str
    max_tokens: int


def parse_completion_request(raw: bytes) -> CompletionRequest:
    """Validate a text-completion body: ``model``, ``prompt`` (a string, or a list of one),
    ``max_tokens`` (default 16, as OpenAI's); ``stream`` must be off. ``APIError`` (400)
    naming the field at fault."""
    body, model = body_and_model(raw)
    prompt = body.get("prompt")
    if isinstance(prompt, list) and len(prompt) == 1:
        prompt = prompt[0]
    if prompt is None:
        raise APIError(400, "prompt: field required", param="prompt", code="missing_field")
    _type(prompt, str, "prompt", "a string (or a list of one string)")
    if body.get("stream"):
        raise _bad("stream", "this simulator answers /v1/completions without streaming")
    n = body.get("n")
    if n is not None and n != 1:
        raise _bad("n", f"only n=1 is supported, got {n!r}")
    _opt_num(body, "temperature", 0.0, 2.0)
    _opt_num(body, "top_p", 0.0, 1.0)
    mt = _opt_int(body, "max_tokens", 1)
    return CompletionRequest(model=model, prompt=prompt, max_tokens=16 if mt is None else mt)
