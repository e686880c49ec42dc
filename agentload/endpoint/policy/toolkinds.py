"""What an agent product's tools can do, read from their names and JSON schemas.

``classify(conv)`` sorts the tools a request offers by capability, whatever the product calls
them: **shell** (a required string ``command``/``cmd``, or an array of strings: Claude Code
``Bash``, Codex ``exec_command``/``shell``, mini-swe-agent ``bash``), **read** (a path and no
old/new strings: ``Read{file_path}``, ``view``, ``read_file{path}``, opencode
``read{filePath}``), **edit** (a path with old and new strings: ``Edit``, ``str_replace``,
Gemini CLI ``replace``, opencode ``edit{filePath, oldString, newString}``), **patch** (Codex's
freeform ``apply_patch``, whose chat form takes the patch text as ``input``), **grep** and
**glob** (a ``pattern``),
**delegate** (Claude Code ``Task``/``Agent``, Qwen Code ``agent``, opencode ``task``
{description, prompt}; Gemini CLI ``invoke_agent`` {agent_name, prompt}; Codex ``spawn_agent``,
``message`` with multi_agent_v1, ``task_name`` + ``message`` with v2; an Agents SDK
agent-as-tool, one required string such as ``input``) and **wait** (``wait_agent``).

``Kit.call(tool, given, note)`` makes the arguments valid for the tool's JSON schema
(``argfill.Filler``: required properties present, enums from their list, types as declared,
no empty required string, a path absolute where the tool asks for one, joined to the working
directory ``Kit.cwd``). The delegate tool's agent selector (``subagent_type``, ``agent_name``:
``Kit.selector``) takes one of the kinds ``Kit.agent_kinds`` finds: its enum, else the kinds
listed in the tool's description or the conversation ("Available agent types...: - explore:
...", Gemini's ``<available_subagents>``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from agentload.endpoint.policy.argfill import Filler
from agentload.endpoint.policy.types import Conversation

__all__ = ["NEW_KEYS", "OLD_KEYS", "PATH_KEYS", "Kit", "Tool", "classify", "listed_kinds"]

PATH_KEYS = ("file_path", "path", "filePath", "filename", "file", "filepath", "target_file")
"""A file tool's path property, by the names products give it (opencode's ``filePath``...)."""
OLD_KEYS = ("old_string", "old_str", "oldString", "old", "old_text", "search")
NEW_KEYS = ("new_string", "new_str", "newString", "new", "new_text", "replace")
_AGENT_INPUT = ("input", "task", "prompt", "message", "request", "query", "question")
_NOT_GREP = re.compile(r"tool|web|image|goal|skill", re.IGNORECASE)
_SELECTOR = re.compile(r"^(?:sub_?)?agent_?(?:type|name|kind)$", re.IGNORECASE)
"""The delegate tool's property that names the kind of agent to start."""
_KIND_XML = re.compile(
    r"<(?:sub)?agent>\s*<name>\s*([^<\s]+)\s*</name>\s*(?:<description>(.*?)</description>)?",
    re.DOTALL,
)
_KIND_HEAD = re.compile(r"agent types|sub-?agents|available agents", re.IGNORECASE)
_KIND_ITEM = re.compile(r"^\s*[-*]\s+(?:\*\*)?`?([\w.-]+)`?(?:\*\*)?\s*:\s*(.*)$")


@dataclass(frozen=True)
class Tool:
    """One offered function tool: its name and parameter schema."""

    name: str
    params: dict[str, Any]
    description: str = ""

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
    cwd: str = ""
    """The agent's working directory (absolute paths where a tool asks for them)."""

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
        if "prompt" in d.props and ("description" in d.props or self.selector):
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

    @property
    def selector(self) -> str | None:
        """The delegate tool's property that names the kind of agent (``subagent_type``...)."""
        d = self.delegate
        return next((k for k in d.props if _SELECTOR.match(k)), None) if d else None

    def agent_kinds(self, texts: str) -> list[tuple[str, str]]:
        """The kinds of agent the delegate tool starts, each with what it is for: the
        selector's enum, else those listed in the tool's description, else in ``texts`` (the
        conversation's instructions)."""
        key = self.selector
        if self.delegate is None or key is None:
            return []
        spec = self.delegate.props[key]
        enum = spec.get("enum") if isinstance(spec, dict) else None
        if isinstance(enum, list) and enum:
            listed = dict(listed_kinds(self.delegate.description) or listed_kinds(texts))
            return [(str(e), listed.get(str(e), "")) for e in enum]
        return listed_kinds(self.delegate.description) or listed_kinds(texts)

    def call(self, tool: Tool, given: dict[str, Any], note: str = "") -> tuple[str, dict[str, Any]]:
        """``(name, arguments)`` of a call of ``tool``, made valid for its schema
        (``argfill.Filler``; ``note``: what the call is for, in words)."""
        return tool.name, Filler(tool.params, tool.description, self.cwd, note).fill(given)


def listed_kinds(text: str) -> list[tuple[str, str]]:
    """The agent kinds ``text`` lists: ``<subagent><name>N</name><description>D</description>``
    elements, or the ``- N: D`` items (``**N**`` too) under a line about agent types."""
    found = [(m.group(1), (m.group(2) or "").strip()) for m in _KIND_XML.finditer(text)]
    if found:
        return found
    out: list[tuple[str, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if not _KIND_HEAD.search(line) or _KIND_ITEM.match(line):
            continue
        for item in lines[i + 1 :]:
            m = _KIND_ITEM.match(item)
            if m is None:
                break
            out.append((m.group(1), m.group(2).strip()))
        if out:
            return out
    return out


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


def _is_delegate(t: Tool) -> bool:
    """A tool that starts an agent on a prompt: {description, prompt}, or a prompt and an
    agent selector (``agent_name``)."""
    return "prompt" in t.props and ("description" in t.props or any(map(_SELECTOR.match, t.props)))


def _sort(kit: Kit, t: Tool) -> None:
    low = t.name.lower()
    path = t.key(PATH_KEYS)
    if _is_shell(t):
        preferred = kit.shell is not None and re.search(r"bash|shell|exec", kit.shell.name, re.I)
        kit.shell = kit.shell if preferred else t
    elif _is_patch(t):
        kit.patch = t
    elif path and t.key(OLD_KEYS) and t.key(NEW_KEYS):
        kit.edit = kit.edit or t
    elif _is_delegate(t) or low.startswith("spawn"):
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
        fn = conv.tool_schemas.get(name, {})
        params, desc = fn.get("parameters"), fn.get("description")
        kit.tools[name] = Tool(
            name, params if isinstance(params, dict) else {}, desc if isinstance(desc, str) else ""
        )
    agents = [t for t in kit.tools.values() if _is_agent_tool(t) and not _is_patch(t)]
    for t in kit.tools.values():
        if t not in agents:
            _sort(kit, t)
    if kit.delegate is None and agents:  # a real delegate tool wins over an agent as a tool
        kit.delegate = agents[0]
    return kit
