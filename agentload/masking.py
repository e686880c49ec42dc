"""The one secrets policy: what is secret, and where it is masked.

**What is secret** is decided by where a value sits, not by what it looks like:

* an API key in the environment (``AGENTLOAD_API_KEY``, ``OPENAI_API_KEY``);
* a URL's whole userinfo (``http://TOKEN@host``, ``http://user:password@host``: a Git token
  is often the user part);
* every query value of a URL except the few known to be plain (``api-version``, ``model`` ...,
  :data:`PLAIN_PARAMS`);
* the value of a credential header (``Authorization``, ``X-Api-Key``, ``Cookie``, any name
  holding key/token/secret/password/auth/credential/signature), scheme included or not;
* anything an upstream echoes of those: once a value is known to be secret
  (:func:`remember`, :func:`remember_url`), it is masked wherever it turns up, in any shape of
  message (a library's error, a 401 body, a git message).

**Where masking happens** — at the sinks, so no code path has to remember to do it:

* every line the CLI prints: ``cli.main`` wraps stdout and stderr in :class:`MaskedStream`,
  which passes each write through :func:`mask_text` (URLs shown by :func:`redact_url`, known
  secrets as ``***``);
* every trace record written: the trace writer passes each line through :func:`scrub_bytes`
  (and content, before it is content-addressed, through :func:`scrub_json`): credential JSON
  keys, bearer tokens, URL userinfo and secret query values by structure, and known secrets,
  become ``[REDACTED]``;
* results documents (results.json: :func:`scrub_bytes`) and the HTML reports
  (:func:`mask_text`).

A secret is learned where it enters: ``cli.main`` remembers every URL on the command line, an
endpoint's or upstream's URL is remembered when it is parsed, a workspace recipe's when it is
cloned, and the recording proxy hands the recorder process the credential headers of each call
(which it never writes) so that an upstream's 401 quoting them is masked in ``llm_call.error``.
"""

from __future__ import annotations

import errno
import functools
import io
import os
import re
from typing import IO, Any
from urllib.parse import unquote

import orjson

from agentload.errors import OutputStreamError
from agentload.hashing import canonical_json

__all__ = [
    "API_KEY_ENV",
    "MASK",
    "PLACEHOLDER_KEY",
    "PLAIN_PARAMS",
    "REDACTED",
    "MaskedStream",
    "has_userinfo",
    "hide_secrets",
    "is_secret_header",
    "is_secret_param",
    "known_secrets",
    "mask_text",
    "redact_url",
    "remember",
    "remember_url",
    "remember_urls_in",
    "scrub_bytes",
    "scrub_json",
    "url_secrets",
]

API_KEY_ENV = ("AGENTLOAD_API_KEY", "OPENAI_API_KEY")
"""Where the API key is read from, first set wins."""

MASK = "***"
"""What a secret becomes in a line shown to a user."""

REDACTED = "[REDACTED]"
"""What a secret becomes in a trace record."""

PLAIN_PARAMS = frozenset(
    {"api-version", "api_version", "version", "model", "alt", "format", "stream", "beta"}
)
"""Query parameters whose values are shown: every other query value is a secret."""

PLACEHOLDER_KEY = "agentload-no-key"
"""The key ``generate --agent`` gives an agent when the user set none (agents refuse to start
without one). It is no secret and never learned as one: a recorded file or command that names
it keeps it (learning the earlier placeholder, ``agentload``, masked the tool's own name in every
workspace path of a trace)."""

MIN_SECRET = 8
"""A learned value shorter than this is not masked wherever it appears: keys such as ``EMPTY``
or ``dummy`` (usual for local servers) would mask words in prompts. Structure still masks them
in a URL."""

_SECRET_HEADER = re.compile(r"(?i)authorization|cookie|key|token|secret|passw|credential|sign")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>`]*[^\s'\"<>`:,.;)]")

_QUERY_PAIR = re.compile(r"(?<=[?&])([A-Za-z0-9_.\-]+)=([^&\s'\"<>`#)]*[^&\s'\"<>`#):,.;])")
"""A ``name=value`` pair of a query quoted without its URL (urllib3: ``url: /v1?token=abc``)."""
_HOSTPORT = re.compile(r"(?:\[[0-9A-Fa-f:.]*\]|[^:@\[\]/]*)(?::[0-9]*)?\Z")
_known: set[str] = set()
_cache: tuple[tuple[object, int], tuple[tuple[str, ...], tuple[bytes, ...]]] | None = None


