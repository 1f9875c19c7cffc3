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
