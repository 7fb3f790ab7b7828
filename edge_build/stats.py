"""How sure an accuracy is: Wilson score intervals and McNemar's exact test, with no scipy.

Test splits are small (a few hundred examples for BBC News), so an accuracy is
reported with its interval, and two models scored on the same examples are
compared on the examples where exactly one of them is right. What decides a
gate (its bounds, the p50's interval) is ``board.decision``'s.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of the proportion ``correct / n`` (no continuity correction)."""
    if n <= 0 or not 0 <= correct <= n:
        raise ValueError(f"need 0 <= correct <= n and n > 0, got {correct} of {n}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence}")
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    p = correct / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half_width = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # At 0 or n correct the bound is exactly 0 or 1; the subtraction would leave round-off (2.8e-17 for 0 of 10).
    low = 0.0 if correct == 0 else centre - half_width
    high = 1.0 if correct == n else centre + half_width
    return low, high


def _binomial_half_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), summed in exact integers."""
    term = total = 1  # C(n, 0)
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    # int / int is correctly rounded however large 2**n is (and underflows to 0.0 rather than failing).
    return total / 2**n


def mcnemar_exact(a_correct, b_correct) -> dict:
    """McNemar's exact two-sided test of two classifiers' per-example correctness on the same examples.

    Only discordant examples count: ``a_only`` where only A is right, ``b_only``
    where only B is. Under equal accuracy each discordant example is a fair coin,
    so p = min(1, 2 P(X <= min(a_only, b_only))) with X ~ Binomial(a_only + b_only, 1/2).
    """
    a_correct = np.asarray(a_correct, dtype=bool)
    b_correct = np.asarray(b_correct, dtype=bool)
    if a_correct.shape != b_correct.shape or a_correct.ndim != 1:
        raise ValueError(f"need two equal 1-D arrays, got shapes {a_correct.shape} and {b_correct.shape}")
    a_only = int(np.sum(a_correct & ~b_correct))
    b_only = int(np.sum(~a_correct & b_correct))
    discordant = a_only + b_only
    p_value = min(1.0, 2 * _binomial_half_cdf(min(a_only, b_only), discordant)) if discordant else 1.0
    return {"a_only": a_only, "b_only": b_only, "discordant": discordant, "p_value": p_value}