# -- what is secret ------------------------------------------------------------------------------
def is_secret_param(name: str) -> bool:
    """True for a query parameter whose value is shown masked: all but :data:`PLAIN_PARAMS`."""
    return name.strip().lower() not in PLAIN_PARAMS


@functools.lru_cache(maxsize=1024)
def is_secret_header(name: str | bytes) -> bool:
    """True for a header whose value is a credential (``Authorization``, ``X-Api-Key`` ...)."""
    text = name.decode("latin-1") if isinstance(name, bytes) else name
    return _SECRET_HEADER.search(text) is not None


def url_secrets(url: str) -> list[str]:
    """The credentials ``url`` carries (its userinfo, whole and each part, and its secret query
    values), as written and percent-decoded, longest first."""
    _, sep, rest = url.partition("://")
    if not sep:
        return []
    userinfo, rest = _userinfo(rest)
    # the whole, and each part between ":", "/", "?" and "#" (a parser quotes "pass" of
    # "u:pass/word" as a port)
    found = [userinfo, *re.split(r"[:/?#]", userinfo)] if userinfo is not None else []
    found += [s.lower() for s in found]  # a parser that took it for a host lowercased it
    query = rest.partition("?")[2].partition("#")[0]
    for piece in query.split("&"):
        name, eq, value = piece.partition("=")
        if eq and is_secret_param(unquote(name)):
            found.append(value)
    found += [unquote(s) for s in found]
    return sorted({s for s in found if len(s) >= MIN_SECRET}, key=lambda s: (-len(s), s))


def has_userinfo(url: str) -> bool:
    """Whether ``url`` carries a user or password (as :func:`url_secrets` reads it)."""
    _, sep, rest = url.partition("://")
    return bool(sep) and _userinfo(rest)[0] is not None


def remember(*values: str | None) -> None:
    """Learn ``values`` as secrets: from now on each is masked wherever it appears."""
    for value in values:
        if value and value.rpartition(" ")[2] == PLACEHOLDER_KEY:
            continue  # the placeholder, alone or as "Bearer <it>"
        if value and len(value) >= MIN_SECRET:
            _known.add(value)
            scheme, sep, token = value.partition(" ")
            if sep and scheme.isalpha() and len(token.strip()) >= MIN_SECRET:
                _known.add(token.strip())  # "Bearer TOKEN": the token alone is secret too


def remember_url(url: str) -> None:
    """Learn the credentials ``url`` carries (:func:`url_secrets`)."""
    remember(*url_secrets(url))


def remember_urls_in(text: str) -> None:
    """Learn the credentials of every URL in ``text`` (an argument, a recipe)."""
    if "://" in text:
        for m in _URL_IN_TEXT.finditer(text):
            remember_url(m.group(0))


def known_secrets() -> list[str]:
    """Every secret learned so far and the environment's API keys, longest first."""
    return list(_known_now()[0])


def _known_now() -> tuple[tuple[str, ...], tuple[bytes, ...]]:
    """The known secrets, and each as JSON escapes it; computed again only when they change
    (the trace writer asks for every record)."""
    global _cache
    env = tuple(os.environ.get(name) for name in API_KEY_ENV)
    if _cache is None or _cache[0] != (env, len(_known)):
        found = _known | {v for v in env if v and len(v) >= MIN_SECRET}
        text = tuple(sorted(found, key=lambda s: (-len(s), s)))
        _cache = ((env, len(_known)), (text, tuple(orjson.dumps(t)[1:-1] for t in text)))
    return _cache[1]


# -- masking for people ---------------------------------------------------------------------------
def _split_authority(rest: str) -> tuple[str, str, str]:
    """``host...`` / ``path?query``: the authority ends at the first ``/``, ``?`` or ``#``."""
    for i, ch in enumerate(rest):
        if ch in "/?#":
            return rest[:i], ("/" if ch == "/" else ""), rest[i + 1 if ch == "/" else i :]
    return rest, "", ""


