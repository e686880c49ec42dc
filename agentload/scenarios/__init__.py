"""Scenarios: what a generated agent session does, on which code, under which limits.

* ``load_scenario(name_or_path, overrides)`` — a shipped preset or a YAML file, ``-c k=v`` overrides
* ``list_scenarios()``, ``scenario_hash(s)``, ``dump_scenario(s)``
* ``agentload.scenarios.workspace.materialise(recipe, dest, fault)`` — the code the agents work on
  (its faults are the eval tasks' of ``agentload.evals.tasks``)
* ``agentload.scenarios.cli`` — ``agentload scenarios list|show|tasks`` (``tasks`` is
  ``agentload.evals.cli``)
"""

from agentload.scenarios.loader import (
    DEFAULT_SCENARIO,
    dump_scenario,
    list_scenarios,
    load_scenario,
    preset_path,
    scenario_hash,
)
from agentload.scenarios.models import (
    EndpointSpec,
    OrchestratorSpec,
    SandboxSpec,
    Scenario,
    SubagentSpec,
    ToolTimeouts,
    WorkspaceSpec,
    parse_size,
)

__all__ = [
    "DEFAULT_SCENARIO",
    "EndpointSpec",
    "OrchestratorSpec",
    "SandboxSpec",
    "Scenario",
    "SubagentSpec",
    "ToolTimeouts",
    "WorkspaceSpec",
    "dump_scenario",
    "list_scenarios",
    "load_scenario",
    "parse_size",
    "preset_path",
    "scenario_hash",
]
