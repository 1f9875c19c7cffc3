"""Statistics of the law of the random baseline (the baseline-law chapter), computed from the grid of
:func:`dobrushin.random.cells.run_grid` / :func:`~dobrushin.random.ensembles.summarise`; tested in ``tests/test_law.py``."""
from __future__ import annotations

import pandas as pd

from fractions import Fraction

from .ensembles import holds_bounds, pair_split_constant


def split_constant(grid: pd.DataFrame) -> pd.DataFrame:
    """The split constant of the attaining pair, ``c_n = n/4 − (n − 1) P̂(both reversed)`` from the
    column-averaged estimate ``rb_p_reversed``, with the 95% interval from that estimate's interval
    (``c_lo`` from its upper end, ``c_hi`` from its lower end).  Equals ``E[(K₊ − n/2)²]/n`` of the
    attaining pair's sign count ``K₊ = #{k: u_k > 0}`` when no column ties."""
    n = grid["n"].astype(float)
    return pd.DataFrame({"c_n": n / 4 - (n - 1) * grid["rb_p_reversed"],
                         "c_lo": n / 4 - (n - 1) * grid["rb_reversed_ci_high"],
                         "c_hi": n / 4 - (n - 1) * grid["rb_reversed_ci_low"]}, index=grid.index)


def upper_bound_from(x) -> int:
    """The smallest ``m ≥ 2`` with ``⌊k²/4⌋/(k(k−1)) ≤ x`` for **every** ``k ≥ m``: from that size on no
    column-exchangeable continuous ensemble can give ``P(holds) > x``. The bound is non-increasing in
    ``k`` (``(m+1)/(4m+2)`` at both ``k = 2m+1`` and ``k = 2m+2``) and tends to ¼, so the answer is the
    first ``k`` where it is ``≤ x``; ``x ≤ ¼`` is never reached (ValueError)."""
    x = Fraction(repr(x)) if isinstance(x, float) else Fraction(x)  # 0.3 means 3/10
    if x <= Fraction(1, 4):
        raise ValueError(f"the upper bound stays above 1/4 for every n; {x} is never reached")
    k = 2
    while holds_bounds(k)[1] > x:
        k += 1
    return k


def finite_first_order(ensembles, limit: float = 1.0) -> list:
    """The ensembles whose first-order fixed-pair constant ``c_W`` is below ``limit`` (of order one);
    for the others (softmax at low temperature, ``c_W`` in the hundreds) every simulated size is
    pre-asymptotic."""
    return [e for e in ensembles if pair_split_constant(e) < limit]
