"""Which of agentload's agents a request comes from, read from what any server sees.

Nothing agentload-specific travels in a request: the simulator recognises an agent the way a
person reading the request would, from the tools it is offered and its system message.
``infer_role(messages, tools)`` applies these rules in order:

1. **Only contract tools.** Every offered tool must be one of ``agentload.contract.TOOLS``
   (by name); a request without tools, or with any other tool, is not one of our agents
   (``None``: the plain reply).
2. **Orchestrator** — it is offered ``delegate``: only the orchestrator may delegate.
3. **A sub-agent by its wording** — its system message names its kind the way the scenario
   presets write it: "You are a code-search sub-agent", "test-runner sub-agent",
   "file-reader sub-agent" (hyphen, underscore or space; any case).
4. **A sub-agent by its tools** — the offered tools are exactly one kind's usual set
   (``contract.SUBAGENT_TOOLS``, in any order).
5. **Orchestrator without delegate** — its first user message starts with the first
   prompt's ``## Repository map`` heading, or (traces recorded before the context moved out of
   the system prompt) its system message carries it: a scenario whose orchestrator works alone.
6. Anything else: ``None`` (the plain reply).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from agentload import contract
from agentload.tokenizer import _content_text

__all__ = ["infer_role"]

_KIND_WORDING: Final = re.compile(
    r"\b(code[-_ ]search|test[-_ ]runner|file[-_ ]reader)[-_ ]sub-?agent\b", re.IGNORECASE
)


def _system_text(messages: Sequence[dict[str, Any]]) -> str:
    first = messages[0] if messages else {}
    if first.get("role") not in ("system", "developer"):
        return ""
    return _content_text(first.get("content"))


def infer_role(messages: Sequence[dict[str, Any]], tools: Sequence[str]) -> str | None:
    """The agentload role a request plays, or ``None`` (rules in the module docstring)."""
    offered = set(tools)
    if not offered or not offered <= set(contract.TOOLS):
        return None
    if contract.DELEGATE in offered:
        return contract.ORCHESTRATOR
    system = _system_text(messages)
    m = _KIND_WORDING.search(system)
    if m is not None:
        return re.sub(r"[- ]", "_", m.group(1).lower())
    for kind, usual in contract.SUBAGENT_TOOLS.items():
        if offered == set(usual):
            return kind
    first_user = _content_text(messages[1].get("content")) if len(messages) > 1 else ""
    if contract.REPO_MAP_HEADING in system or first_user.startswith(contract.REPO_MAP_HEADING):
        return contract.ORCHESTRATOR
    return None
