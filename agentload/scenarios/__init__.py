"""Scenarios: what a generated agent session does, on which code, under which limits.

* ``load_scenario(name_or_path, overrides)`` — a shipped preset or a YAML file, ``-c k=v`` overrides
* ``list_scenarios()``, ``scenario_hash(s)``, ``dump_scenario(s)``
* ``agentload.scenarios.workspace.materialise(recipe, dest, fault)`` — the code the agents work on
* ``agentload.scenarios.tasks`` — the eval task suite (``presets/tasks/*.yaml``), its suite
  runner; ``taskcheck`` — its self-check (``agentload scenarios tasks --check``)
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
