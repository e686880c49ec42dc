"""The one error tree of agentload.

Every error a user can cause (bad input file, bad config, unreachable endpoint, missing Docker
daemon ...) is an ``AgentloadError``; the CLI prints its message as one line on stderr and exits
with code 2. Anything else that escapes is a bug and shows a traceback.

    AgentloadError
     ├── ConfigError            bad scenario / profile / CLI option values
     │    └── ScenarioError     a scenario file or preset that does not validate
     ├── TraceFormatError       a trace file that cannot be read (names file:line and field)
     │    └── SchemaVersionError  a trace written by an unknown major schema version
     ├── TokenizerError         a tokenizer that cannot be loaded
     ├── SandboxError           Docker / local sandbox failures (names the container)
     │    └── DockerUnavailableError  no Docker daemon answers
     ├── WorkspaceError         a workspace recipe that cannot be materialised
 ├── AgentProductError      an agent product (--agent) that cannot be installed or started
     ├── WireError              a request or answer body of an LLM API that cannot be read
     ├── EndpointError          an OpenAI-compatible endpoint misbehaves (names the URL)
     │    ├── EndpointUnreachableError
     │    └── ModelNotFoundError
     └── ReplayError            a replay that cannot run as configured
          └── ResultsFormatError  a results.json that cannot be read (names the file and field)

Context is attached where the error crosses a boundary, so the message alone tells the user
what to fix: ``run.agentload.jsonl.zst:123: llm_call.usage.prompt_tokens: ...``.
"""

from __future__ import annotations

__all__ = [
    "AgentProductError",
    "AgentloadError",
    "ConfigError",
    "DockerUnavailableError",
    "EndpointError",
    "EndpointUnreachableError",
    "ModelNotFoundError",
    "OutputStreamError",
    "ReplayError",
    "ResultsFormatError",
    "SandboxError",
    "ScenarioError",
    "SchemaVersionError",
    "TokenizerError",
    "TraceFormatError",
    "WireError",
    "WorkspaceError",
]


class AgentloadError(Exception):
    """Base of every error a user can cause; the CLI prints it as one line and exits 2."""


class OutputStreamError(AgentloadError, OSError):
    """Standard output cannot be written (closed, a full disk, ``/dev/full``). An ``OSError``
    too, built as ``OutputStreamError(errno, message)``: code that survives a failed write
    (``logging``) still does; its message is ``args[1]``."""

    def __str__(self) -> str:
        return str(self.args[1]) if len(self.args) > 1 else super().__str__()


class ConfigError(AgentloadError):
    """A configuration value (CLI option, profile, override) is invalid."""


class ScenarioError(ConfigError):
    """A scenario file or preset does not validate."""


class WireError(AgentloadError):
    """A request or answer body of an LLM API (Chat Completions, Responses, Messages) cannot be
    read; the message names the field (``messages[3].content[0].type: ...``)."""


class TraceFormatError(AgentloadError):
    """A trace file cannot be read; the message names ``file:line`` and the field path."""


class SchemaVersionError(TraceFormatError):
    """A trace was written with a major schema version this reader does not know."""


class TokenizerError(AgentloadError):
    """A tokenizer cannot be loaded."""


class SandboxError(AgentloadError):
    """A sandbox (Docker container or local subprocess) failed; names the container."""


class DockerUnavailableError(SandboxError):
    """No Docker daemon answers."""


class WorkspaceError(AgentloadError):
    """A workspace recipe cannot be materialised."""


class AgentProductError(AgentloadError):
    """An agent product (``generate --agent``) cannot be installed or started."""


class EndpointError(AgentloadError):
    """An OpenAI-compatible endpoint misbehaved; the message names the URL."""


class EndpointUnreachableError(EndpointError):
    """The endpoint does not answer."""


class ModelNotFoundError(EndpointError):
    """The endpoint does not serve the requested model."""


class ReplayError(AgentloadError):
    """A replay cannot run as configured."""


class ResultsFormatError(ReplayError):
    """A replay results file cannot be read: not JSON, not a results file, another major
    schema version, or a field missing or malformed; the message names the file and field."""
