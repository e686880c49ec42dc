"""Option values every command shares, and their checks: the limits of the count options, the
text forms (``2s``, ``1,2,4``, ``4`` or ``5%``; ``--slo``'s is ``options.slo``), and what a
session header, body field or endpoint URL may be. A bad value raises pydantic's
``PydanticCustomError`` (``bad_value``), which a config model reports with the field as its
location.
"""

from __future__ import annotations

import re

import httpx
from pydantic_core import PydanticCustomError

from agentload.masking import has_userinfo

__all__ = [
    "MAX_CONTEXT",
    "MAX_GPUS",
    "MAX_LEVEL",
    "MAX_SEED",
    "MAX_SESSIONS",
    "MAX_WORKERS",
    "RESERVED_BODY_FIELDS",
    "RESERVED_HEADERS",
    "bad_value",
    "endpoint_problem",
    "header_name_problem",
    "one_of",
    "parse_duration_ns",
    "parse_levels",
    "parse_resolution",
]

# The largest value each count option takes (replay's, and generate's, which are checked here
# too): far above any real run, small enough that nothing sized by them overflows or exhausts
# memory before the run starts, and a seed every JSON reader holds exactly.
MAX_LEVEL = 100_000
"""Sessions in flight at once (--concurrency, --sweep; generate --parallel)."""
MAX_SESSIONS = 1_000_000
"""Session instances per point (--sessions; generate -n)."""
MAX_GPUS = 1_000_000
"""GPUs behind the endpoint (--gpus)."""
MAX_CONTEXT = 100_000_000
"""Tokens per call (--max-context)."""
MAX_WORKERS = 1024
"""Ray workers (--workers)."""
MAX_SEED = 2**53
"""The largest seed, either sign (--seed): results.json stores it as a JSON number."""

_UNITS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000}
_DUR = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ns|us|ms|s|m)?\s*$")


def bad_value(message: str) -> PydanticCustomError:
    """A validation error whose message is ``message`` as written (no "Value error," prefix)."""
    return PydanticCustomError("replay_option", message)


def parse_duration_ns(text: str, default_unit: str = "s") -> int:
    """``2s``, ``50ms``, ``1.5`` (default unit) → ns."""
    m = _DUR.match(text)
    if not m:
        raise bad_value(f"bad duration {text!r}; write e.g. 2s, 50ms, 1500us")
    ns = int(float(m.group(1)) * _UNITS[m.group(2) or default_unit])
    if ns <= 0:
        raise bad_value(f"duration {text!r} must be more than 0")
    return ns


def parse_resolution(text: str) -> tuple[int | None, float | None]:
    """``4`` → (4, None): sessions; ``5%`` → (None, 0.05): a share of the lower end."""
    t = text.strip()
    try:
        if t.endswith("%"):
            share = float(t[:-1]) / 100
            if not 0 < share < 1:
                raise ValueError
            return None, share
        n = int(t)
        if n < 1:
            raise ValueError
        return n, None
    except ValueError:
        raise bad_value(f"{text!r}: expected sessions (4) or a share of the answer (5%)") from None


def parse_levels(text: str) -> list[int]:
    """``1,2,4,8`` → [1, 2, 4, 8] (kept in the given order; positivity is the field's check).
    An empty list or an empty item (``1,,2``) is refused."""
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise bad_value(
            "write the concurrency levels as integers separated by commas, e.g. 1,2,4,8"
        ) from None


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
"""An RFC 9110 token: what a header name is."""
RESERVED_HEADERS = frozenset(
    {"accept", "anthropic-version", "authorization", "connection", "content-length"}
    | {"content-type", "host", "transfer-encoding", "x-api-key", "x-goog-api-key"}
)
"""Headers replay (or HTTP itself) sets on every request: --session-header may not be one."""
BODY_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
RESERVED_BODY_FIELDS = frozenset(
    {"messages", "model", "stream", "stream_options", "max_tokens", "max_completion_tokens"}
    | {"tools", "tool_choice", "parallel_tool_calls", "temperature", "top_p", "top_k", "n"}
    | {"stop", "stop_sequences", "seed", "response_format", "logprobs", "top_logprobs"}
    | {"presence_penalty", "frequency_penalty", "logit_bias", "reasoning_effort", "reasoning"}
    | {"ignore_eos", "min_tokens", "input", "instructions", "max_output_tokens", "text"}
    | {"previous_response_id", "store", "truncation", "include", "system", "thinking"}
    | {"metadata", "modalities", "audio", "prediction", "service_tier", "background"}
    | {"contents", "systemInstruction", "generationConfig", "toolConfig"}
    | {"safetySettings", "cachedContent"}
)
"""Body fields of a request replay sends (Chat Completions, Responses, Messages, Gemini), and
the extras it adds: --session-field may not overwrite one (``user``, an end-user id meant for
routing, is allowed)."""


def endpoint_problem(url: str) -> str | None:
    """Why the HTTP client cannot send to ``url`` (None when it can): a host that is no valid
    internationalized name (a bidi control, a disallowed character ...)."""
    try:
        host = httpx.URL(url).host  # decoded (IDNA) when first read
        if host and not host.startswith("[") and ":" not in host:
            host.encode("idna")  # what the resolver will do: a label of 64+ characters fails
    except UnicodeError as exc:  # an IDN label that does not decode, a label of 64+ characters
        why = str(exc).rpartition("UnicodeError: ")[2].rstrip(")")[:160]
        return f"not a usable URL (its host is no valid domain name: {why})"
    except httpx.InvalidURL as exc:
        if has_userinfo(url):  # the parser's words would quote a piece of the password
            return (
                "not a usable URL: its user:password part does not parse (percent-encode "
                "'#' as %23, '?' as %3F, '@' as %40, '/' as %2F in a password)"
            )
        return f"not a usable URL ({exc})"
    return None


def header_name_problem(name: str, reserved: frozenset[str] = RESERVED_HEADERS) -> str | None:
    """Why ``name`` cannot be a session header (None when it can): not an RFC 9110 token (a
    space, a colon, CR/LF ...), or one of the ``reserved`` headers."""
    if _TOKEN.fullmatch(name) is None:
        return "not an HTTP header name (RFC 9110 token: letters, digits and !#$%&'*+-.^_`|~)"
    if name.lower() in reserved:
        return "a header every request sets already; name another"
    return None


def one_of(value: object, choices: tuple[str, ...]) -> object:
    """``value`` when it is one of ``choices``; else the error that names them in order."""
    if value not in choices:
        raise bad_value(f"choose {' or '.join(choices)}")
    return value
