"""Every gate's verdict, on the build and on the board: pass, fail or *undecided*.

The one place that decides. The build's gates (the tflite stage's validation
split, evaluate, xla_check, the runtime checks), the board check, the bundle's
``bench.py --parity`` and the report's words all come here, so the board decides
exactly what the build decides. The rule, in full:

- **Float parity** (``max |Δlogit|``): a float model's error grows with its logits
  (a rounding error is relative to the numbers rounded), so the bound scales with
  them: ``|Δlogit| <= rtol * scale + atol``, where ``scale`` is the reference's
  largest ``|logit|`` over the examples checked (``limit_of``). A tolerance given as
  a plain number (the profile's ``*_max_abs_logit`` keys) is an absolute bound instead.
- **Proportions** (top-1 agreement, accuracy drop) are decided once, where the data
  is largest: on the validation split, by the tflite stage and its quantization ladder
  (``point_fails``), the point estimate passes or fails, and a model that misses climbs
  the ladder. Every later check (the test split, the golden set on the build's runtimes,
  a board, ``bench.py --parity``) asks the same question again of fewer or other
  examples, so there a miss *fails* only when its one-sided exact 95% bound
  (Clopper-Pearson) on the failing side breaks the limit too, and is *undecided*
  otherwise: a model with a true agreement of 0.995 shows 3 or more of 299 golden
  examples differing in about one build in five, and would stop builds at random.
  Everywhere, the bound on the passing side says whether a pass is *decided*: a pass
  whose bound does not clear the limit is *undecided* (more examples could overturn
  it). Both are reported so, in the same words, everywhere. A top-1 agreement of n out
  of n decides ``>= limit`` from ``ceil(ln 0.05 / ln limit)`` examples (299 at 0.99),
  which sizes the golden set. The accuracy drop's bounds are taken on the examples
  exactly one of the two models gets right (``side_bound``).
- **Latency**: a p50 over its budget fails, except on emulated timings (a note, not
  a problem). On a board the p50 carries its bootstrap interval over the timed
  invokes, and a budget inside it is *undecided* (``latency_undecided``).

The figures come from ``board.parity.compare``. Standard library only at import (numpy
only inside ``p50_interval``): the profile (read by ``SConstruct``) sizes the golden
set with it, and the report words its pages with it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

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


# The proportions' and the logit errors' gates: an artifact's parity checks on ``board.parity.compare``'s figures.

#: Figures a check may name beyond those ``board.parity.compare`` returns.
DERIVED = {"accuracy_drop": lambda figures: figures["reference_accuracy"] - figures["accuracy"]}

#: The figures whose one-sided 95% bounds decide their gate (``side_bound``).
BOUNDED_FIGURES = ("top1_agreement", "accuracy_drop")


def side_bound(figure: str, figures: Mapping, passing: bool = True) -> float | None:
    """The one-sided 95% bound of a proportion figure on its passing side (or its failing side); ``None`` for a figure
    without one (a logit error)."""
    if figure == "top1_agreement":
        n = figures["examples"]
        agreeing = n - len(figures["disagreeing_examples"])
        return lower_bound(agreeing, n) if passing else upper_bound(agreeing, n)
    if figure == "accuracy_drop":
        # Only the examples exactly one model gets right move the drop: (reference-only - candidate-only) / n.
        # Given d of them, each is the reference's with probability q; the drop's bound is d (2 q_bound - 1) / n.
        reference_only, discordant = figures["only_reference_correct"], figures["only_reference_correct"] + figures["only_candidate_correct"]
        if discordant == 0:
            return 0.0
        share = upper_bound(reference_only, discordant) if passing else lower_bound(reference_only, discordant)
        return discordant * (2 * share - 1) / figures["examples"]
    return None


def bounds(figures: Mapping) -> dict[str, float | None]:
    """Each bounded figure's one-sided 95% bound on its passing side (what the board check records beside its figures)."""
    return {figure: side_bound(figure, figures) for figure in BOUNDED_FIGURES}


def limit_of(key: str, tolerance, figures: Mapping) -> tuple[float, str]:
    """A tolerance's bound on these figures, and how it was reached: a number is absolute; ``{"rtol", "atol"}`` scales with the logits."""
    if isinstance(tolerance, Mapping):
        rtol, atol, scale = tolerance["rtol"], tolerance["atol"], figures["logit_scale"]
        return rtol * scale + atol, f"{key}: rtol {rtol:g} x max|logit| {scale:.4g} + atol {atol:g}"
    return float(tolerance), key


def within(value: float, op: str, limit: float) -> bool:
    """``value`` meets ``op limit`` (NaN never does)."""
    return bool(value <= limit if op == "<=" else value >= limit)


