"""The scenario models: what a generated agent session does, on what code, under which limits.

A scenario is YAML validated by :class:`Scenario`; presets ship in ``presets/``. Every model
forbids unknown keys, so a typo in a file or a ``-c`` override is an error naming the field.
Tool and role names come from ``agentload.contract``, imported lazily so that
``agentload.agents`` may import this package without a cycle.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from agentload import contract
from agentload.errors import ConfigError
from agentload.fitted import Pacing, WaitModel

if TYPE_CHECKING:
    from agentload.evals.tasks import Task

__all__ = [
    "EndpointSpec",
    "OrchestratorSpec",
    "SandboxSpec",
    "Scenario",
    "SubagentSpec",
    "ToolTimeouts",
    "WorkspaceSpec",
    "parse_size",
]

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_size(text: str | int) -> int:
    """Bytes in a size like ``512m``, ``2g``, ``1.5GiB`` or a plain integer."""
    if isinstance(text, int):
        return text
    m = _SIZE_RE.match(text)
    if m is None:
        raise ValueError(f"not a size: {text!r} (use e.g. 512m, 2g)")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_default=True)


class WorkspaceSpec(_Model):
    """Where the code the agents work on comes from."""

    recipe: str = Field(
        default="stdlib:email",
        description="`stdlib:PACKAGE` (a stdlib package + its tests), `path:DIR` or "
        "`git:URL_OR_PATH`; always a copy, never the original",
    )
    fault: str | None = Field(
        default="qp-header-decode",
        description="name of a documented mutation that makes real tests fail (null: none)",
    )

    @field_validator("recipe")
    @classmethod
    def _recipe_kind(cls, v: str) -> str:
        kind, sep, arg = v.partition(":")
        if not sep or kind not in ("stdlib", "path", "git") or not arg:
            raise ValueError("must be stdlib:PACKAGE, path:DIR or git:URL_OR_PATH")
        return v


class OrchestratorSpec(_Model):
    """The agent that holds the task, the plan and the whole history."""

    system_prompt: str = Field(description="instructions, sent as written (nothing is added)")
    initial_context_tokens: int = Field(
        default=60_000,
        gt=0,
        description="budget of the first prompt: instructions, repository map and key files",
    )
    tools: list[str] = Field(
        default_factory=lambda: [*contract.DIRECT_TOOLS, contract.DELEGATE],
        description="tools the orchestrator calls directly (`delegate` hands work to sub-agents)",
    )
    max_parallel_delegations: int = Field(
        default=3, ge=1, description="most sub-agents running at once for one orchestrator"
    )
    max_rounds: int = Field(default=300, ge=1, description="most orchestrator LLM calls")
    delegate_weight: float = Field(
        default=0.02,
        ge=0,
        description="the built-in simulator's pacing: the model's relative odds of delegating "
        "in a round after the first, against its odds of each direct tool "
        "(``PolicyConfig.orchestrator_weights``)",
    )
    whole_file_prob: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="the built-in simulator's reading habit: odds that a direct read_file reads "
        "a whole file (null: the simulator's default, ``PolicyConfig.whole_file_prob``)",
    )
    read_window: tuple[int, int] | None = Field(
        default=None,
        description="the built-in simulator's reading habit: lines before/after a location "
        "that a ranged read_file covers (null: the simulator's default)",
    )
    max_tokens: int = Field(
        default=4096,
        ge=1,
        description="most tokens of one orchestrator reply, sent as `max_tokens` on every call; "
        "a reply cut there is continued, never taken as an answer (see docs/generate.md)",
    )

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        return contract.check_tools(v, contract.ORCHESTRATOR)


class SubagentSpec(_Model):
    """One kind of sub-agent: fresh context, its own tools, one summary back."""

    system_prompt: str = Field(description="instructions, sent as written (nothing is added)")
    tools: list[str] = Field(description="tools this kind may call")
    max_turns: int = Field(default=8, ge=1, description="most LLM calls before it must summarise")
    max_tokens: int = Field(
        default=2048,
        ge=1,
        description="most tokens of one reply of this kind, sent as `max_tokens` on every call",
    )

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, v: list[str]) -> list[str]:
        # the tools a sub-agent role may be given (contract.TOOLS[...].roles)
        return contract.check_tools(v, *contract.SUBAGENT_ROLES)


class ToolTimeouts(_Model):
    """Seconds each tool may run before it is killed (the model then sees a timeout message)."""

    search_code: float = Field(default=30.0, gt=0, description="regex search over the workspace")
    read_file: float = Field(default=10.0, gt=0, description="reading one file")
    list_files: float = Field(default=10.0, gt=0, description="listing a directory")
    run_tests: float = Field(default=120.0, gt=0, description="the test command in the sandbox")
    edit_file: float = Field(default=10.0, gt=0, description="one exact-string replacement")

    def for_tool(self, name: str) -> float:
        """The timeout of tool ``name`` (its ``ToolSpec.timeout_key`` in ``agentload.contract``)."""
        key = contract.TOOLS[name].timeout_key
        if key is None:
            raise ValueError(f"{name} has no tool timeout (it is bounded by its own limits)")
        return float(getattr(self, key))


class SandboxSpec(_Model):
    """Where tools execute and under which limits."""

    kind: Literal["auto", "docker", "local"] = Field(
        default="auto",
        description="auto: Docker when a daemon answers, else local (announced with a warning)",
    )
    image: str | None = Field(
        default=None,
        description="Docker image; null: the offline image built from the host's Python",
    )
    memory: str = Field(default="2g", description="memory cap of the sandbox (e.g. 512m, 2g)")
    cpus: float = Field(default=2.0, gt=0, le=1024, description="CPU cap (Docker nano-CPUs)")
    pids: int = Field(default=512, ge=16, description="most processes in the sandbox")
    disk: str = Field(
        default="2g",
        description="disk quota of what a session writes into its workspace (and private "
        "HOME and temp folders), e.g. 512m, 2g: past it the command is killed and the session "
        "ends disk_quota",
    )

    @field_validator("memory", "disk")
    @classmethod
    def _size(cls, v: str) -> str:
        if parse_size(v) < 32 * 1024**2:
            raise ValueError("must be at least 32m")
        if parse_size(v) > 1024**4:
            raise ValueError("must be at most 1t")
        return v

    def memory_bytes(self) -> int:
        """The memory cap in bytes."""
        return parse_size(self.memory)

    def disk_bytes(self) -> int:
        """The disk quota in bytes."""
        return parse_size(self.disk)


class EndpointSpec(_Model):
    """The endpoint used when ``generate`` gets no ``--endpoint``."""

    profile: str = Field(default="instant", description="built-in simulator profile name")


class Scenario(_Model):
    """One generated agent session: task, workspace, agents, limits and seed."""

    name: str = Field(description="short name, shown in traces and reports")
    description: str = Field(default="", description="one paragraph for `scenarios list`")
    task: str = Field(description="the user's request, the orchestrator's first user message")
    follow_ups: list[str] = Field(
        default_factory=list,
        description="the user's next requests: when the orchestrator answers (no tool calls) "
        "before the context target, the next one is sent as a new user message, as a person "
        "keeps a coding-agent session going; with none left, the answer ends the session",
    )
    workspace: WorkspaceSpec = Field(default_factory=WorkspaceSpec, description="the code")
    tasks: list[str] | None = Field(
        default=None,
        description="eval tasks of the shipped suite (`agentload scenarios tasks`): `all`, a "
        "name, a package or a list; each session then runs one task's issue text on its "
        "faulted workspace and test suite instead of task/workspace/test_command (null: none)",
    )
    test_command: list[str] = Field(
        min_length=1, description="argv of the full test run, executed in /workspace"
    )
    test_target_command: list[str] | None = Field(
        default=None,
        description="argv for a narrowed run; `{target}` is replaced by run_tests' target "
        "(null: run_tests ignores targets and runs test_command)",
    )
    orchestrator: OrchestratorSpec = Field(description="the top-level agent")
    subagents: dict[str, SubagentSpec] = Field(
        description="sub-agent kinds by role: code_search, test_runner, file_reader"
    )
    context_target: int = Field(
        default=400_000,
        gt=0,
        description="stop when the orchestrator's server-reported prompt tokens reach this",
    )
    tool_descriptions: dict[str, str] = Field(
        default_factory=dict,
        description="the description the model reads, by tool name, instead of the one-line "
        "default: the full manual a real agent product sends (`!include FILE` in YAML reads it "
        "from a file next to the scenario; null: none, also over inherited ones)",
    )
    tool_output_max_chars: int = Field(
        default=30_000, ge=200, description="tool output beyond this is cut (head + tail kept)"
    )
    tool_timeouts_s: ToolTimeouts = Field(
        default_factory=ToolTimeouts, description="per-tool timeouts in seconds"
    )
    sandbox: SandboxSpec = Field(default_factory=SandboxSpec, description="sandbox settings")
    seed: int = Field(default=0, description="seed of every random choice in the session")
    wall_budget_s: float = Field(
        default=900.0, gt=0, description="a session ends cleanly after this much wall time"
    )
    endpoint: EndpointSpec = Field(
        default_factory=EndpointSpec, description="default endpoint settings"
    )
    waits: WaitModel | None = Field(
        default=None,
        description="modeled waits (agentload.fitted): the gap before each call drawn from "
        "distributions fitted to real sessions, recorded as llm_call.wait_ns (slept only with "
        "`generate --pace real`); null: none",
    )
    pacing: Pacing | None = Field(
        default=None,
        description="the built-in simulator's pacing fitted to real sessions: calls per user "
        "turn (the model answers, the next follow-up comes) and calls per sub-agent; null: "
        "the model works on until the context target",
    )
    by_design: dict[str, str] = Field(
        default_factory=dict,
        description="realism statistics (docs/realism.md) this scenario departs from real "
        "sessions on purpose, and why: `agentload realism` shows them as by design",
    )

    @field_validator("subagents")
    @classmethod
    def _known_kinds(
        cls, v: dict[str, SubagentSpec], info: ValidationInfo
    ) -> dict[str, SubagentSpec]:
        unknown = sorted(set(v) - set(contract.SUBAGENT_ROLES))
        if unknown:
            raise ValueError(
                f"unknown sub-agent kind {unknown[0]!r}; valid: {', '.join(contract.SUBAGENT_ROLES)}"
            )
        orch = info.data.get("orchestrator")
        if isinstance(orch, OrchestratorSpec) and contract.DELEGATE in orch.tools and not v:
            raise ValueError("orchestrator.tools has `delegate`: define at least one kind")
        return v

    @field_validator("tasks", mode="before")
    @classmethod
    def _task_list(cls, v: object) -> object:
        return v.split(",") if isinstance(v, str) else v

    @field_validator("tasks")
    @classmethod
    def _known_tasks(cls, v: list[str] | None) -> list[str] | None:
        if v is not None:
            from agentload.evals.tasks import select_tasks

            try:
                select_tasks(v)
            except ConfigError as exc:
                raise ValueError(str(exc).removeprefix("tasks: ")) from None
        return v

    def for_task(self, task: Task) -> Scenario:
        """This scenario on ``task``: its issue text (no follow-ups: the answer ends the
        session), its faulted workspace and its suite as the test commands."""
        return self.model_copy(
            update={
                "task": task.issue,
                "follow_ups": [],
                "workspace": WorkspaceSpec(recipe=task.recipe, fault=task.name),
                "test_command": task.test_command(),
                "test_target_command": task.test_command("{target}"),
                "tasks": None,
            }
        )

    @field_validator("tool_descriptions", "by_design", mode="before")
    @classmethod
    def _null_is_none(cls, v: object) -> object:
        # `tool_descriptions: null` (or `by_design: null`) in a file that `extends` another drops
        # the inherited ones
        # (an empty mapping would merge into them and keep them)
        return {} if v is None else v

    @field_validator("tool_descriptions")
    @classmethod
    def _known_described_tools(cls, v: dict[str, str]) -> dict[str, str]:
        for name, text in v.items():
            if name not in contract.TOOLS:
                raise ValueError(f"unknown tool {name!r}; valid: {', '.join(contract.TOOLS)}")
            if not text.strip():
                raise ValueError(f"{name}: empty; leave the tool out to keep its default")
        return v

    @field_validator("test_target_command")
    @classmethod
    def _has_placeholder(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not any("{target}" in a for a in v):
            raise ValueError("must contain a `{target}` placeholder")
        return v

    @field_validator("follow_ups")
    @classmethod
    def _non_empty_follow_ups(cls, v: list[str]) -> list[str]:
        for i, text in enumerate(v):
            if not text.strip():
                raise ValueError(f"item {i} is empty; a follow-up is a request the user sends")
        return v

    @field_validator("context_target")
    @classmethod
    def _above_initial(cls, v: int, info: ValidationInfo) -> int:
        orch = info.data.get("orchestrator")
        if isinstance(orch, OrchestratorSpec) and v <= orch.initial_context_tokens:
            raise ValueError(
                f"must exceed orchestrator.initial_context_tokens ({orch.initial_context_tokens})"
            )
        return v
