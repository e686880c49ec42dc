"""What ``agentload generate`` and ``agentload eval`` are asked to do: ``GenerateOptions``,
each field declaring its option (``options.flags``), and the checks across options.

The measurement options (``--gpus``, ``--power``, ``--slo`` ...) are ``MeasureOptions``, the
same fields ``replay`` takes. A value out of range is refused when the options are built (one
line naming the option); ``check_options`` refuses combinations that cannot work, before
anything is created or contacted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator

from agentload.agents.limits import DEFAULT_CALL_TIMEOUT_S
from agentload.errors import ConfigError
from agentload.masking import redact_url
from agentload.options.capacity import CapacityOptions
from agentload.options.cluster import ClusterOptions
from agentload.options.flags import Flag
from agentload.options.load import Levels
from agentload.options.values import (
    MAX_SEED,
    MAX_SESSIONS,
    endpoint_problem,
)
from agentload.scenarios.models import Scenario

__all__ = ["MAX_ATTEMPTS", "GenerateOptions", "check_options"]

MAX_ATTEMPTS = 1000
"""Attempts per eval task (-k)."""
MAX_RETRIES = 100
"""Retries of a failed call (--retries)."""
MAX_CALL_TIMEOUT_S = 86_400.0
"""The longest --call-timeout, s."""


class GenerateOptions(ClusterOptions, CapacityOptions):
    """What ``agentload generate`` was asked to do."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    scenario: Annotated[
        Scenario,
        Flag("Preset name or YAML file.", short="-s", reads=str | None, default="coding-session"),
    ]
    agent: Annotated[
        str,
        Flag(
            "The agent: langgraph (agentload's own), claude-code, codex, mini-swe-agent, aider, or "
            "'cmd:COMMAND LINE' (any agent; it finds the endpoint in OPENAI_BASE_URL / "
            "ANTHROPIC_BASE_URL and the task in AGENTLOAD_TASK). Products run inside the "
            "sandbox, their traffic recorded through agentload's proxy.",
            metavar="NAME",
        ),
    ] = "langgraph"
    """``--agent``: the built-in agents, or an agent product (``products.registry``)."""
    agent_max_tokens: Annotated[
        int | None,
        Flag(
            "Most tokens of one reply of an agent product, where it takes a limit (Claude "
            "Code, mini-swe-agent; not Codex). Default: the product's own.",
            metavar="N",
        ),
    ] = Field(default=None, ge=1, le=1_000_000)
    endpoint: Annotated[
        str | None,
        Flag(
            "OpenAI-compatible base URL (e.g. http://host:8000/v1); default: the built-in "
            "simulator. The API key comes from AGENTLOAD_API_KEY or OPENAI_API_KEY."
        ),
    ] = None
    model: Annotated[str | None, Flag("Model name (default: the endpoint's first model).")] = None
    engine: Annotated[
        str | None,
        Flag(
            "With --endpoint and the built-in agents: the target's engine (docs/engines.md); "
            "dynamo: each agent's calls carry its own Dynamo session id and its parent's."
        ),
    ] = None
    sessions: Annotated[int, Flag("Sessions to run.", short="-n")] = Field(
        default=1, ge=1, le=MAX_SESSIONS
    )
    levels: Levels = Field(default=[1])
    """``--concurrency``/``--parallel``/``-p``: sessions running at once; several levels (``--sweep
    1,4,16``) are the points of a live benchmark, one run of ``--sessions`` each."""
    seed: Annotated[int | None, Flag("Run seed (default: the scenario's).")] = Field(
        default=None, ge=-MAX_SEED, le=MAX_SEED
    )
    out: Annotated[Path, Flag("Directory of the trace file.", short="-o")] = Path("traces")
    sandbox: Annotated[
        Literal["auto", "docker", "local"] | None,
        Flag("Where tools run (default: the scenario's, normally auto)."),
    ] = None
    call_timeout_s: Annotated[
        float,
        Flag(
            "The most one call attempt may take: connecting, the first byte, every gap between "
            "chunks and the whole stream. A stream that stalls, drips or never ends is cut there.",
            name="--call-timeout",
            metavar="SECONDS",
        ),
    ] = Field(default=DEFAULT_CALL_TIMEOUT_S, gt=0, le=MAX_CALL_TIMEOUT_S, allow_inf_nan=False)
    """The most one call attempt may take, first byte to last (``--call-timeout``)."""
    retries: Annotated[int, Flag("Retries of a failed call (0: give up at once).", metavar="N")] = (
        Field(default=3, ge=0, le=MAX_RETRIES)
    )
    """Retries of a failed call (``--retries``); 0 gives up after the first failure."""
    evaluate: Annotated[
        bool, Flag("Run the scenario's success check after each session.", name="--eval")
    ] = False
    tasks: Annotated[
        list[str] | None,
        Flag(
            "Eval tasks of the shipped suite (`agentload scenarios tasks`): all, names or "
            "packages; each runs -k times in its own workspace and sandbox (default: the "
            "scenario's).",
            metavar="all|NAME,...",
            reads=str | None,
        ),
    ] = None
    """Eval tasks (``--tasks``; default: the scenario's ``tasks``): each runs ``attempts``
    times, one session each, instead of ``sessions`` sessions of the scenario."""
    attempts: Annotated[int, Flag("Attempts per task (pass@k).", short="-k")] = Field(
        default=1, ge=1, le=MAX_ATTEMPTS
    )
    """Sessions per task (``-k``)."""
    oracle: Annotated[
        bool,
        Flag(
            "Test mode: the built-in simulator applies each task's reference fix once it has "
            "read the faulty code (refused with --endpoint)."
        ),
    ] = False
    """The built-in simulator applies each task's reference fix (``--oracle``)."""
    keep_workspaces: Annotated[bool, Flag("Keep the sessions' workspace copies.")] = False
    pace: Annotated[
        Literal["fast", "real"],
        Flag(
            "fast: the scenario's modeled waits (a person, a permission prompt: see "
            "docs/realism.md) are drawn and recorded in the trace, not waited for; real: the "
            "agents sleep through them too (a default session then takes about an hour)."
        ),
    ] = "fast"
    """``--pace``: whether the agents sleep through the modeled waits they record."""
    retry_backoff_s: float = 0.5
    simulator: Literal["process", "thread"] = "process"
    """Where the built-in simulator runs: ``process`` (a child process, its own GIL) or
    ``thread`` (in this process)."""

    @field_validator("tasks", mode="before")
    @classmethod
    def _task_list(cls, v: Any) -> Any:
        return v.split(",") if isinstance(v, str) else v

    @property
    def parallel(self) -> int:
        """Sessions running at once in one run: the first level (each point of a sweep runs
        as a copy of the options with its own level alone)."""
        return self.levels[0]

    def task_names(self) -> list[str] | None:
        """The eval tasks the run runs: ``--tasks``, else the scenario's; None: no tasks."""
        return self.tasks if self.tasks is not None else self.scenario.tasks

    def session_plan(self) -> list[tuple[Scenario, str | None, int]]:
        """(scenario, task, attempt) of each session, in order."""
        names = self.task_names()
        if names is None:
            return [(self.scenario, None, 0)] * self.sessions
        from agentload.evals.tasks import select_tasks

        return [
            (self.scenario.for_task(task), task.name, a)
            for task in select_tasks(names)
            for a in range(self.attempts)
        ]


