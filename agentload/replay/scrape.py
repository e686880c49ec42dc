"""Prometheus ``/metrics`` scraped at 1 Hz during a point, into the results timeline.

Only series whose names speak about the things a replay report plots are kept (KV-cache
usage, waiting/running requests, preemptions, prefix-cache hits/queries): the names vLLM,
SGLang, TensorRT-LLM and Dynamo expose contain these words. Engines whose whole set is small
and about serving keep every series (``KEEP_PREFIXES``): llama.cpp's ``llamacpp:*`` (prompt and
predicted tokens, cached prompt tokens, requests processing/deferred, busy slots per decode),
whose names mostly lack those words.

Several URLs (``--scrape-metrics URL,URL``: a Dynamo frontend and its workers' system ports)
are scraped together each second into one sample; each series then carries the label
``scrape="HOST:PORT"`` of the server it came from.
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

KEEP_WORDS = (
    "kv",
    "cache",
    "waiting",
    "running",
    "queue",
    "preempt",
    "num_requests",
    "usage",
    "inflight",
)
KEEP_PREFIXES = ("llamacpp:",)
_MAX_SERIES = 200


def parse_prometheus(text: str, source: str | None = None) -> dict[str, float]:
    """Prometheus text → ``{"name{label=value,...}": value}`` for the kept series (with
    ``source``, each also labelled ``scrape=SOURCE``)."""
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
            tags = {**s.labels, "scrape": source} if source else s.labels
            labels = ",".join(f"{k}={v}" for k, v in sorted(tags.items()))
            key = f"{name}{{{labels}}}" if labels else name
            out[key] = float(s.value)
            if len(out) >= _MAX_SERIES:
                return out
    return out


class MetricsScraper:
    """Scrapes ``urls`` every ``interval_s`` until cancelled; samples in ``self.samples``."""

    def __init__(
        self,
        urls: list[str],
        t0_ns: int,
        *,
        interval_s: float = 1.0,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        for u in urls:
            remember_url(u)  # its credentials are masked in the errors a scrape quotes
        several = len(urls) > 1
        self.urls = {u: httpx.URL(u).netloc.decode() if several else None for u in urls}
        """Each URL and the ``scrape`` label of its series (None: one URL, no label)."""
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
                got = await asyncio.gather(*(self._one(client, *u) for u in self.urls.items()))
                if any(v is not None for v in got):
                    values = {k: x for v in got if v is not None for k, x in v.items()}
                    self.samples.append({"t_ns": t - self.t0, "values": values})
                await asyncio.sleep(max(0.0, self.interval - (self.clock() - t) / 1e9))

    async def _one(
        self, client: httpx.AsyncClient, url: str, source: str | None
    ) -> dict[str, float] | None:
        """One scrape of ``url``: its kept series (labelled ``scrape=SOURCE`` with a
        ``source``), None when it failed (counted)."""
        try:
            r = await client.get(url)
            r.raise_for_status()
            return parse_prometheus(r.text, source)
        except (httpx.HTTPError, ValueError) as exc:
            self.failures += 1
            self.last_error = mask_text(f"{type(exc).__name__}: {exc}")[:200]
            return None

    def summary(self) -> dict[str, Any]:
        return {
            "url": ",".join(redact_url(u) for u in self.urls),
            "samples": self.samples,
            "failures": self.failures,
            "last_error": self.last_error,
        }
