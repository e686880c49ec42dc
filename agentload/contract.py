"""The agent/tool vocabulary shared by agentload's agents, tools, scenarios and the simulator.

This module sits on the ground floor (it imports nothing of agentload), so every package may use
it; nothing else may hard-code a role or tool name. Nothing of this vocabulary is sent to an
endpoint beyond what any agent sends (tool schemas, its own prompts): the simulator recognises
an agentload agent from the tools it is offered and its prompt's wording
(``agentload.endpoint.policy.roles``).

* **Roles.** ``orchestrator`` holds the task and the whole history; its tools are the direct tools
  plus ``delegate``. Its session ends when its prompt reaches the scenario's ``context_target``
  tokens, after ``max_rounds`` calls, or when it answers without tool calls (the task done).
  The sub-agent roles ``code_search``, ``test_runner`` and ``file_reader`` each start from a fresh
  context (system prompt + the task text as the user message) and end with one assistant message
  without tool calls: the summary that becomes the ``delegate`` tool result.
* **Tools.** ``TOOLS`` is the one registry: one :class:`ToolSpec` per tool (name, description,
  argument schema, the scenario's timeout key, which roles may call it). ``Toolbox`` dispatches
  from it, the scenario model validates tool lists against it, the simulator's policy reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "CODE_SEARCH",
    "DELEGATE",
    "DIRECT_TOOLS",
    "EDIT_FILE",
    "FILE_READER",
    "LIST_FILES",
    "ORCHESTRATOR",
    "READ_FILE",
    "REPO_MAP_HEADING",
    "ROLES",
    "RUN_TESTS",
    "SEARCH_CODE",
    "SUBAGENT_ROLES",
    "SUBAGENT_TOOLS",
    "TASK_HEADING",
    "TEST_RUNNER",
    "TOOLS",
    "TOOL_SCHEMAS",
    "ToolSpec",
    "check_tools",
    "tool_schemas",
]

ORCHESTRATOR: Final = "orchestrator"
CODE_SEARCH: Final = "code_search"
TEST_RUNNER: Final = "test_runner"
FILE_READER: Final = "file_reader"
SUBAGENT_ROLES: Final = (CODE_SEARCH, TEST_RUNNER, FILE_READER)
ROLES: Final = (ORCHESTRATOR, *SUBAGENT_ROLES)

REPO_MAP_HEADING: Final = "## Repository map"
"""The heading of the repository context the orchestrator's first user message starts with
(``agents.first_prompt``; the simulator's policy reads the map and the files under it)."""
TASK_HEADING: Final = "## Task"
"""The heading between that context and the user's request in the same message."""

SEARCH_CODE: Final = "search_code"
READ_FILE: Final = "read_file"
LIST_FILES: Final = "list_files"
RUN_TESTS: Final = "run_tests"
EDIT_FILE: Final = "edit_file"
DELEGATE: Final = "delegate"


@dataclass(frozen=True)
class ToolSpec:
    """One tool of the contract. Satisfies ``agentload.protocols.Tool``."""

    name: str
    """The name the model calls it by."""
    description: str
    """The description the model reads."""
    properties: dict[str, Any]
    """JSON-schema properties of its arguments (an object; no other keys allowed)."""
    required: tuple[str, ...] = ()
    """Arguments that must be present."""
    timeout_key: str | None = None
    """The field of the scenario's ``tool_timeouts_s`` that bounds it; None for ``delegate``,
    which is bounded by the sub-agent's own limits."""
    roles: tuple[str, ...] = ROLES
    """Roles that may be given this tool in a scenario."""
    _schema: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        schema = {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object",
                    "properties": self.properties,
                    "required": list(self.required),
                    "additionalProperties": False,
                },
            },
        }
        object.__setattr__(self, "_schema", schema)

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry (the same object each call: do not mutate it)."""
        return self._schema


TOOLS: Final[dict[str, ToolSpec]] = {
    s.name: s
    for s in (
        ToolSpec(
            SEARCH_CODE,
            "Search the repository with a regular expression. Returns `path:line: text` hits, "
            "capped.",
            {
                "pattern": {"type": "string", "description": "Python regular expression"},
                "path": {
                    "type": "string",
                    "description": "directory or file to search, relative to the repository root",
                },
                "max_results": {"type": "integer", "description": "cap on hits (default 50)"},
            },
            ("pattern",),
            timeout_key="search_code",
        ),
        ToolSpec(
            READ_FILE,
            "Read a file of the repository, optionally a 1-based inclusive line range.",
            {
                "path": {"type": "string", "description": "path relative to the repository root"},
                "start_line": {"type": "integer"},
                "end_line": {"type": "integer"},
            },
            ("path",),
            timeout_key="read_file",
        ),
        ToolSpec(
            LIST_FILES,
            "List files under a directory of the repository.",
            {
                "path": {
                    "type": "string",
                    "description": "directory relative to the repository root",
                }
            },
            timeout_key="list_files",
        ),
        ToolSpec(
            RUN_TESTS,
            "Run the repository's test command (optionally narrowed to a target) and return its "
            "output.",
            {
                "target": {
                    "type": "string",
                    "description": "test module, class or test id to narrow the run",
                }
            },
            timeout_key="run_tests",
        ),
        ToolSpec(
            EDIT_FILE,
            "Replace one exact occurrence of `old` with `new` in a file.",
            {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}},
            ("path", "old", "new"),
            timeout_key="edit_file",
        ),
        ToolSpec(
            DELEGATE,
            "Hand a sub-task to a sub-agent that starts from a fresh context and returns one "
            "summary.",
            {
                "kind": {"type": "string", "enum": list(SUBAGENT_ROLES)},
                "task": {"type": "string", "description": "what the sub-agent must find out or do"},
            },
            ("kind", "task"),
            roles=(ORCHESTRATOR,),
        ),
    )
}

DIRECT_TOOLS: Final = tuple(n for n, s in TOOLS.items() if s.timeout_key is not None)
"""The tools that run on the workspace (everything but ``delegate``), in registry order."""
SUBAGENT_TOOLS: Final[dict[str, tuple[str, ...]]] = {
    CODE_SEARCH: (SEARCH_CODE, READ_FILE, LIST_FILES),
    TEST_RUNNER: (RUN_TESTS, READ_FILE),
    FILE_READER: (READ_FILE, LIST_FILES),
}
"""Each sub-agent role's usual tools, in the order the shipped presets offer them."""
TOOL_SCHEMAS: Final[dict[str, dict[str, Any]]] = {n: s.schema() for n, s in TOOLS.items()}


def tool_schemas(
    names: tuple[str, ...] | list[str], descriptions: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The OpenAI ``tools`` list for the given tool names, in that order; ``descriptions``
    replaces a tool's description by name (a scenario's ``tool_descriptions``: the full manual
    a real agent product sends instead of the one-line default)."""
    out = []
    for n in names:
        schema = TOOLS[n].schema()
        text = descriptions.get(n) if descriptions else None
        if text is not None:
            schema = {**schema, "function": {**schema["function"], "description": text}}
        out.append(schema)
    return out


def check_tools(names: list[str], *roles: str) -> list[str]:
    """``names`` when each is a tool that one of ``roles`` may be given, and none is listed
    twice; else ValueError naming the valid ones."""
    valid = [n for n, s in TOOLS.items() if set(roles) & set(s.roles)]
    for n in names:
        if n not in valid:
            raise ValueError(f"unknown tool {n!r}; valid: {', '.join(valid)}")
    if len(set(names)) != len(names):
        raise ValueError("a tool is listed twice")
    return names
