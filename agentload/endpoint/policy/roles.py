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
5. **Orchestrator without delegate** — its system message carries the first prompt's
   ``## Repository map`` heading (a scenario whose orchestrator works alone).
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
_REPO_MAP: Final = "## Repository map"


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
    if _REPO_MAP in system:
        return contract.ORCHESTRATOR
    return None
