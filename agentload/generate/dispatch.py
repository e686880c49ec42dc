"""Where a generate run goes, decided in one place: this process (``run.generate``), or a Ray
cluster with ``--ray`` (``ray_driver.generate_on_ray``, imported only then)."""

from __future__ import annotations

from agentload.generate.options import GenerateOptions
from agentload.generate.run import ProgressSink, RunResult
from agentload.generate.run import generate as generate_here

__all__ = ["generate"]


async def generate(opts: GenerateOptions, progress: ProgressSink | None = None) -> RunResult:
    """The run of ``opts``: here, or on the Ray cluster ``opts.ray`` names."""
    if opts.ray is None:
        return await generate_here(opts, progress)
    from agentload.generate.ray_driver import generate_on_ray

    return await generate_on_ray(opts, progress)
