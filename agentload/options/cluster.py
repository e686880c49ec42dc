"""Where a run's sessions run: on this machine, or on a Ray cluster (``--ray [ADDRESS]``) with
``--workers`` workers. Shared by ``replay`` and ``generate``/``eval``."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentload.options.flags import Flag
from agentload.options.values import MAX_WORKERS, bad_value

__all__ = ["ClusterOptions"]


class ClusterOptions(BaseModel):
    """The cluster a run uses (none: this process)."""

    model_config = ConfigDict(extra="forbid")

    ray: Annotated[
        str | None,
        Flag(
            "Run on a Ray cluster: --ray alone starts one on this machine; --ray auto joins "
            "this machine's cluster, --ray HOST:PORT that one (pip install 'agentload\\[ray]'; "
            "docs/distributed.md).",
            metavar="[ADDRESS]",
        ),
    ] = None
    workers: Annotated[
        int | None,
        Flag(
            "Ray workers, one CPU each (default: one per cluster CPU, at most the sessions in "
            "flight); needs --ray.",
            metavar="N",
        ),
    ] = Field(default=None, ge=1, le=MAX_WORKERS)

    @model_validator(mode="after")
    def _workers_need_ray(self) -> ClusterOptions:
        if self.workers is not None and self.ray is None:
            raise bad_value("--workers counts Ray workers: give --ray [ADDRESS] too")
        return self
