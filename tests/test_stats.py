"""``wilson`` against scipy's independent implementation of the Wilson score interval."""
from __future__ import annotations

import math

import pytest
from scipy.stats import binomtest, norm

from dobrushin import wilson


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 50, 333, 10_000])
@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.99])
def test_wilson_matches_scipy(n, confidence):
    z = norm.ppf(0.5 + confidence / 2)
    for k in sorted({0, 1, n // 3, n // 2, n - 1, n} & set(range(n + 1))):
        p, lo, hi = wilson(k, n, z=z) if confidence != 0.95 else wilson(k, n)
        ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
        assert p == k / n
        assert (lo, hi) == pytest.approx((ci.low, ci.high), abs=1e-12), (k, n)


def test_wilson_edges():
    p, lo, hi = wilson(0, 0)
    assert math.isnan(p) and (lo, hi) == (0.0, 1.0)
    for k, n in ((-1, 3), (4, 3), (0, -1)):
        with pytest.raises(ValueError, match="0 <= k <= n"):
            wilson(k, n)


# --- the interval clustered by input ------------------------------------------------------------------
import numpy as np

from dobrushin.math.stats import add_sums, cluster_sums, cluster_variance, clustered, effective_n, wilson_n


def _brute_cluster_variance(k, n) -> float:
    """The sandwich variance written out over pairs of (input, layer) outcomes: expand every input into
    its 0/1 outcomes y, residuals e = y − p, and sum e_r·e_s over all ordered pairs (r, s) of one input
    (the block-diagonal 'meat' of the sandwich), times G/(G−1), over N² (the 'bread' of an intercept)."""
    ys = [np.r_[np.ones(ki), np.zeros(ni - ki)] for ki, ni in zip(k, n)]
    N, G = sum(len(y) for y in ys), len(ys)
    p = sum(y.sum() for y in ys) / N
    meat = 0.0
    for y in ys:
        e = y - p
        for r in range(len(e)):
            for s in range(len(e)):
                meat += e[r] * e[s]
    return meat * G / (G - 1) / N**2


def test_cluster_variance_matches_pairwise_sum():
    rng = np.random.default_rng(7)
    for _ in range(20):
        G = int(rng.integers(2, 9))
        n = rng.integers(1, 13, size=G)
        k = rng.binomial(n, rng.uniform(0, 1, size=G))
        v = cluster_variance(cluster_sums(k, n))
        # the sums of integers are exact; the two float paths differ by a few roundings of numbers ≤ 1
        assert v == pytest.approx(_brute_cluster_variance(k, n), rel=1e-9, abs=1e-15)


def test_pooled_sums_equal_the_sums_of_the_union():
    rng = np.random.default_rng(3)
    n1, n2 = rng.integers(1, 10, 5), rng.integers(1, 10, 7)
    k1, k2 = rng.binomial(n1, 0.4), rng.binomial(n2, 0.8)
    assert add_sums(cluster_sums(k1, n1), cluster_sums(k2, n2)) == cluster_sums(np.r_[k1, k2], np.r_[n1, n2])


def test_effective_n_between_inputs_and_pairs():
    # every layer of an input agrees: the inputs are the independent draws
    k, n = np.array([12, 0, 12, 12, 0, 12]), np.full(6, 12)
    assert effective_n(cluster_sums(k, n)) == pytest.approx(6)
    # every input alike (k_i = p·n_i): no between-input spread, deff clipped at 1 → all pairs count
    k, n = np.full(10, 6), np.full(10, 12)
    assert effective_n(cluster_sums(k, n)) == pytest.approx(120)
    # nothing fails: the correlation cannot be estimated, one draw per input
    s = cluster_sums(np.full(16, 12), np.full(16, 12))
    assert effective_n(s) == 16
    p, lo, hi = clustered(s)
    assert p == 1 and hi == 1 and lo == pytest.approx(wilson(16, 16)[1], abs=1e-12)
    assert lo < wilson(192, 192)[1]  # wider than the Wilson interval over the 192 pairs


def test_wilson_n_at_integer_n_is_wilson():
    for k, n in ((0, 5), (3, 7), (50, 50), (13, 40)):
        assert wilson_n(k / n, n) == pytest.approx(wilson(k, n)[1:], abs=1e-14)


def test_clustered_interval_covers_under_correlation():
    """Seeded simulation: inputs with a beta-distributed own probability (pairs of one input correlated).
    The clustered interval covers the true mean about 95% of the time; Wilson over pairs clearly less.
    With 400 repetitions the coverage estimate has a standard error of about 1.1 points."""
    rng = np.random.default_rng(2024)
    G, m, a, b = 40, 12, 2.0, 1.0  # true mean a/(a+b) = 2/3, intra-input correlation 1/(a+b+1) = 0.25
    truth, cover_cl, cover_w = a / (a + b), 0, 0
    for _ in range(400):
        k = rng.binomial(m, rng.beta(a, b, size=G))
        n = np.full(G, m)
        _, lo, hi = clustered(cluster_sums(k, n))
        cover_cl += lo <= truth <= hi
        _, lo, hi = wilson(int(k.sum()), int(n.sum()))
        cover_w += lo <= truth <= hi
    assert 0.91 <= cover_cl / 400 <= 0.99
    assert cover_w / 400 < 0.85


def test_cluster_sums_rejects_bad_counts():
    with pytest.raises(ValueError, match="0 <= k"):
        cluster_sums([3], [2])
    with pytest.raises(ValueError, match="differ in length"):
        cluster_sums([1, 2], [3])
