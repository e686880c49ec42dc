"""The one percentile definition (numpy's default, linear between closest ranks)."""

from __future__ import annotations

import random

import pytest

from agentload.measure.metrics.base import distribution
from agentload.quantiles import percentile


def test_linear_between_closest_ranks() -> None:
    assert percentile([3.0], 90) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 0], 100) == 10
    assert percentile([0, 10], 25) == 2.5
    assert percentile([4, 1, 3, 2], 0) == 1  # sorts unless told the values are sorted


def test_no_values_and_bad_q_are_errors() -> None:
    with pytest.raises(ValueError, match="nothing"):
        percentile([], 50)
    with pytest.raises(ValueError, match="outside"):
        percentile([1.0], 101)


def test_replay_distributions_use_the_same_definition() -> None:
    rng = random.Random(7)
    xs = [rng.expovariate(1.0) for _ in range(1001)]
    d = distribution(xs)
    assert d is not None
    for q in (50, 90, 99):
        assert d[f"p{q}"] == percentile(xs, q)
