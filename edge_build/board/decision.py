"""The one statistical rule for parity gates on proportions (top-1 agreement, accuracy drop), on the build and on the board.

The point estimate decides pass or fail. The one-sided exact 95% bound
(Clopper-Pearson) on the figure's passing side says whether that pass is
*decided*: a pass whose bound does not clear the limit is *undecided* (more
examples could overturn it) and is reported so, in the same words, by the build's
checks, the board check and ``bench.py --parity``. A top-1 agreement of n out of n
decides ``>= limit`` from ``ceil(ln 0.05 / ln limit)`` examples (299 at 0.99), which
sizes the golden set. The accuracy drop's bound is taken on the examples exactly one
of the two models gets right (``board.parity.passing_side_bound``).

Standard library only: the profile (read by ``SConstruct``) sizes the golden set with it.
"""

from __future__ import annotations

import math

#: One-sided: a gate asks whether a figure clears its limit, not whether it differs from it.
ALPHA = 0.05


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed over the shorter tail in log space."""
    if k < 0:
        return 0.0
    if k >= n or p <= 0:
        return 1.0
    if p >= 1:
        return 0.0
    log_p, log_q = math.log(p), math.log1p(-p)

    def term(i: int) -> float:
        return math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * log_p + (n - i) * log_q)

    if k < n - k:
        return min(1.0, math.fsum(term(i) for i in range(k + 1)))
    return max(0.0, 1.0 - math.fsum(term(i) for i in range(k + 1, n + 1)))


def lower_bound(successes: int, n: int, alpha: float = ALPHA) -> float:
    """The exact one-sided lower ``1 - alpha`` confidence bound of a proportion (Clopper-Pearson), by bisection."""
    if successes <= 0:
        return 0.0
    if successes >= n:
        return alpha ** (1 / n)  # the closed form at n of n
    low, high = 0.0, successes / n
    for _ in range(60):  # 2**-60: far below any figure printed
        middle = (low + high) / 2
        # P(X >= successes | middle) = 1 - P(X <= successes - 1 | middle) rises with middle.
        low, high = (middle, high) if 1 - binomial_cdf(successes - 1, n, middle) < alpha else (low, middle)
    return low


def upper_bound(successes: int, n: int, alpha: float = ALPHA) -> float:
    """The exact one-sided upper ``1 - alpha`` confidence bound of a proportion (Clopper-Pearson)."""
    return 1 - lower_bound(n - successes, n, alpha)


def examples_to_decide(figure: str, limit, alpha: float = ALPHA) -> int | None:
    """The fewest examples at which a perfect result decides a check of ``figure`` at ``limit``; ``None`` if no number does.

    A top-1 agreement of n out of n has the lower bound ``alpha ** (1 / n)``. An accuracy drop
    with no discordant example, and a logit error, are decided by any number of examples.
    """
    if figure != "top1_agreement" or limit <= 0:
        return 1
    if limit >= 1:
        return None
    return math.ceil(math.log(alpha) / math.log(limit))


def golden_size_words(golden: int, needed: int | None, available: int) -> str:
    """Whether a golden set of ``golden`` examples (from a test split of ``available``) lets a perfect result decide every gate."""
    if needed is None:
        return "No golden set decides a top-1 agreement limit of 1: such a pass is always undecided."
    if golden >= needed:
        return f"A perfect result decides every parity gate from {needed} examples."
    return (
        f"**Too few to decide:** a perfect top-1 agreement needs {needed} examples to decide its gate, and the test split "
        f"holds {available}, so a pass is reported *undecided*."
    )
