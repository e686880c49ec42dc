"""Prometheus ``/metrics`` scraped at 1 Hz during a point, into the results timeline.

Only series whose names speak about the things a replay report plots are kept (KV-cache
usage, waiting/running requests, preemptions, prefix-cache hits/queries): the names vLLM,
SGLang, TensorRT-LLM and Dynamo expose contain these words. Engines whose whole set is small
and about serving keep every series (``KEEP_PREFIXES``): llama.cpp's ``llamacpp:*`` (prompt and
predicted tokens, cached prompt tokens, requests processing/deferred, busy slots per decode),
whose names mostly lack those words.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from agentload.masking import mask_text, redact_url, remember_url

__all__ = ["KEEP_PREFIXES", "KEEP_WORDS", "MetricsScraper", "parse_prometheus"]

KEEP_WORDS = ("kv", "cache", "waiting", "running", "queue", "preempt", "num_requests", "usage")
KEEP_PREFIXES = ("llamacpp:",)
_MAX_SERIES = 200


def parse_prometheus(text: str) -> dict[str, float]:
    """Prometheus text → ``{"name{label=value,...}": value}`` for the kept series."""
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            name = s.name
            if name != fam.name and name not in text:
                # prometheus_client names a counter's sample NAME_total even where the server
                # wrote NAME (llama.cpp's n_tokens_max): keep the server's own name
                name = fam.name
            if not name.startswith(KEEP_PREFIXES) and not any(
                w in name.lower() for w in KEEP_WORDS
            ):
                continue
            if name.endswith(("_bucket", "_created")):
                continue
            labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
            key = f"{name}{{{labels}}}" if labels else name
            out[key] = float(s.value)
            if len(out) >= _MAX_SERIES:
                return out
    return out


class MetricsScraper:
    """Scrapes ``url`` every ``interval_s`` until cancelled; samples in ``self.samples``."""

    def __init__(
        self,
        url: str,
        t0_ns: int,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.url = url
        remember_url(url)  # its credentials are masked in the errors a scrape quotes
        self.t0 = t0_ns
        self.interval = interval_s
        self.clock = clock
        self.samples: list[dict[str, Any]] = []
        self.failures = 0
        self.last_error: str | None = None

    async def run(self) -> None:
        async with httpx.AsyncClient(timeout=max(0.5, self.interval)) as client:
            while True:
                t = self.clock()
                try:
                    r = await client.get(self.url)
                    r.raise_for_status()
                    values = parse_prometheus(r.text)
                    self.samples.append({"t_ns": t - self.t0, "values": values})
                except (httpx.HTTPError, ValueError) as exc:
                    self.failures += 1
                    error = f"{type(exc).__name__}: {exc}"
                    self.last_error = mask_text(error)[:200]
                await asyncio.sleep(max(0.0, self.interval - (self.clock() - t) / 1e9))

    def summary(self) -> dict[str, Any]:
        return {
            "url": redact_url(self.url),
            "samples": self.samples,
            "failures": self.failures,
            "last_error": self.last_error,
        }
