"""What an agent product's tools can do, read from their names and JSON schemas.

``classify(conv)`` sorts the tools a request offers by capability, whatever the product calls
them: **shell** (a required string ``command``/``cmd``, or an array of strings: Claude Code
``Bash``, Codex ``exec_command``/``shell``, mini-swe-agent ``bash``), **read** (a path and no
old/new strings: ``Read{file_path}``, ``view``, ``read_file{path}``), **edit** (a path with
old and new strings: ``Edit``, ``str_replace``), **patch** (Codex's freeform ``apply_patch``,
whose chat form takes the patch text as ``input``), **grep** and **glob** (a ``pattern``),
**delegate** (Claude Code ``Task``/``Agent`` {description, prompt}; Codex ``spawn_agent``,
``message`` with multi_agent_v1, ``task_name`` + ``message`` with v2; an Agents SDK
agent-as-tool, one required string such as ``input``) and **wait** (``wait_agent``).

``Kit.call(tool, given)`` completes arguments against the tool's schema: every required
property present with a value of its type (an enum's first value, integers as integers,
booleans as booleans), the given values coerced to their declared type, and nothing the
schema does not name (a product's optional extras are passed only where it takes them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentload.endpoint.policy.types import Conversation

__all__ = ["Kit", "Tool", "classify"]

_PATH_KEYS = ("file_path", "path", "filename", "file", "filepath", "target_file")
_OLD_KEYS = ("old_string", "old_str", "old", "old_text", "search")
_NEW_KEYS = ("new_string", "new_str", "new", "new_text", "replace")
_AGENT_INPUT = ("input", "task", "prompt", "message", "request", "query", "question")
_NOT_GREP = re.compile(r"tool|web|image|goal|skill", re.IGNORECASE)


@dataclass(frozen=True)
class Tool:
    """One offered function tool: its name and parameter schema."""

    name: str
    params: dict[str, Any]

    @property
    def props(self) -> dict[str, Any]:
        props = self.params.get("properties")
        return props if isinstance(props, dict) else {}

    @property
    def required(self) -> list[str]:
        req = self.params.get("required")
        return [str(r) for r in req] if isinstance(req, list) else []

    def key(self, names: tuple[str, ...], kind: str = "string") -> str | None:
        """The first of ``names`` this tool takes as a ``kind`` property."""
        return next((n for n in names if n in self.props and _type(self.props[n]) == kind), None)


def _type(spec: Any) -> str:
    t = spec.get("type", "string") if isinstance(spec, dict) else "string"
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "string")
    return str(t)


@dataclass
class Kit:
    """The capabilities of one request's tools (``None``: not offered)."""

    tools: dict[str, Tool] = field(default_factory=dict)
    shell: Tool | None = None
    read: Tool | None = None
    edit: Tool | None = None
    patch: Tool | None = None
    grep: Tool | None = None
    glob: Tool | None = None
    delegate: Tool | None = None
    wait: Tool | None = None

    @property
    def useful(self) -> bool:
        """Whether any tool does coding work (else the conversation gets the plain reply): a
        workspace tool, or a coding agent's delegate tool (an agent offered as a tool alone is
        an app's helper, asked in the plain reply's words)."""
        work = (self.shell, self.read, self.edit, self.patch, self.grep, self.glob)
        return any(work) or self.delegate_style in ("task", "spawn", "spawn2")

    @property
    def delegate_style(self) -> str:
        """``task`` (description + prompt), ``spawn`` (message), ``spawn2`` (task_name +
        message) or ``one`` (one string: an agent as a tool)."""
        d = self.delegate
        if d is None:
            return ""
        if "prompt" in d.props and "description" in d.props:
            return "task"
        if "task_name" in d.props:
            return "spawn2"
        return "spawn" if "message" in d.props else "one"

    def shell_args(self, command: str) -> dict[str, Any]:
        """The shell tool's arguments that run ``command`` (``bash -lc`` for an argv array)."""
        assert self.shell is not None
        key = self.shell.key(("command", "cmd")) or self.shell.key(("command", "cmd"), "array")
        value: Any = command
        if key is not None and _type(self.shell.props[key]) == "array":
            value = ["bash", "-lc", command]
        return {key or "command": value}

    def call(self, tool: Tool, given: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """``(name, arguments)`` of a call of ``tool``, completed and typed by its schema."""
        out = {k: _coerce(v, tool.props[k]) for k, v in given.items() if k in tool.props}
        for k in tool.required:
            if k not in out:
                out[k] = _default(tool.props.get(k) or {})
        return tool.name, out


def _coerce(value: Any, spec: dict[str, Any]) -> Any:
    if not isinstance(spec, dict):
        return value
    enum = spec.get("enum")
    if isinstance(enum, list) and enum and value not in enum:
        return enum[0]
    t = _type(spec)
    if t == "integer" and not isinstance(value, bool):
        return int(value) if isinstance(value, (int, float)) else _default(spec)
    if t == "number" and not isinstance(value, (int, float)):
        return _default(spec)
    if t == "boolean":
        return bool(value)
    if t == "string" and not isinstance(value, str):
        return str(value)
    if t == "array" and not isinstance(value, list):
        return [value]
    return value


def _default(spec: dict[str, Any]) -> Any:
    """A valid value for a required property nobody gave."""
    enum = spec.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    if "default" in spec:
        return spec["default"]
    t = _type(spec)
    if t in ("integer", "number"):
        lo = spec.get("minimum", spec.get("exclusiveMinimum", 0))
        return max(1, int(lo) + (1 if "exclusiveMinimum" in spec else 0))
    return {"boolean": False, "array": [], "object": {}}.get(t, "")


def _is_shell(t: Tool) -> bool:
    key = t.key(("command", "cmd"))
    if key is None:
        arr = t.key(("command", "cmd"), "array")
        return arr is not None and arr in t.required
    return key in t.required and "enum" not in t.props[key]


def _is_patch(t: Tool) -> bool:
    return "patch" in t.name.lower() and len(t.props) == 1 and t.key(("input", "patch")) is not None


def _is_agent_tool(t: Tool) -> bool:
    """An agent offered as a tool: exactly one property, a required string like ``input``."""
    return len(t.props) == 1 and (k := t.key(_AGENT_INPUT)) is not None and k in t.required


def _sort(kit: Kit, t: Tool) -> None:
    low = t.name.lower()
    path = t.key(_PATH_KEYS)
    if _is_shell(t):
        preferred = kit.shell is not None and re.search(r"bash|shell|exec", kit.shell.name, re.I)
        kit.shell = kit.shell if preferred else t
    elif _is_patch(t):
        kit.patch = t
    elif path and t.key(_OLD_KEYS) and t.key(_NEW_KEYS):
        kit.edit = kit.edit or t
    elif {"prompt", "description"} <= set(t.props) or low.startswith("spawn"):
        kit.delegate = t
    elif low.startswith("wait") and "agent" in low:
        kit.wait = t
    elif path and re.search(r"read|view|cat|open", low) and "image" not in low:
        kit.read = kit.read or t
    elif t.key(("pattern",)) and "glob" in low:
        kit.glob = kit.glob or t
    elif t.key(("pattern", "regex")) and re.search(r"grep|search|rg", low):
        kit.grep = kit.grep or (None if _NOT_GREP.search(low) else t)


def classify(conv: Conversation) -> Kit:
    """The capabilities of ``conv``'s offered tools (see the module docstring)."""
    kit = Kit()
    for name in conv.tools:
        params = conv.tool_schemas.get(name, {}).get("parameters")
        kit.tools[name] = Tool(name, params if isinstance(params, dict) else {})
    agents = [t for t in kit.tools.values() if _is_agent_tool(t) and not _is_patch(t)]
    for t in kit.tools.values():
        if t not in agents:
            _sort(kit, t)
    if kit.delegate is None and agents:  # a real delegate tool wins over an agent as a tool
        kit.delegate = agents[0]
    return kit
