"""What the importers share: reading a source's records with one-line errors (the files of a
content-free import, and the trace they become, are ``import_io``'s).

* ``At`` names a place in a source (``file:record``) and raises the one-line
  ``TraceFormatError`` (``file:record: field: problem``) that the CLI prints with exit 2;
  ``need_int``, ``need_num``, ``need_str``, ``need_ids`` read one field or raise it.
* Liberal in what is accepted: what departs from a format's schema without losing meaning (a
  null or a missing field the importer can default, a number written as a clean decimal string,
  an integral float where an integer belongs, a key the schema does not name) is accepted and
  counted in the ``Deviations`` an ``At`` carries (``At.deviate``; ``extra_keys``), which the
  importer prints as one warning line (``Deviations.warning``) and records in the header
  (``source.deviations``). Only what leaves the source without meaning is an error.
* ``Progress`` shows the source records read so far as one line on stderr.
"""

from __future__ import annotations

import math
import re
import sys
import time
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, NoReturn, TypedDict, Unpack

import orjson

from agentload.errors import TraceFormatError
from agentload.trace.schema import MAX_CALL_TOKENS

__all__ = [
    "EXTRA_KEY",
    "INTEGRAL_FLOAT",
    "MISSING",
    "NULL",
    "STRING_NUMBER",
    "At",
    "Deviations",
    "Progress",
    "extra_keys",
    "need_ids",
    "need_int",
    "need_num",
    "need_str",
    "need_time",
    "need_tokens",
    "opt_num",
    "opt_str",
    "opt_time",
    "show",
    "time_s",
]

_MISSING: Any = object()
MAX_INT = 2**53
"""The largest integer field an import takes (a count, a length): every JSON reader holds it."""
MAX_TIME_S = 4e9
"""The largest time an import takes, in seconds, either sign: a relative one (``t``, a
Mooncake ``timestamp``) or an absolute one (since 1970: up to the year 2096). Trace times are
64-bit nanoseconds (2**63 ns is 292 years), so this, plus the clock it is added to, always fits."""


NULL = "null"
"""A deviation: null where the schema wants a value (the importer's default stands in)."""
MISSING = "missing"
"""A deviation: a field the schema requires is absent (the importer's default stands in)."""
STRING_NUMBER = "number as string"
"""A deviation: a number written as a clean decimal string (``"123"``, ``"0.5"``)."""
INTEGRAL_FLOAT = "integral float"
"""A deviation: an integral float where the schema wants an integer (``12.0``)."""
EXTRA_KEY = "extra key"
"""A deviation: a key the schema does not name (kept out of the trace)."""

_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")
_LINE = re.compile(r"^line [0-9]+ ?")
_INDEX = re.compile(r"\[[0-9]+\]")
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_$@.\-\[\]]{1,40}")
_MAX_KINDS = 64  # distinct (field, kind) pairs named; more are counted under "(other fields)"
_SHOWN_KINDS = 8  # items of the warning line


@dataclass
class Deviations:
    """What a source did differently from its format's published schema without losing meaning,
    counted by field and kind while it is read (``At.deviate``): the importer prints
    ``warning()`` once at the end and records ``as_dict()`` in the header's ``source``."""

    fmt: str
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    def note(self, fld: str, kind: str) -> None:
        """Count one deviation of ``kind`` at ``fld`` (a schema path: ``requests[].in``)."""
        key = (fld, kind)
        if key not in self.counts and len(self.counts) >= _MAX_KINDS:
            key = ("(other fields)", kind)
        self.counts[key] += 1

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, int]:
        """``{"requests[].subagent_type: null": 4, "_analysis: extra key": 1}``: the header's
        ``source.deviations``."""
        return {f"{f}: {k}": n for (f, k), n in sorted(self.counts.items())}

    def warning(self) -> str | None:
        """``agentload: warning: 5 deviations from the weka schema accepted: ...`` (one line),
        or None when the source kept to its schema."""
        total = self.total
        if not total:
            return None
        items: list[tuple[int, str]] = []
        extra = sorted(
            ((n, f) for (f, k), n in self.counts.items() if k == EXTRA_KEY),
            key=lambda x: (-x[0], x[1]),
        )
        if extra:
            names = ", ".join(f for _, f in extra[:_SHOWN_KINDS])
            more = f" and {len(extra) - _SHOWN_KINDS} more" if len(extra) > _SHOWN_KINDS else ""
            n = sum(c for c, _ in extra)
            items.append((n, f"extra keys \u00d7{n:,} ({names}{more})"))
        for (f, k), n in self.counts.items():
            if k != EXTRA_KEY:
                items.append((n, f"{f}: {k} \u00d7{n:,}"))
        items.sort(key=lambda x: (-x[0], x[1]))
        shown = [text for _, text in items[:_SHOWN_KINDS]]
        if len(items) > _SHOWN_KINDS:
            shown.append(f"and {len(items) - _SHOWN_KINDS} more kinds")
        noun = "deviation" if total == 1 else "deviations"
        return (
            f"agentload: warning: {total:,} {noun} from the {self.fmt} schema accepted "
            f"(no meaning lost; counted in the trace header): {', '.join(shown)}"
        )


