"""The configuration of one replay run (stored in results.json as ``config``)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ReplayConfig"]


class ReplayConfig(BaseModel):
    """Everything that decides what a replay sends and measures (never the API key)."""

    model_config = ConfigDict(extra="forbid")

    traces: list[str] = Field(description="trace files replayed, in the order given")
    endpoint: str = Field(description="OpenAI-compatible base URL (…/v1), credentials stripped")
    model: str = Field(description="model name sent to the target")
    engine: str = Field(
        default="vllm", description="engine preset: vllm|sglang|trtllm|dynamo|openai"
    )
    extras: bool = Field(default=True, description="send the preset's ignore_eos/min_tokens")
    levels: list[int] = Field(default=[1], description="concurrency per point (sweep levels)")
    arrival_rate: float | None = Field(default=None, description="Poisson sessions/s instead")
    duration_s: float | None = Field(default=None, description="measured seconds per point")
    sessions: int | None = Field(default=None, description="session instances per point")
    gap_scale: float = Field(default=1.0, description="multiplier of recorded waits")
    salt: bool = Field(default=True, description="unique prefix per session instance")
    start_at: str = Field(default="random", description="random (mid-flight join) or zero")
    slo: dict[str, int | None] | None = Field(default=None, description="SLO thresholds in ns")
    gpus: int | None = Field(default=None, description="GPUs behind the endpoint")
    power_watts: float | None = Field(default=None, description="constant power draw in W")
    power: str | None = Field(default=None, description="'nvml' to measure energy")
    scrape_metrics: str | None = Field(default=None, description="Prometheus URL scraped at 1 Hz")
    target_tps_user: list[float] = Field(
        default=[160.0], description="headline targets (tokens/s per user)"
    )
    timeout_s: float = Field(default=600.0, description="per-request timeout")
    seed: int = Field(default=0, description="seed of join points and arrivals")
    session_header: str | None = Field(default=None, description="header carrying session id")
    session_field: str | None = Field(default=None, description="body field carrying session id")
    max_context: int | None = Field(default=None, description="leave out sessions above this")
