"""The agent-facing contract shared by agentload's agents and the simulator's policy.

Both sides import these names; nothing else may hard-code them. The simulator recognises an
agentload agent by the role marker in its system prompt (``marker(role, ...)``), and knows the
tools by the names and argument schemas below.

* Orchestrator: role ``orchestrator``; tools: the direct tools plus ``delegate``. It stops
  (answers without tool calls) when its prompt reaches ``context_target`` tokens, when the
  marker's ``max_rounds`` is reached, or when the task is done.
* Sub-agents: roles ``code_search``, ``test_runner``, ``file_reader``; each starts from a fresh
  context (its system prompt + the task text as the user message) and ends with one assistant
  message without tool calls: the summary that becomes the ``delegate`` tool result.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = [
    "DELEGATE",
    "DIRECT_TOOLS",
    "EDIT_FILE",
    "LIST_FILES",
    "MARKER_RE",
    "READ_FILE",
    "ROLES",
    "RUN_TESTS",
    "SEARCH_CODE",
    "SUBAGENT_ROLES",
    "SUBAGENT_TOOLS",
    "TOOL_SCHEMAS",
    "marker",
    "parse_marker",
    "tool_schemas",
]

ORCHESTRATOR: Final = "orchestrator"
CODE_SEARCH: Final = "code_search"
TEST_RUNNER: Final = "test_runner"
FILE_READER: Final = "file_reader"
SUBAGENT_ROLES: Final = (CODE_SEARCH, TEST_RUNNER, FILE_READER)
ROLES: Final = (ORCHESTRATOR, *SUBAGENT_ROLES)

SEARCH_CODE: Final = "search_code"
READ_FILE: Final = "read_file"
LIST_FILES: Final = "list_files"
RUN_TESTS: Final = "run_tests"
EDIT_FILE: Final = "edit_file"
DELEGATE: Final = "delegate"

DIRECT_TOOLS: Final = (SEARCH_CODE, READ_FILE, LIST_FILES, RUN_TESTS, EDIT_FILE)
SUBAGENT_TOOLS: Final[dict[str, tuple[str, ...]]] = {
    CODE_SEARCH: (SEARCH_CODE, READ_FILE, LIST_FILES),
    TEST_RUNNER: (RUN_TESTS, READ_FILE, SEARCH_CODE),
    FILE_READER: (READ_FILE, LIST_FILES),
}


def _fn(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOL_SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    SEARCH_CODE: _fn(
        SEARCH_CODE,
        "Search the repository with a regular expression. Returns `path:line: text` hits, capped.",
        {
            "pattern": {"type": "string", "description": "Python regular expression"},
            "path": {
                "type": "string",
                "description": "directory or file to search, relative to the repository root",
            },
            "max_results": {"type": "integer", "description": "cap on hits (default 50)"},
        },
        ["pattern"],
    ),
    READ_FILE: _fn(
        READ_FILE,
        "Read a file of the repository, optionally a 1-based inclusive line range.",
        {
            "path": {"type": "string", "description": "path relative to the repository root"},
            "start_line": {"type": "integer"},
            "end_line": {"type": "integer"},
        },
        ["path"],
    ),
    LIST_FILES: _fn(
        LIST_FILES,
        "List files under a directory of the repository.",
        {"path": {"type": "string", "description": "directory relative to the repository root"}},
        [],
    ),
    RUN_TESTS: _fn(
        RUN_TESTS,
        "Run the repository's test command (optionally narrowed to a target) and return its output.",
        {
            "target": {
                "type": "string",
                "description": "test module, class or test id to narrow the run",
            }
        },
        [],
    ),
    EDIT_FILE: _fn(
        EDIT_FILE,
        "Replace one exact occurrence of `old` with `new` in a file.",
        {
            "path": {"type": "string"},
            "old": {"type": "string"},
            "new": {"type": "string"},
        },
        ["path", "old", "new"],
    ),
    DELEGATE: _fn(
        DELEGATE,
        "Hand a sub-task to a sub-agent that starts from a fresh context and returns one summary.",
        {
            "kind": {"type": "string", "enum": list(SUBAGENT_ROLES)},
            "task": {"type": "string", "description": "what the sub-agent must find out or do"},
        },
        ["kind", "task"],
    ),
}


def tool_schemas(names: tuple[str, ...] | list[str]) -> list[dict[str, Any]]:
    """The OpenAI ``tools`` list for the given tool names, in that order."""
    return [TOOL_SCHEMAS[n] for n in names]


# The marker goes on the first line of an agent's system prompt, e.g.
# ``[agentload role=orchestrator context_target=400000 max_rounds=300]``.
MARKER_RE: Final = re.compile(
    r"\[agentload role=(?P<role>[a-z_]+)(?P<attrs>(?: [a-z_]+=[^\s\]]+)*)\]"
)


def marker(role: str, **attrs: int | str) -> str:
    """The role marker line for an agent's system prompt."""
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}; valid: {', '.join(ROLES)}")
    extra = "".join(f" {k}={v}" for k, v in attrs.items())
    return f"[agentload role={role}{extra}]"


def parse_marker(system_prompt: str) -> tuple[str, dict[str, str]] | None:
    """``(role, attrs)`` when the text carries an agentload role marker, else ``None``."""
    m = MARKER_RE.search(system_prompt)
    if m is None or m.group("role") not in ROLES:
        return None
    attrs = dict(kv.split("=", 1) for kv in m.group("attrs").split())
    return m.group("role"), attrs
