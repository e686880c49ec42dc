"""The Toolbox: the five tools of a session, bound to its sandbox, workspace and scenario.

``await toolbox.call(name, arguments)`` never raises for a tool's own failure (bad arguments,
missing file, bad regex, timeout, a sandbox that died): the failure becomes ``error: ...`` text the
model reads, and ``ToolResult.error`` says the same for the recorder.

Whatever the model sends is checked here, once, against the tool's ``ToolSpec`` before any tool
sees it (:func:`_parse_args`): a JSON object with only the spec's keys, each required one present,
each value of its schema type (``enum`` respected); every string is valid Unicode (no lone
surrogates), has no NUL character and at most ``MAX_ARG_CHARS`` characters. Paths are checked
where they are resolved (``text.workspace_path``). Error messages are cut like any tool output.

Where each tool runs: ``run_tests`` and ``search_code`` execute in the sandbox (bounded by the
scenario's per-tool timeouts); ``read_file``, ``list_files`` and ``edit_file`` are served on the
host from the workspace directory, which is the sandbox's ``/workspace`` bind mount.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentload import contract
from agentload.errors import SandboxError
from agentload.protocols import Sandbox
from agentload.scenarios.models import Scenario
from agentload.tools import files, wsfs
from agentload.tools.arguments import read_arguments
from agentload.tools.result import ToolError, ToolResult
from agentload.tools.search import check_pattern, search_argv
from agentload.tools.text import normalise_test_output, truncate_head_tail, workspace_path

__all__ = ["MAX_ARG_CHARS", "TOOL_NAMES", "Toolbox"]

TOOL_NAMES = contract.DIRECT_TOOLS
MAX_ARG_CHARS = 1_000_000
"""The longest string argument any tool takes (``edit_file``'s ``old``/``new`` may be big)."""
_TARGET_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./:\-\[\]]*$")
_TARGET_MAX = 1000
_SAFETY_S = 15.0  # on top of a sandboxed tool's own timeout: the exec bounds itself before this


@dataclass
class _Out:
    text: str
    exit_code: int | None = None
    raw_bytes: int | None = None
    cut: bool = False
    timed_out: bool = False
    sandbox_id: str | None = None


