"""Where a generate run goes, decided in one place: this process (``run.generate``), an agent
product here (``--agent NAME``: ``product_run``), or a Ray cluster with ``--ray``
(``ray_driver.generate_on_ray``, imported only then; its workers run either kind)."""

from __future__ import annotations

from agentload.generate.options import GenerateOptions
from agentload.generate.run import RunResult, run_spec
from agentload.generate.run import generate as generate_here
from agentload.generate.sessions import ProgressSink
from agentload.products.registry import product

__all__ = ["generate"]


async def generate(opts: GenerateOptions, progress: ProgressSink | None = None) -> RunResult:
    """The run of ``opts``: here, an agent product here, or on the Ray cluster ``opts.ray``
    names."""
    chosen = product(opts.agent)
    if chosen is not None and opts.ray is None:
        from agentload.generate.product_run import run_product

        return await run_product(run_spec(opts), chosen, progress)
    if opts.ray is None:
        return await generate_here(opts, progress)
    from agentload.generate.ray_driver import generate_on_ray

    return await generate_on_ray(opts, progress)
