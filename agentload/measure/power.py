"""Power for tokens/s per MW: a constant (``--power-watts``) or NVML energy (``--power nvml``).

NVML readings come from nvidia-ml-py (``import pynvml``), an optional package: total energy
since driver load (mJ) of each GPU, summed, sampled at 1 Hz; the average power over the
steady-state window is the energy difference (linear between samples) over its length.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import time
from collections.abc import Callable
from typing import Any

from agentload.errors import ReplayError

__all__ = ["NvmlPower", "average_watts"]


def average_watts(samples: list[tuple[int, float]], start_ns: int, end_ns: int) -> float | None:
    """Average power (W) between two clock times from ``(t_ns, energy_mJ)`` samples: energy
    interpolated linearly at both ends, ΔE (J) / Δt (s); None without two samples around."""
    if len(samples) < 2 or end_ns <= start_ns:
        return None

    def at(t: int) -> float | None:
        ts = [s[0] for s in samples]
        i = bisect.bisect_left(ts, t)
        if i == 0:
            return samples[0][1] if ts[0] == t else None
        if i == len(samples):
            return None
        (t0, e0), (t1, e1) = samples[i - 1], samples[i]
        return e0 + (e1 - e0) * (t - t0) / (t1 - t0)

    e_start, e_end = at(start_ns), at(end_ns)
    if e_start is None or e_end is None:
        return None
    return (e_end - e_start) / 1e3 / ((end_ns - start_ns) / 1e9)


class NvmlPower:
    """Samples the summed energy counter of the first ``gpus`` GPUs (all when None)."""

    def __init__(self, gpus: int | None, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        try:
            import pynvml  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            raise ReplayError(
                "--power nvml needs nvidia-ml-py (pip install nvidia-ml-py); "
                "or give --power-watts W"
            ) from None
        self._nvml: Any = pynvml
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
            n = count if gpus is None else min(gpus, count)
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(n)]
            if not self._handles:
                raise ReplayError("--power nvml: NVML sees no GPU")
            self.energy_mj()
        except pynvml.NVMLError as exc:
            raise ReplayError(f"--power nvml: NVML is not usable here ({exc})") from None
        self.clock = clock
        self.samples: list[tuple[int, float]] = []

    def energy_mj(self) -> float:
        """Summed energy since driver load, in mJ."""
        f = self._nvml.nvmlDeviceGetTotalEnergyConsumption
        return float(sum(f(h) for h in self._handles))

    def sample(self) -> None:
        self.samples.append((self.clock(), self.energy_mj()))

    async def run(self) -> None:
        while True:
            self.sample()
            await asyncio.sleep(1.0)

    def close(self) -> None:
        with contextlib.suppress(self._nvml.NVMLError):
            self._nvml.nvmlShutdown()
