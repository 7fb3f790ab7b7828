import numpy as np
import pytest

from edge_build.stats import mcnemar_exact, wilson_interval


def paired(a_only: int, b_only: int, both: int = 0, neither: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per-example correctness of two classifiers with the given agreement counts."""
    a = [True] * a_only + [False] * b_only + [True] * both + [False] * neither
    b = [False] * a_only + [True] * b_only + [True] * both + [False] * neither
    return np.array(a), np.array(b)


@pytest.mark.parametrize(
    "correct, n, low, high",
    [
        (216, 223, 0.9366353037967319, 0.9847130294689397),
        (0, 10, 0.0, 0.27753279986288926),
        (10, 10, 0.7224672001371109, 1.0),
        (5, 10, 0.236593090512564, 0.7634069094874361),
    ],
)
def test_wilson_interval_known_values(correct, n, low, high):
    assert wilson_interval(correct, n) == pytest.approx((low, high), abs=1e-12)


def test_wilson_interval_is_exact_at_the_ends_and_symmetric():
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    low, high = wilson_interval(3, 17)
    assert wilson_interval(14, 17) == pytest.approx((1 - high, 1 - low), abs=1e-12)


def test_a_higher_confidence_widens_the_interval():
    assert wilson_interval(216, 223, confidence=0.99) == pytest.approx((0.922484698117629, 0.9876557164863705), abs=1e-12)
    narrow, wide = wilson_interval(216, 223, 0.9), wilson_interval(216, 223, 0.99)
    assert wide[0] < narrow[0] and narrow[1] < wide[1]


@pytest.mark.parametrize("correct, n, confidence", [(1, 0, 0.95), (-1, 10, 0.95), (11, 10, 0.95), (5, 10, 1.0), (5, 10, 0.0)])
def test_wilson_interval_refuses_impossible_arguments(correct, n, confidence):
    with pytest.raises(ValueError):
        wilson_interval(correct, n, confidence)


@pytest.mark.parametrize(
    "a_only, b_only, p_value",
    [
        (0, 5, 0.0625),  # 2 / 2**5
        (5, 0, 0.0625),
        (3, 3, 1.0),
        (1, 11, 0.00634765625),  # 2 * (1 + 12) / 2**12
        (10, 25, 0.016673847800120715),
    ],
)
def test_mcnemar_known_values(a_only, b_only, p_value):
    result = mcnemar_exact(*paired(a_only, b_only, both=40, neither=7))
    assert result == {"a_only": a_only, "b_only": b_only, "discordant": a_only + b_only, "p_value": pytest.approx(p_value, rel=1e-12)}


def test_mcnemar_without_discordant_examples_is_one():
    assert mcnemar_exact(*paired(0, 0, both=5, neither=2)) == {"a_only": 0, "b_only": 0, "discordant": 0, "p_value": 1.0}


def test_mcnemar_stays_exact_for_tens_of_thousands_of_examples():
    # Floats would overflow at 2**40100; the integer sum gives the correctly rounded value, and underflow gives 0.
    assert mcnemar_exact(*paired(20000, 20100))["p_value"] == pytest.approx(0.6210366839993973, rel=1e-12)
    assert mcnemar_exact(*paired(0, 40000))["p_value"] == 0.0


@pytest.mark.parametrize("a_only, b_only", [(0, 1), (2, 9), (17, 30), (140, 171), (999, 1100)])
def test_mcnemar_matches_scipy(a_only, b_only):
    stats = pytest.importorskip("scipy.stats")
    expected = stats.binomtest(a_only, a_only + b_only, 0.5).pvalue
    assert mcnemar_exact(*paired(a_only, b_only, both=3))["p_value"] == pytest.approx(expected, rel=1e-9)


def test_mcnemar_refuses_unpaired_arrays():
    with pytest.raises(ValueError):
        mcnemar_exact(np.ones(3, bool), np.ones(4, bool))