def _name(text: str) -> str:
    """A key or field as the warning and the header show it: plain names as they are, others
    JSON-quoted and cut (one line, bounded)."""
    return text if _PLAIN_NAME.fullmatch(text) else show(text)


@dataclass(frozen=True)
class At:
    """A place in a source: ``file`` and ``record`` (``line 12``, ``requests[3].requests[1]``),
    and the ``Deviations`` its import counts (none: not counted)."""

    file: str
    record: str
    dev: Deviations | None = field(default=None, compare=False, repr=False)

    def sub(self, part: str) -> At:
        """A place inside this one (``requests[3]`` + ``.requests[1]``)."""
        sep = "" if not self.record or part.startswith("[") else "."
        if self.record.startswith("line ") and not part.startswith("["):
            sep = " "
        return At(self.file, f"{self.record}{sep}{part}", self.dev)

    def fail(self, fld: str, problem: str) -> NoReturn:
        where = f"{self.file}:{self.record}" if self.record else self.file
        raise TraceFormatError(f"{where}: {fld}: {problem}")

    def deviate(self, fld: str, kind: str) -> None:
        """Count a deviation of ``kind`` at ``fld`` of this record (by schema path: the record's
        indices and line number dropped, ``requests[3].in`` -> ``requests[].in``)."""
        if self.dev is None:
            return
        rec = _INDEX.sub("[]", _LINE.sub("", self.record))
        name = _INDEX.sub("[]", _name(fld))
        path = name if not rec else rec + name if name.startswith("[") else f"{rec}.{name}"
        self.dev.note(path, kind)


def extra_keys(d: dict[str, Any], known: Collection[str], at: At) -> None:
    """Count each key of ``d`` that the schema (``known``, a set) does not name."""
    if at.dev is None:
        return
    for key in d:
        if key not in known:
            at.deviate(key, EXTRA_KEY)


def _show(v: Any) -> str:
    try:
        text = orjson.dumps(v).decode() if not isinstance(v, bytes) else repr(v)
    except TypeError:  # an integer beyond 64 bits (or a list holding one)
        text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def show(v: Any) -> str:
    """``v`` as an error line shows it: JSON, cut to 40 characters."""
    return _show(v)


def _absent(d: dict[str, Any], key: str, at: At, nullable: bool, required: bool) -> None:
    """``d[key]`` is absent or null and the caller has a default for it: count the deviation,
    if it is one (a null the schema does not allow; a required field missing)."""
    if key in d:
        if not nullable:
            at.deviate(key, NULL)
    elif required:
        at.deviate(key, MISSING)


def _decimal(v: Any, key: str, at: At) -> Any:
    """A clean decimal string (``"123"``, ``"-0.5"``) as its number, counted; else ``v``."""
    if isinstance(v, str) and _NUMBER.fullmatch(v):
        at.deviate(key, STRING_NUMBER)
        return float(v) if "." in v else int(v)
    return v


def _integer(v: Any, key: str, at: At) -> int | None:
    """``v`` as an integer (a clean decimal string or an integral float accepted and counted),
    or None when it is none."""
    got = _decimal(v, key, at)
    if isinstance(got, float) and got.is_integer():
        if got is v:
            at.deviate(key, INTEGRAL_FLOAT)
        got = int(got)
    if not isinstance(got, int) or isinstance(got, bool):
        return None
    return got


def need_int(
    d: dict[str, Any],
    key: str,
    at: At,
    default: Any = _MISSING,
    lo: int = 0,
    hi: int = MAX_INT,
    *,
    nullable: bool = True,
    required: bool = False,
) -> int:
    """``d[key]`` as an int of ``lo``..``hi``, else a one-line error. ``default`` stands in when
    it is absent or null, if given (a null counts as a deviation unless ``nullable``, an absent
    field when ``required`` by the schema); an integral float or a clean decimal string is
    accepted and counted."""
    v = d.get(key)
    if v is None:
        if default is _MISSING:
            at.fail(key, "missing (an integer)")
        _absent(d, key, at, nullable, required)
        return int(default)
    got = _integer(v, key, at)
    if got is None:
        at.fail(key, f"expected an integer, got {_show(v)}")
    if got < lo:
        at.fail(key, f"expected an integer >= {lo}, got {got}")
    if got > hi:
        at.fail(key, f"{_show(got)} is too large (at most {hi:,})")
    return got


class _IntOptions(TypedDict, total=False):
    """What ``need_int`` takes besides its field and its upper bound (see there)."""

    default: Any
    lo: int
    nullable: bool
    required: bool


def need_tokens(d: dict[str, Any], key: str, at: At, **opts: Unpack[_IntOptions]) -> int:
    """``d[key]`` as a token count (``need_int`` up to ``MAX_CALL_TOKENS``: what one call of a
    trace may hold, so that replay never sizes a prompt by an absurd count)."""
    return need_int(d, key, at, hi=MAX_CALL_TOKENS, **opts)


