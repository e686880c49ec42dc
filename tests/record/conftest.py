"""Fixtures of the recording-proxy tests: ``record_proxy`` starts ``agentload record``'s server
(in a thread of the test process) in front of an upstream and stops it at the end."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentload.record.server import RecordOptions, RecordServer


class RecordProxy:
    """A running recording proxy: ``url`` (its root, no ``/v1``) and ``stop()`` → the trace."""

    def __init__(self, server: RecordServer) -> None:
        self.server = server
        self.url = server.url
        self._path: Path | None = None

    @property
    def base_url(self) -> str:
        """``url + "/v1"``: what OpenAI clients take as their base URL."""
        return self.url + "/v1"

    def stop(self) -> Path:
        """Stop the proxy and close its trace (idempotent); the trace's path."""
        if self._path is None:
            self._path = self.server.stop()
        return self._path


@pytest.fixture
def record_proxy(tmp_path: Path) -> Iterator[Callable[..., RecordProxy]]:
    """``record_proxy(upstream, **RecordOptions fields)``: a proxy on a free 127.0.0.1 port
    writing into a fresh directory; every one started is stopped when the test ends."""
    started: list[RecordProxy] = []

    def start(upstream: str, **opts: Any) -> RecordProxy:
        out = tmp_path / f"record{len(started)}"
        rs = RecordServer(RecordOptions(upstream=upstream, out=out, port=0, **opts)).start()
        rp = RecordProxy(rs)
        started.append(rp)
        return rp

    yield start
    for rp in started:
        rp.stop()