def verdicts(checks: Sequence[Sequence], figures: Mapping, limits: Mapping, point_fails: bool = False) -> list[dict]:
    """Each check ``(what, figure, "<=" or ">=", tolerance key)`` judged by the rule above: ``pass``, ``undecided`` or ``fail``.

    ``checks``: an artifact's parity checks (the ``parity`` of its row; on the board, the manifest's ``parity_checks``);
    ``limits``: the tolerances by key (``Tolerances.limits()``; on the board, the manifest's ``tolerances``);
    ``point_fails``: a miss fails whatever its bound (the validation split's gates, where the question is decided).
    NaN fails every check.
    """
    judged = []
    for what, figure, op, key in checks:
        value = DERIVED[figure](figures) if figure in DERIVED else figures[figure]
        limit, derivation = limit_of(key, limits[key], figures)
        meets = within(value, op, limit)
        bound = side_bound(figure, figures, passing=meets)
        message = f"{what} {value:.6g} (allowed {op} {limit:.6g}, {derivation})"
        if meets:
            verdict = "pass" if bound is None or within(bound, op, limit) else "undecided"
            if verdict == "undecided":
                message += f": its 95% bound {bound:.6g} on {figures['examples']} examples does not clear the limit"
        else:
            shown = point_fails or bound is None or math.isnan(value) or not within(bound, op, limit)
            verdict = "fail" if shown else "undecided"
            if verdict == "undecided":
                message += f": its 95% bound {bound:.6g} on {figures['examples']} examples does not show the limit broken"
        judged.append({"check": what, "key": key, "value": value, "limit": limit, "bound": bound, "verdict": verdict, "message": message})
    return judged


def messages(judged: Sequence[Mapping], verdict: str) -> list[str]:
    """The messages of the checks ``verdicts`` judged ``verdict``: ``"fail"`` gives
    ``"<what> <value> (allowed <op> <limit>, <the key, or how the limit was reached>)"``."""
    return [v["message"] for v in judged if v["verdict"] == verdict]


def breaches(checks: Sequence[Sequence], figures: Mapping, limits: Mapping) -> list[str]:
    """Each limit that validation-split ``figures`` miss (the point estimate decides there): the messages of the checks ``verdicts`` fails."""
    return messages(verdicts(checks, figures, limits, point_fails=True), "fail")


def recorded(judged: Sequence[Mapping]) -> list[dict]:
    """The judged checks as a record keeps them (``eval.json``'s ``gates``, a conversion's ``validation_gates``)."""
    return [{key: v[key] for key in ("check", "limit", "verdict", "message")} for v in judged]


# Latency: a p50 against its budget.


def gate(checks: Sequence[Sequence], outcome: dict, limits: Mapping, budget_ms: float) -> list[str]:
    """What a runtime check that ran breaks (the runtime checks' and the board check's): its parity checks on
    ``outcome["parity"]``, and its p50 against the latency budget.

    The budget and the parity checks left undecided are recorded in ``outcome``; emulated timings
    (``outcome["emulated"]``) say nothing about the board, so a p50 over budget there is a note in
    ``outcome``, not a problem.
    """
    judged = verdicts(checks, outcome["parity"], limits)
    problems = messages(judged, "fail")
    outcome["undecided"] = {"parity": messages(judged, "undecided")}
    p50_ms = outcome["latency"]["p50_us"] / 1e3
    outcome["latency_budget_ms"] = budget_ms
    if p50_ms > budget_ms:
        if outcome["emulated"]:
            outcome["latency_note"] = f"p50 {p50_ms:.3f} ms over the {budget_ms:g} ms budget, not enforced: emulated timings"
        else:
            problems.append(f"p50 {p50_ms:.3f} ms (budget <= {budget_ms:g} ms)")
    if problems and outcome["parity"]["disagreeing_examples"]:
        problems.append(f"top-1 differs on golden examples {outcome['parity']['disagreeing_examples'][:10]}")
    return problems


def p50_interval(invoke_us, confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The percentile bootstrap interval of the median of the timed invokes ``invoke_us``.

    Seeded: the same invokes always give the same interval, so a report is reproducible from its data. numpy is
    imported here, not above: the profile (read by ``SConstruct``) and the report load this module without it.
    """
    import numpy as np

    values = np.asarray(invoke_us, dtype=np.float64)
    if values.ndim != 1 or len(values) == 0:
        raise ValueError(f"need a non-empty 1-D array, got shape {values.shape}")
    drawn = values[np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))]
    estimates = np.median(drawn, axis=-1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(estimates, [tail, 100 - tail])
    return float(low), float(high)


def samples_to_decide(samples: int, interval: tuple[float, float], estimate: float, limit: float) -> float | None:
    """How many samples would bring ``limit`` outside the interval around ``estimate``, or ``None`` if it already lies outside.

    An interval's half-width shrinks as 1/sqrt(samples); the answer assumes the spread stays what it was.
    """
    low, high = interval
    if not low <= limit <= high:
        return None
    half_width = (high - low) / 2
    distance = abs(limit - estimate)
    if distance == 0:
        return math.inf  # a limit exactly at the estimate: no number of samples decides it
    return math.ceil(samples * (half_width / distance) ** 2)


def latency_undecided(runs: int, interval: tuple[float, float], p50_us: float, budget_ms: float) -> list[str]:
    """The latency budget when it lies inside the p50's interval (from ``runs`` timed invokes): the verdict could flip on the next run."""
    budget_us = budget_ms * 1e3
    needed = samples_to_decide(runs, interval, p50_us, budget_us)
    if needed is None:
        return []
    low, high = interval
    more = f"about {needed:,.0f} timed invokes would decide it" if needed != math.inf else "no number of invokes decides it"
    return [f"p50 budget {budget_us / 1e3:g} ms inside its 95% CI [{low / 1e3:.4g}, {high / 1e3:.4g}] ms: {more}"]


def failure_table(rows: Sequence[tuple[str, str, str]]) -> str:
    """``(artifact, where, what broke)`` rows as the table a failed gate prints."""
    return "\n".join([f"  {'artifact':<12} {'checked on':<28} what broke", *(f"  {a:<12} {w:<28} {problem}" for a, w, problem in rows)])