class Toolbox:
    """The tools of one session."""

    def __init__(self, sandbox: Sandbox, workspace_root: Path, scenario: Scenario) -> None:
        self.sandbox = sandbox
        self.workspace_root = Path(workspace_root)
        self.scenario = scenario
        self.over_limit: str | None = None
        """Set when a command passed a sandbox limit that ends the session (its disk quota):
        the agent loop ends the session with it after recording the call."""
        # one handler per direct tool of the contract's registry: the method named ``_<tool>``
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[_Out]]] = {
            name: getattr(self, f"_{name}") for name in contract.DIRECT_TOOLS
        }

    @property
    def names(self) -> tuple[str, ...]:
        """The tools this toolbox runs."""
        return tuple(self._handlers)

    def schemas(self, names: tuple[str, ...] | list[str] | None = None) -> list[dict[str, Any]]:
        """OpenAI tool schemas (``agentload.contract.TOOLS``) for ``names`` (default: all five)."""
        return contract.tool_schemas(list(names) if names is not None else list(self.names))

    async def call(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """Run tool ``name``; its failures come back as text, never as exceptions."""
        start = time.perf_counter_ns()
        cap = self.scenario.tool_output_max_chars
        try:
            handler = self._handlers.get(name) if isinstance(name, str) else None
            if handler is None:
                shown, _ = truncate_head_tail(repr(name), 200)
                raise ToolError(f"unknown tool {shown}; available: {', '.join(self.names)}")
            out = await handler(_parse_args(contract.TOOLS[name], arguments))
        except ToolError as exc:
            return _failure(str(exc), start, cap, timed_out=exc.timed_out)
        except SandboxError as exc:
            return _failure(f"sandbox: {exc}", start, cap, sandbox_id=self.sandbox.id)
        except OSError as exc:
            return _failure(f"{exc.strerror or exc}", start, cap)
        text, cut = truncate_head_tail(out.text, self.scenario.tool_output_max_chars)
        raw = out.raw_bytes if out.raw_bytes is not None else len(out.text.encode())
        return ToolResult(
            text=text,
            start_ns=start,
            end_ns=time.perf_counter_ns(),
            exit_code=out.exit_code,
            output_bytes=raw,
            truncated=cut or out.cut,
            timed_out=out.timed_out,
            error=None,
            sandbox_id=out.sandbox_id,
        )

    # host-side tools ---------------------------------------------------------------------------

    async def _on_host(self, name: str, fn: Callable[..., str], *args: Any) -> _Out:
        limit = self.scenario.tool_timeouts_s.for_tool(name)
        try:
            text = await asyncio.wait_for(asyncio.to_thread(fn, self.workspace_root, *args), limit)
        except TimeoutError:
            raise ToolError(f"{name} timed out after {limit:g}s", timed_out=True) from None
        return _Out(text)

    async def _list_files(self, a: dict[str, Any]) -> _Out:
        return await self._on_host(contract.LIST_FILES, files.list_files, a.get("path"))

    async def _edit_file(self, a: dict[str, Any]) -> _Out:
        return await self._on_host(
            contract.EDIT_FILE, files.edit_file, a["path"], a["old"], a["new"]
        )

    # sandboxed tools ---------------------------------------------------------------------------

    async def _exec(self, name: str, argv: list[str]) -> tuple[Any, float]:
        limit = self.scenario.tool_timeouts_s.for_tool(name)
        call = asyncio.to_thread(self.sandbox.exec, argv, timeout_s=limit)
        try:
            res = await asyncio.wait_for(call, limit + _SAFETY_S)
        except TimeoutError:
            raise ToolError(
                f"{name}: the sandbox did not answer within {limit:g}s", timed_out=True
            ) from None
        if res.over_limit is not None:
            self.over_limit = res.over_limit
        return res, limit

    async def _read_file(self, a: dict[str, Any]) -> _Out:
        # checked on the host, read by a command in the sandbox: each read costs what it costs
        # a sandboxed harness (a process started in the sandbox), and sees the sandbox's files
        shown = workspace_path(self.workspace_root, a["path"])
        files.check_file(self.workspace_root, shown)
        res, limit = await self._exec(contract.READ_FILE, ["cat", "--", shown])
        if res.timed_out:
            raise ToolError(f"read_file timed out after {limit:g}s", timed_out=True)
        if res.exit_code != 0 or res.dropped_bytes:
            said = res.output.decode("utf-8", errors="replace").strip().splitlines()[-1:]
            raise ToolError(
                f"{shown}: cannot read (exit code {res.exit_code}): {said[0][:300] if said else 'no output'}"
            )
        text = files.lines_of(
            files.decode(res.output, shown), shown, a.get("start_line"), a.get("end_line")
        )
        return _Out(text, res.exit_code, len(res.output), sandbox_id=self.sandbox.id)

    async def _search_code(self, a: dict[str, Any]) -> _Out:
        pattern: str = a["pattern"]
        check_pattern(pattern)
        shown = workspace_path(self.workspace_root, a.get("path"))
        if wsfs.kind_of(self.workspace_root, shown)[0] is wsfs.Kind.MISSING:
            raise ToolError(f"{shown}: no such file or directory")
        cap = max(1, min(int(a.get("max_results") or 50), 500))
        res, limit = await self._exec(contract.SEARCH_CODE, search_argv(pattern, shown, cap))
        raw = res.output.decode("utf-8", errors="replace")
        if res.timed_out:
            raise ToolError(
                f"search timed out after {limit:g}s (simplify the pattern or narrow the path)",
                timed_out=True,
            )
        body, _, last = raw.rstrip("\n").rpartition("\n")
        if not last.startswith("#total ") or res.exit_code not in (0, 1):
            tail = raw.strip().splitlines()[-1:] or ["no output"]
            raise ToolError(f"search failed (exit code {res.exit_code}): {tail[0][:300]}")
        total = int(last.split()[1])
        if total == 0:
            text = f"no matches for /{pattern}/ in {shown}\n"
        else:
            text = body + "\n"
            if total > cap:
                text += f"[showing {cap} of {total} matches; narrow the pattern or the path]\n"
        return _Out(text, res.exit_code, len(res.output), sandbox_id=self.sandbox.id)

    def _test_argv(self, target: str | None) -> tuple[list[str], str]:
        s = self.scenario
        if not target:
            return list(s.test_command), ""
        if len(target) > _TARGET_MAX or not _TARGET_RE.match(target):
            shown, _ = truncate_head_tail(repr(target), 200)
            raise ToolError(f"bad test target {shown}: use a test id, module or file path")
        if s.test_target_command is None:
            return list(s.test_command), "[this scenario cannot narrow its tests: ran them all]\n"
        return [a.replace("{target}", target) for a in s.test_target_command], ""

    async def _run_tests(self, a: dict[str, Any]) -> _Out:
        argv, note = self._test_argv(a.get("target"))
        res, limit = await self._exec(contract.RUN_TESTS, argv)
        out = normalise_test_output(
            res.output.decode("utf-8", errors="replace"), self.sandbox.workdir
        )
        if out and not out.endswith("\n"):
            out += "\n"
        code = res.exit_code
        if res.timed_out:
            status = f"exit code: {code} (timed out after {limit:g}s: the command was killed)"
        elif res.over_limit is not None:
            status = f"exit code: {code} (killed: {res.over_limit})"
        elif code == 137:
            status = (
                "exit code: 137 (killed by SIGKILL: likely the sandbox's memory cap of "
                f"{self.scenario.sandbox.memory})"
            )
        else:
            status = f"exit code: {code if code is not None else 'unknown'}"
        # the status line survives truncation: cut the output first, then append it
        budget = max(100, self.scenario.tool_output_max_chars - len(note) - len(status) - 1)
        body, cut = truncate_head_tail(out, budget)
        return _Out(
            f"{note}{body}{status}\n",
            code,
            len(out.encode()) + res.dropped_bytes,  # normalised: the same in every sandbox
            cut=cut or res.dropped_bytes > 0,
            timed_out=res.timed_out,
            sandbox_id=self.sandbox.id,
        )


def _failure(
    message: str,
    start: int,
    max_chars: int,
    sandbox_id: str | None = None,
    *,
    timed_out: bool = False,
) -> ToolResult:
    message, _ = truncate_head_tail(message, max_chars)
    text = f"error: {message}\n"
    return ToolResult(
        text=text,
        start_ns=start,
        end_ns=time.perf_counter_ns(),
        output_bytes=len(text.encode()),
        timed_out=timed_out,
        error=message,
        sandbox_id=sandbox_id,
    )


def _decode(arguments: object) -> dict[Any, Any]:
    """The arguments as a dict: a JSON object (text, read by ``tools.arguments``) or a mapping;
    nothing else."""
    if arguments is None:
        return {}
    if isinstance(arguments, str):
        args = read_arguments(arguments)
        if args.value is None:
            raise ToolError(str(args.problem))
        return args.value
    if not isinstance(arguments, Mapping):
        raise ToolError("arguments must be a JSON object")
    return dict(arguments)


def _check_text(key: str, value: str) -> str:
    if len(value) > MAX_ARG_CHARS:
        raise ToolError(f"{key} is too long: {len(value)} characters (at most {MAX_ARG_CHARS})")
    if "\0" in value:
        raise ToolError(f"{key} contains a NUL character (\\u0000): no argument may contain one")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolError(
            f"{key} is not valid Unicode: a lone surrogate at character {exc.start}"
        ) from None
    return value


def _check_value(key: str, prop: Mapping[str, Any], value: Any) -> Any:
    kind = prop.get("type")
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise ToolError(f"{key} must be an integer")
        try:
            value = int(value)
        except ValueError:
            shown, _ = truncate_head_tail(repr(value), 100)
            raise ToolError(f"{key} must be an integer, not {shown}") from None
    elif kind == "string":
        if not isinstance(value, str):
            raise ToolError(f"{key} must be a string")
        value = _check_text(key, value)
    if "enum" in prop and value not in prop["enum"]:
        raise ToolError(f"{key} must be one of {', '.join(map(str, prop['enum']))}")
    return value


def _parse_args(spec: contract.ToolSpec, arguments: object) -> dict[str, Any]:
    """Arguments checked against the tool's spec in ``agentload.contract``."""
    name = spec.name
    raw = _decode(arguments)
    props = spec.properties
    for key in raw:
        if key not in props:
            shown, _ = truncate_head_tail(repr(key), 100)
            raise ToolError(f"unknown argument {shown} for {name} (valid: {', '.join(props)})")
    for key in spec.required:
        if raw.get(key) is None:
            raise ToolError(f"{name} needs the argument {key!r}")
    return {k: _check_value(k, props[k], v) for k, v in raw.items() if v is not None}