def opt_num(d: dict[str, Any], key: str, at: At, *, nullable: bool = True) -> float | None:
    """``d[key]`` as a finite number (a clean decimal string accepted and counted), or None
    when absent or null (a null counted unless ``nullable``)."""
    v = d.get(key)
    if v is None:
        _absent(d, key, at, nullable, required=False)
        return None
    got = _decimal(v, key, at)
    if not isinstance(got, int | float) or isinstance(got, bool) or not math.isfinite(got):
        at.fail(key, f"expected a number, got {_show(v)}")
    return float(got)


def need_num(d: dict[str, Any], key: str, at: At) -> float:
    """``d[key]`` as a finite number, else a one-line error."""
    v = opt_num(d, key, at)
    if v is None:
        at.fail(key, "missing (a number)")
    return v


def time_s(value: float, fld: str, at: At, unit_s: float = 1.0) -> float:
    """``value`` (in units of ``unit_s`` seconds) as seconds when it is a time a trace can hold
    (``MAX_TIME_S``), else a one-line error naming ``fld``: the one check of every time an
    importer converts."""
    seconds = value * unit_s
    if not math.isfinite(seconds) or abs(seconds) > MAX_TIME_S:
        at.fail(fld, f"{value:.6g} is out of range (a time of {seconds:.3g} s; at most ±4e9 s)")
    return seconds


def opt_time(
    d: dict[str, Any], key: str, at: At, unit_s: float = 1.0, *, nullable: bool = True
) -> float | None:
    """``d[key]`` (in units of ``unit_s`` seconds) as seconds (``time_s``), or None when
    absent or null."""
    v = opt_num(d, key, at, nullable=nullable)
    return None if v is None else time_s(v, key, at, unit_s)


def need_time(d: dict[str, Any], key: str, at: At, unit_s: float = 1.0) -> float:
    """``d[key]`` (in units of ``unit_s`` seconds) as seconds (``time_s``), else a one-line
    error."""
    return time_s(need_num(d, key, at), key, at, unit_s)


def opt_str(d: dict[str, Any], key: str, at: At, *, nullable: bool = True) -> str | None:
    """``d[key]`` as a string, or None when absent or null (a null counted unless
    ``nullable``)."""
    v = d.get(key)
    if v is None:
        _absent(d, key, at, nullable, required=False)
        return None
    if not isinstance(v, str):
        at.fail(key, f"expected a string, got {_show(v)}")
    return v


def need_str(
    d: dict[str, Any],
    key: str,
    at: At,
    default: str | None = None,
    *,
    nullable: bool = True,
    required: bool = False,
) -> str:
    """``d[key]`` as a string (``default`` when absent or null, if given: a null counted unless
    ``nullable``, an absent field when ``required``)."""
    v = d.get(key)
    if v is None:
        if default is None:
            at.fail(key, "missing (a string)")
        _absent(d, key, at, nullable, required)
        return default
    if not isinstance(v, str):
        at.fail(key, f"expected a string, got {_show(v)}")
    return v


def need_ids(
    d: dict[str, Any], key: str, at: At, n_in: int, block_size: int, *, nullable: bool = True
) -> list[int]:
    """``d[key]``: a list of integer block ids (empty when absent or null; a null counted unless
    ``nullable``) that fits ``n_in`` tokens: at most ``ceil(n_in / block_size)`` of them. An id
    written as a clean decimal string or an integral float is accepted and counted."""
    v = d.get(key)
    if v is None:
        _absent(d, key, at, nullable, required=False)
        return []
    if not isinstance(v, list):
        at.fail(key, f"expected a list of integers, got {_show(v)}")
    if not all(type(x) is int for x in v):  # (a bool is not an int here)
        ids: list[int] = []
        for i, x in enumerate(v):
            got = x if type(x) is int else _integer(x, f"{key}[{i}]", at)
            if got is None:
                at.fail(f"{key}[{i}]", f"expected an integer, got {_show(x)}")
            ids.append(got)
        v = ids
    fit = -(-n_in // block_size)
    if len(v) > fit:
        at.fail(
            key,
            f"{len(v)} block ids do not fit {n_in} input tokens at block size {block_size} "
            f"(at most {fit})",
        )
    return v


@dataclass
class Progress:
    """Source records read so far, shown as one line on stderr while a terminal watches."""

    label: str
    total: int = 0
    done: int = 0
    _shown: float = field(default=0.0, repr=False)
    _tty: bool = field(default_factory=lambda: sys.stderr.isatty(), repr=False)

    def show(self, final: bool = False) -> None:
        if not self._tty:
            return
        now = time.monotonic()
        if not final and now - self._shown < 0.5:
            return
        self._shown = now
        of = f"/{self.total:,}" if self.total else ""
        end = "\n" if final else ""
        sys.stderr.write(f"\r{self.label}: {self.done:,}{of} records{end}")
        sys.stderr.flush()