def _check_engine(opts: GenerateOptions, product: bool) -> None:
    """``--engine``: a known preset, for a real endpoint the built-in agents call."""
    if opts.engine is None:
        return
    from agentload.options.engines import get_engine

    get_engine(opts.engine)  # one line for an unknown name
    if not opts.endpoint:
        raise ConfigError("--engine names the target's engine: give --endpoint too")
    if product:
        raise ConfigError(
            "--engine shapes the built-in agents' requests; an agent product sends its own"
        )


def check_options(opts: GenerateOptions) -> None:
    """One-line ``ConfigError`` for option combinations that cannot work."""
    problem = endpoint_problem(opts.endpoint) if opts.endpoint else None
    if problem is not None:
        raise ConfigError(f"--endpoint {redact_url(opts.endpoint or '')}: {problem}")
    tasks = opts.task_names()
    if tasks is None and opts.attempts != 1:
        raise ConfigError("-k counts attempts per task: give --tasks (or a scenario with tasks)")
    if tasks is not None and opts.sessions != 1:
        raise ConfigError("--sessions and --tasks: each task runs -k times; give one of them")
    if opts.oracle and opts.endpoint:
        raise ConfigError(
            "--oracle plays each task's reference fix in the built-in simulator: it is refused "
            "with --endpoint (against a real model the results are the model's own)"
        )
    from agentload.products.registry import product

    chosen = product(opts.agent)  # one line for an unknown name
    _check_engine(opts, chosen is not None)
    if chosen is None and opts.agent_max_tokens is not None:
        raise ConfigError("--agent-max-tokens caps an agent product's replies: give --agent NAME")
    if opts.oracle and tasks is None:
        raise ConfigError("--oracle applies eval tasks' reference fixes: give --tasks")
    if tasks is not None and len(opts.levels) > 1:
        raise ConfigError("--tasks with --sweep: one eval per run; run it once per -p N")
    if tasks is not None:
        from agentload.evals.tasks import select_tasks

        select_tasks(tasks)  # an unknown name is one line now, not after the endpoint
    if opts.capacity:
        given = (
            ("--concurrency/--sweep/--parallel", opts.levels != [1]),
            ("--tasks", tasks is not None),
            ("--ray", opts.ray is not None),
        )
        clash = [o for o, on in given if on]
        if clash:
            raise ConfigError(
                f"--capacity chooses the parallelism of each probe itself; it "
                f"cannot be combined with {', '.join(clash)}"
            )
