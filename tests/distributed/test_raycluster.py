"""agentload.raycluster against a real Ray cluster on 127.0.0.1: joining it, the one-line
errors, and a worker's clock offset measured over real round trips."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest

from agentload.errors import ConfigError
from agentload.raycluster import Cluster, connect, measure_offset, require_ray

pytestmark = pytest.mark.ray


def test_without_ray_the_flag_is_one_line_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` sees when it is absent
    with pytest.raises(ConfigError) as exc:
        require_ray("--ray")
    assert "pip install 'agentload[ray]'" in str(exc.value)
    assert "\n" not in str(exc.value)


def test_an_address_nobody_serves_is_one_line(ray_cluster: Any) -> None:
    with pytest.raises(ConfigError) as exc, connect("127.0.0.1:1"):
        pass
    msg = str(exc.value)
    assert (
        msg.startswith("--ray 127.0.0.1:1: cannot start or join a Ray cluster") and "\n" not in msg
    )


def test_joins_the_cluster_and_measures_a_workers_clock(ray_cluster: Any) -> None:
    import ray

    with connect(ray_cluster.address) as cluster:
        assert cluster.cpus == 2 and cluster.nodes == 1
        assert cluster.workers(None) == 2 and cluster.workers(3) == 3
        with pytest.raises(ConfigError, match=r"--workers 0: must be 1\.\.1024"):
            cluster.workers(0)

        @ray.remote(num_cpus=0)
        class Clock:
            def now(self, shift: int) -> int:
                return time.perf_counter_ns() + shift

        actor = Clock.remote()  # type: ignore[attr-defined]
        ray.get(actor.now.remote(0))  # started
        # One machine: CLOCK_MONOTONIC is shared, so the offset is the shift we add, give or
        # take the uncertainty the measure states.
        for shift in (0, 5_000_000_000):
            off = measure_offset(lambda s=shift: ray.get(actor.now.remote(s)))
            assert 0 < off.uncertainty_ns < 50_000_000
            assert abs(off.offset_ns - shift) <= off.uncertainty_ns
    assert not ray.is_initialized()


def test_describe_names_the_cluster() -> None:
    c = Cluster(address="auto", nodes=3, cpus=48)
    assert c.describe() == "Ray cluster auto: 3 node(s), 48 CPU(s)"
    assert c.workers(None) == 48
