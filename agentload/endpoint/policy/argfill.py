"""Tool-call arguments made valid for the tool's JSON schema, whatever product offers the tool.

``Filler(schema, description, cwd, note).fill(given)`` keeps what the policy chose (``given``)
where the schema takes it and completes the rest, so a call passes the validation a product
runs on it (JSON Schema, zod, pydantic) and the rules its descriptions state:

* **objects** — every required property present (nested objects' too); a property the schema
  does not name dropped; an optional value given empty (``""`` or ``None``) left out, as a
  product's "omit it for the default" asks;
* **types** — each value coerced to its declared type (``"3"`` → ``3`` for an integer, a scalar
  → a one-item array, an integer stays an integer); a type list's first non-null type unless
  the value has another listed one; an ``anyOf``/``oneOf``'s branch the value fits (else its
  first non-null one); local ``$ref``s followed and ``allOf`` merged; ``const`` honoured;
* **enums** — a value not listed replaced by the listed one that names it (case aside), else
  the schema's ``default``, else the first listed;
* **strings** — never empty where required: the schema's default or example, the working
  directory for a path, else ``note`` (what the call is for, in words); a path made absolute
  (joined to ``cwd``) where the property's description, or a sentence of the tool's description
  that names it, asks for an absolute path, and made relative where the description says
  "relative to"; ``maxLength`` cut, ``minLength`` padded, a ``pattern`` it fails replaced by
  the default when that fits;
* **numbers** — clamped into ``minimum``/``maximum`` (exclusive bounds as draft-4 booleans or
  draft-6+ numbers); **booleans** from ``"true"``/``"false"`` too; **arrays** — each item
  filled, ``minItems``/``maxItems`` kept.

Nothing here knows a product: what a tool *does* is ``toolkinds``'s, what a call is for is
``moves``'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Filler"]

_OMIT: Any = object()
"""An optional property left out."""
_PATHISH = re.compile(r"path|file|dir|folder|cwd", re.IGNORECASE)
_ABSOLUTE = re.compile(r"\babsolute\b", re.IGNORECASE)
_RELATIVE = re.compile(r"\brelative to\b", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?])\s+|\n+")
_PY_TYPES: dict[type, str] = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    list: "array",
    dict: "object",
}


@dataclass(frozen=True)
class Filler:
    """Arguments made valid for one tool (see the module docstring)."""

    schema: dict[str, Any]
    """The tool's parameter schema (a JSON Schema of an object)."""
    description: str = ""
    """The tool's description (where a product may say a path must be absolute)."""
    cwd: str = ""
    """The agent's working directory, absolute ("" when unknown: paths stay as given)."""
    note: str = ""
    """What the call is for, in words: the text of a required string nobody gave."""

    def fill(self, given: Mapping[str, Any]) -> dict[str, Any]:
        """``given`` made valid for the schema (a new dict; ``given`` is not changed)."""
        spec = self._resolve(self.schema)
        return self._object(spec, dict(given))

    # -- schema plumbing ----------------------------------------------------------------------
    def _resolve(self, spec: Any, depth: int = 0) -> dict[str, Any]:
        """``spec`` with local ``$ref``s followed and ``allOf`` merged."""
        if not isinstance(spec, dict) or depth > 8:
            return {}
        ref = spec.get("$ref")
        if isinstance(ref, str):
            rest = {k: v for k, v in spec.items() if k != "$ref"}
            return {**self._resolve(self._pointer(ref), depth + 1), **rest}
        parts = spec.get("allOf")
        if isinstance(parts, list):
            merged = {k: v for k, v in spec.items() if k != "allOf"}
            for part in parts:
                merged = _merge(merged, self._resolve(part, depth + 1))
            return merged
        return spec

    def _pointer(self, ref: str) -> Any:
        node: Any = self.schema
        if not ref.startswith("#"):
            return {}
        for part in ref[1:].split("/"):
            if not part:
                continue
            key = part.replace("~1", "/").replace("~0", "~")
            node = node.get(key) if isinstance(node, dict) else None
        return node

    def _branch(self, spec: dict[str, Any], value: Any) -> dict[str, Any]:
        """The ``anyOf``/``oneOf`` branch of ``spec`` that ``value`` fits, merged into it."""
        options = [self._resolve(b) for b in spec.get("anyOf") or spec.get("oneOf") or ()]
        options = [b for b in options if b.get("type") != "null"] or options
        if not options:
            return spec
        have = _PY_TYPES.get(type(value))
        fits = next((b for b in options if have and have in _types(b)), options[0])
        rest = {k: v for k, v in spec.items() if k not in ("anyOf", "oneOf")}
        return {**rest, **fits}

    # -- values ---------------------------------------------------------------------------------
    def _value(self, spec: Any, value: Any, key: str, required: bool) -> Any:
        spec = self._resolve(spec)
        if "anyOf" in spec or "oneOf" in spec:
            spec = self._branch(spec, value)
        if (value is None or value == "") and not required:
            return _OMIT
        if "const" in spec:
            return spec["const"]
        enum = spec.get("enum")
        if isinstance(enum, list) and enum:
            return _choose(enum, value, spec.get("default"))
        kind = _kind(spec, value)
        if kind == "object":
            return self._object(spec, value if isinstance(value, dict) else {})
        if kind == "array":
            return self._array(spec, value, key)
        if kind in ("integer", "number"):
            return _number(spec, value, kind)
        if kind == "boolean":
            return _boolean(spec, value)
        if kind == "null":
            return None
        return self._string(spec, value, key)

    def _object(self, spec: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
        props = spec.get("properties")
        props = props if isinstance(props, dict) else {}
        required = [r for r in spec.get("required") or () if isinstance(r, str)]
        out: dict[str, Any] = {}
        for k, v in given.items():
            if k in props:
                val = self._value(props[k], v, k, k in required)
                if val is not _OMIT:
                    out[k] = val
        for k in required:
            if k not in out:
                out[k] = self._value(props.get(k) or {}, None, k, True)
        return out

    def _array(self, spec: dict[str, Any], value: Any, key: str) -> list[Any]:
        if isinstance(value, list):
            items = value
        else:
            items = [] if value is None or value == "" else [value]
        item = spec.get("items") if isinstance(spec.get("items"), dict) else {}
        out = [self._value(item, x, key, True) for x in items]
        least, most = spec.get("minItems"), spec.get("maxItems")
        while isinstance(least, int) and len(out) < least:
            out.append(self._value(item, None, key, True))
        return out[:most] if isinstance(most, int) else out

    def _string(self, spec: dict[str, Any], value: Any, key: str) -> str:
        text = _as_text(value)
        if not text:
            text = self._blank(spec, key)
        if self._pathish(key, spec):
            text = self._placed(key, spec, text)
        pattern = spec.get("pattern")
        if isinstance(pattern, str) and not _matches(pattern, text):
            default = spec.get("default")
            if isinstance(default, str) and _matches(pattern, default):
                text = default
        least, most = spec.get("minLength"), spec.get("maxLength")
        if isinstance(least, int) and len(text) < least:
            text = text + "_" * (least - len(text))
        return text[:most] if isinstance(most, int) else text

    def _blank(self, spec: dict[str, Any], key: str) -> str:
        """A required string nobody gave (see the module docstring)."""
        for candidate in (spec.get("default"), *(spec.get("examples") or ())):
            if isinstance(candidate, str) and candidate:
                return candidate
        if self._pathish(key, spec):
            return self.cwd or "."
        return self.note or key.replace("_", " ").strip() or "value"

    # -- paths ----------------------------------------------------------------------------------
    def _pathish(self, key: str, spec: dict[str, Any]) -> bool:
        return bool(_PATHISH.search(key)) or "path" in str(spec.get("description", "")).lower()

    def _placed(self, key: str, spec: dict[str, Any], text: str) -> str:
        """``text`` absolute or relative as the descriptions ask (when the cwd is known)."""
        cwd = self.cwd.rstrip("/")
        if not cwd:
            return text
        desc = str(spec.get("description", ""))
        if text.startswith("/"):
            relative = _RELATIVE.search(desc) and not _ABSOLUTE.search(desc)
            if relative and text.startswith(cwd + "/"):
                return text[len(cwd) + 1 :]
            return text
        if _ABSOLUTE.search(desc) or self._tool_says_absolute(key):
            rel = text.removeprefix("./")
            return cwd if rel in ("", ".") else f"{cwd}/{rel}"
        return text

    def _tool_says_absolute(self, key: str) -> bool:
        named = re.compile(rf"(?<![\w-]){re.escape(key)}(?![\w-])")
        return any(
            _ABSOLUTE.search(s) and named.search(s) for s in _SENTENCES.split(self.description)
        )


# -- helpers ------------------------------------------------------------------------------------
def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    out = {**b, **a}
    if isinstance(a.get("properties"), dict) or isinstance(b.get("properties"), dict):
        out["properties"] = {**(b.get("properties") or {}), **(a.get("properties") or {})}
    req = [*(a.get("required") or ()), *(b.get("required") or ())]
    if req:
        out["required"] = list(dict.fromkeys(req))
    return out


def _types(spec: dict[str, Any]) -> list[str]:
    t = spec.get("type")
    if isinstance(t, str):
        return [t]
    return [str(x) for x in t] if isinstance(t, list) else []


def _kind(spec: dict[str, Any], value: Any) -> str:
    """The JSON type to give: the declared one (the value's own when a type list has it)."""
    listed = _types(spec)
    have = _PY_TYPES.get(type(value))
    if listed:
        if have in listed or (have == "integer" and "number" in listed):
            return "number" if have == "integer" and "integer" not in listed else str(have)
        return next((t for t in listed if t != "null"), listed[0])
    if "properties" in spec:
        return "object"
    if "items" in spec:
        return "array"
    return have or "string"


def _choose(enum: list[Any], value: Any, default: Any) -> Any:
    if any(value == e and type(value) is type(e) for e in enum):
        return value
    if isinstance(value, str) and value:
        low = value.lower()
        named = [e for e in enum if isinstance(e, str) and e.lower() == low]
        if named:
            return named[0]
    return default if default in enum else enum[0]


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(_as_text(v) for v in value)
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return True  # a dialect Python does not read: not checked here


def _number(spec: dict[str, Any], value: Any, kind: str) -> int | float:
    num: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        num = value
    elif isinstance(value, str):
        try:
            num = float(value)
        except ValueError:
            num = None
    default = spec.get("default")
    if num is None and isinstance(default, (int, float)) and not isinstance(default, bool):
        num = default
    num = _clamped(spec, 1 if num is None else num)
    if kind == "integer":
        return round(num)
    return num


def _clamped(spec: dict[str, Any], num: float) -> float:
    lo, hi = spec.get("minimum"), spec.get("maximum")
    ex_lo, ex_hi = spec.get("exclusiveMinimum"), spec.get("exclusiveMaximum")
    if ex_lo is True and isinstance(lo, (int, float)):  # draft 4: a flag on minimum
        ex_lo, lo = lo, None
    if ex_hi is True and isinstance(hi, (int, float)):
        ex_hi, hi = hi, None
    if isinstance(lo, (int, float)) and not isinstance(lo, bool) and num < lo:
        num = lo
    if isinstance(ex_lo, (int, float)) and not isinstance(ex_lo, bool) and num <= ex_lo:
        num = ex_lo + 1
    if isinstance(hi, (int, float)) and not isinstance(hi, bool) and num > hi:
        num = hi
    if isinstance(ex_hi, (int, float)) and not isinstance(ex_hi, bool) and num >= ex_hi:
        num = ex_hi - 1
    return num


def _boolean(spec: dict[str, Any], value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    if value is None:
        return spec.get("default") is True
    return bool(value)
