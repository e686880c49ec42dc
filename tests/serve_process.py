"""``agentload serve`` in a subprocess (its own GIL) for tests: started on a free port, its URL
read from its banner, stopped (terminated, then killed) when the block ends."""

from __future__ import annotations

import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def serve_process(*args: str) -> Iterator[str]:
    """``agentload serve --port 0 ARGS``; its base URL (``http://127.0.0.1:PORT/v1``)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentload", "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        banner = proc.stdout.readline() if ready else ""
        assert banner.startswith("agentload simulator on "), f"no banner from serve: {banner!r}"
        yield banner.split(" on ")[1].split()[0]
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