def _userinfo(rest: str) -> tuple[str | None, str]:
    """``(userinfo, the rest after its "@")`` of what follows ``scheme://``; ``(None, rest)``
    when there is none. Its author meant a password also where a URL parser sees none:
    a "@" after a "?" or "#" and before any "/" (``u:pa55#word@h``, ``hunter2?@h``: unless
    what follows the "?" reads as a query, ``h?to=me@x``), and a "@" after the first "/" when
    the authority before it does not parse as host[:port] (``u:pass/word@h``)."""
    authority = _split_authority(rest)[0]
    head = rest.partition("/")[0]
    before_query = rest.partition("?")[0].partition("#")[0]
    if "@" in authority:
        cut = authority.rindex("@")
    elif "@" in head and not _query_like(head[: head.rindex("@")]):
        cut = head.rindex("@")
    elif "@" in before_query and not _HOSTPORT.match(authority):
        cut = before_query.rindex("@")
    else:
        return None, rest
    return rest[:cut], rest[cut + 1 :]


def _query_like(text: str) -> bool:
    """Whether what follows the first "?" or "#" of ``text`` reads as a query (``a=b``)."""
    tail = re.split(r"[?#]", text, maxsplit=1)[-1]
    return "=" in tail or "&" in tail


def _redact_query(query: str) -> str:
    parts = []
    for piece in query.split("&"):
        name, sep, _ = piece.partition("=")
        parts.append(f"{name}={MASK}" if sep and is_secret_param(name) else piece)
    return "&".join(parts)


