"""Statistics of the law of the random baseline, computed from the ``run_grid`` / ``summarise`` table."""
from __future__ import annotations

import pandas as pd

from fractions import Fraction

from .ensembles import holds_bounds, pair_split_constant


def split_constant(grid: pd.DataFrame) -> pd.DataFrame:
    """Split constant of the attaining pair, ``c_n = n/4 − (n − 1)·rb_p_reversed`` with its 95% interval
    (= E[(P − n/2)²]/n when no column ties)."""
    n = grid["n"].astype(float)
    return pd.DataFrame({"c_n": n / 4 - (n - 1) * grid["rb_p_reversed"],
                         "c_lo": n / 4 - (n - 1) * grid["rb_reversed_ci_high"],
                         "c_hi": n / 4 - (n - 1) * grid["rb_reversed_ci_low"]}, index=grid.index)


def upper_bound_from(x) -> int:
    """Smallest ``m ≥ 2`` with ``⌊k²/4⌋/(k(k−1)) ≤ x`` for every ``k ≥ m`` (the bound is non-increasing
    in k, so the first such k); ValueError for ``x ≤ ¼``, its limit."""
    x = Fraction(repr(x)) if isinstance(x, float) else Fraction(x)  # 0.3 means 3/10
    if x <= Fraction(1, 4):
        raise ValueError(f"the upper bound stays above 1/4 for every n; {x} is never reached")
    k = 2
    while holds_bounds(k)[1] > x:
        k += 1
    return k


def finite_first_order(ensembles, limit: float = 1.0) -> list:
    """The ensembles whose first-order constant ``pair_split_constant`` is below ``limit``."""
    return [e for e in ensembles if pair_split_constant(e) < limit]
