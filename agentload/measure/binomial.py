"""The ranks of a quantile's distribution-free confidence bounds, from exact binomial tails.

Of ``n`` values drawn from one distribution, the number below its ``q``-quantile is
Binomial(n, q); so the ``u``-th smallest value is above the quantile with probability
``P(Bin(n, q) ≤ u − 1)``, and the ``l``-th below it with ``P(Bin(n, q) ≥ l)``. The upper
bound at confidence ``1 − α`` is the smallest rank ``u`` with ``P(Bin(n, q) ≥ u) ≤ α``, the
lower the largest ``l`` with ``P(Bin(n, q) ≤ l − 1) ≤ α``; a rank past the sample (above ``n``,
below 1) means the sample cannot bound that side. Exact up to ``EXACT_N`` values, the normal
approximation with a continuity correction beyond (where the two agree to a rank).
"""

from __future__ import annotations

import math
from statistics import NormalDist

__all__ = ["EXACT_N", "lower_rank", "upper_rank"]

EXACT_N = 5000
"""Up to this many values the tails are summed exactly; beyond, the normal approximation."""


def _log_pmf(k: int, n: int, lq: float, lp: float, lg: float) -> float:
    return lg - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * lq + (n - k) * lp


def _tail_rank(n: int, q: float, alpha: float) -> int:
    """The smallest ``u`` with ``P(Bin(n, q) ≥ u) ≤ alpha`` (``n + 1`` when only the empty
    tail is that small)."""
    if q <= 0.0:
        return 1
    if q >= 1.0:
        return n + 1
    if n > EXACT_N:
        sd = math.sqrt(n * q * (1 - q))
        return min(n + 1, max(1, math.ceil(n * q + _z(alpha) * sd + 0.5)))
    lq, lp, lg = math.log(q), math.log1p(-q), math.lgamma(n + 1)
    tail = 0.0
    for u in range(n, -1, -1):
        tail += math.exp(_log_pmf(u, n, lq, lp, lg))
        if tail > alpha:
            return u + 1
    return 0


def upper_rank(n: int, q: float, alpha: float) -> int:
    """The 1-based rank of the ``1 − alpha`` upper bound of the ``q``-quantile of ``n`` sorted
    values (above ``n``: not bounded)."""
    return _tail_rank(n, q, alpha)


def lower_rank(n: int, q: float, alpha: float) -> int:
    """The 1-based rank of the ``1 − alpha`` lower bound of the ``q``-quantile of ``n`` sorted
    values (below 1: not bounded). By symmetry: ``P(Bin(n, q) ≤ l − 1) = P(Bin(n, 1 − q) ≥
    n − l + 1)``."""
    return n + 1 - _tail_rank(n, 1.0 - q, alpha)


def _z(alpha: float) -> float:
    """The standard normal's upper ``alpha`` quantile."""
    return NormalDist().inv_cdf(1.0 - alpha)