def redact_url(url: str) -> str:
    """``url`` as it may be shown: its userinfo and secret query values replaced by ``***``.
    Works on any text, parsed or not: ``http://u:pass/word@h/v1`` does not parse (its port
    would be "pass"), but its author meant a password, and it is masked as one."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return _redact_query(url) if "=" in url else url
    userinfo, rest = _userinfo(rest)
    if userinfo is not None:
        rest = f"{MASK}@{rest}"
    authority, slash, tail = _split_authority(rest)
    path, qmark, query = tail.partition("?")
    query, hash_, fragment = query.partition("#")
    out = f"{scheme}://{authority}{slash}{path}"
    if qmark:
        out += "?" + _redact_query(query)
    return out + (hash_ + fragment if hash_ else "")


def hide_secrets(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` replaced by ``***``."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    return text


def mask_text(text: str) -> str:
    """``text`` as it may be shown: each URL in it redacted, each known secret masked."""
    if "://" in text:
        text = _URL_IN_TEXT.sub(lambda m: redact_url(m.group(0)), text)
    if "=" in text:
        text = _QUERY_PAIR.sub(_mask_pair, text)
    return hide_secrets(text, known_secrets())


def _mask_pair(m: re.Match[str]) -> str:
    name = m.group(1)
    return f"{name}={MASK}" if is_secret_param(name) and m.group(2) != MASK else m.group(0)


class MaskedStream(io.TextIOBase):
    """A text stream that masks (:func:`mask_text`) everything written to it, line by line:
    a partial line is held until its newline (or a flush), so a secret split over two writes is
    still seen whole."""

    def __init__(self, inner: IO[str] | None, name: str = "output") -> None:
        super().__init__()
        self.inner = inner
        self.name = name
        self._pending = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return str(getattr(self.inner, "encoding", None) or "utf-8")

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return getattr(self.inner, "errors", None)

    def isatty(self) -> bool:
        return self.inner is not None and self.inner.isatty()

    def fileno(self) -> int:
        if self.inner is None:  # started with the descriptor closed
            raise io.UnsupportedOperation("closed")
        return self.inner.fileno()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._pending += text
        if "\n" in self._pending:
            whole, _, self._pending = self._pending.rpartition("\n")
            self._put(mask_text(whole + "\n"))
            if self._pending.startswith("\r") or len(self._pending) > 65536:
                self.flush()
        elif "\r" in text:  # a progress line redrawn in place
            self.flush()
        return len(text)

    def flush(self) -> None:
        if self._pending:
            self._put(mask_text(self._pending))
            self._pending = ""
        self._put(None)

    def _put(self, text: str | None) -> None:
        """Write ``text`` (None: flush) to the inner stream; ``OutputStreamError`` (one line;
        an ``OSError`` too, for those who catch that) when the descriptor cannot take it:
        closed from the start, ``/dev/full``, a full disk. A reader that went away
        (``BrokenPipeError``) and a file closed by its owner (``ValueError``) pass as they are."""
        if self.inner is None:
            self._pending = ""
            raise OutputStreamError(errno.EBADF, f"{self.name}: cannot write (closed)")
        try:
            if text is None:
                self.inner.flush()
            else:
                self.inner.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            self._pending = ""
            why = exc.strerror or str(exc)
            raise OutputStreamError(exc.errno, f"{self.name}: cannot write ({why})") from None


# -- masking in traces ----------------------------------------------------------------------------
_PATTERNS = [
    rb"(?<![A-Za-z0-9])sk-(?:proj-|ant-)?[A-Za-z0-9_\-]{16,}",
    rb"bearer\s+[A-Za-z0-9._~+/=\-]{8,}",
    rb"\"(?:authorization|proxy-authorization|api[-_]?key|x-api-key|openai[-_]api[-_]key"
    rb"|access[-_]token|auth[-_]token|password|secret[-_]?key)\"\s*:\s*\"(?:[^\"\\]|\\.)*\"",
    rb"(?:api[-_]?key|token|secret|password)=[A-Za-z0-9._~+/\-]{8,}",
    # a URL's userinfo (group 1 keeps the scheme) and a secret-named query value (group 2
    # keeps the name): the structure says they are credentials, whatever they look like; a
    # value already masked for display (***) is left so
    rb"([a-z][a-z0-9+.\-]*://)(?!\*\*\*@)[^\s\"'<>`\\/?#@]+@",
    rb"([?&][^=&\s\"'<>`\\#?]*(?:key|token|secret|passw|auth|sig|credential)[^=&\s\"'<>`\\#?]*=)"
    rb"(?!\*\*\*(?:[&#\s\"'<>`\\]|$))[^&\s\"'<>`\\#]+",
]
_RE = re.compile(b"|".join(b"(?:" + p + b")" for p in _PATTERNS), re.IGNORECASE)

# Every match of _RE holds one of these (lower-cased): a substring search rules most records
# out at memchr speed, where the regex costs ~50 us on a 500-byte record of digits.
_HINTS = (
    b"sk-",
    b"bearer",
    b'key"',
    b"key=",
    b'token"',
    b"token=",
    b"secret",
    b"password",
    b"authorization",
)
_QUERY_HINTS = (b"passw", b"auth", b"sig", b"credential")


def _may_hold_one(low: bytes) -> bool:
    """Whether lower-cased ``low`` may hold a match of ``_RE`` (never False when it does)."""
    return (
        any(h in low for h in _HINTS)
        or (b"@" in low and b"://" in low)  # a URL's userinfo
        or (b"=" in low and any(h in low for h in _QUERY_HINTS))  # ?auth=..., &sig=...
    )


def _sub(m: re.Match[bytes]) -> bytes:
    text = m.group(0)
    if m.group(1) is not None:  # scheme://userinfo@
        return m.group(1) + REDACTED.encode() + b"@"
    if m.group(2) is not None:  # ?name=value
        return m.group(2) + REDACTED.encode()
    if text.startswith(b'"'):  # a JSON "key": "value" pair: keep the key, drop the value
        key = text.split(b":", 1)[0]
        return key + b':"' + REDACTED.encode() + b'"'
    return REDACTED.encode()


def scrub_bytes(data: bytes) -> bytes:
    """Serialized JSON with every credential (by structure, and every known secret) replaced
    by ``[REDACTED]``."""
    for secret in _known_now()[1]:
        if secret in data:
            data = data.replace(secret, REDACTED.encode())
    if not _may_hold_one(data.lower()):
        return data
    return _RE.sub(_sub, data)


def scrub_json(value: Any) -> Any:
    """``value`` itself when it holds nothing secret; else a copy with each secret part of its
    strings replaced by ``[REDACTED]`` (the replacement keeps the JSON valid)."""
    raw = canonical_json(value)
    clean = scrub_bytes(raw)
    return value if clean == raw else orjson.loads(clean)
