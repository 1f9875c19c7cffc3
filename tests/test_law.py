"""The baseline-law statistics (dobrushin.random.law) against direct computations."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dobrushin as db
from dobrushin.random import cells as C
from dobrushin.random import ensembles as E
from dobrushin.random import law


def test_swap_z_is_the_standardised_mean_of_the_indicator_difference():
    rng = np.random.default_rng(0)
    T = 5000
    outcome = rng.choice(3, size=T, p=[0.3, 0.25, 0.45])  # 0: holds, 1: both reversed, 2: mixed
    x = (outcome == 0).astype(float) - (outcome == 1)
    direct = x.mean() / (x.std(ddof=0) / np.sqrt(T))  # by definition, from the per-matrix values
    grid = pd.DataFrame({"p_holds": [(outcome == 0).mean()], "p_both_reversed": [(outcome == 1).mean()],
                         "trials": [T]})
    assert law.swap_z(grid).iloc[0] == pytest.approx(direct, rel=1e-12)


def test_split_constant_is_the_imbalance_of_the_attaining_pair():
    n, T = 9, 2000
    A = E.sample_matrices("dirichlet(1)", n, 0, T, seed=3)
    st = E.pair_statistics(A, db.analyse(A, tol=0).witness)
    assert (st["zero"] == 0).all()  # continuous rows: no ties
    direct = np.mean((st["pos"] - n / 2) ** 2) / n
    row = E.summarise(pd.DataFrame([{"n": n, "ensemble": "dirichlet(1)", **E.simulate("dirichlet(1)", n, T, seed=3)}]))
    c = law.split_constant(row).iloc[0]
    assert c["c_n"] == pytest.approx(direct, rel=1e-9)
    assert c["c_lo"] <= c["c_n"] <= c["c_hi"]


def test_fixed_pair_counts_by_brute_force():
    A = E.sample_matrices("softmax_gaussian(1)", 5, 0, 7, seed=1)
    want = [sum(A[m, r, k] > A[m, s, k] for k in range(5)) for r, s in ((0, 1), (2, 3)) for m in range(7)]
    assert law.fixed_pair_counts(A).tolist() == want
    s = law.fixed_pair_split("softmax_gaussian(1)", 5, 7, seed=1)
    v = (np.array(want) - 2.5) ** 2 / 5
    assert s["pairs"] == 14 and s["c"] == pytest.approx(v.mean())
    assert s["halfwidth"] == pytest.approx(1.96 * v.std(ddof=1) / np.sqrt(14))
    # uniform rows: the fixed-pair constant is c_W = 1/8 (first order; within sampling error)
    big = law.fixed_pair_split("dirichlet(1)", 200, 200, seed=5)
    assert abs(big["c"] - E.pair_split_constant("dirichlet(1)")) < 3 * big["halfwidth"] + 0.01


# ---------------------------------------------------------------- bound, approach, fixed vs attaining pair
from fractions import Fraction


def test_upper_bound_is_non_increasing_and_upper_bound_from_is_the_first_size():
    ub = [E.holds_bounds(k)[1] for k in range(2, 2001)]
    assert all(a >= b for a, b in zip(ub, ub[1:]))
    for x in (Fraction(2, 7), Fraction(3, 10), Fraction(1, 2), Fraction(26, 100), 0.3):
        m = law.upper_bound_from(x)
        xf = Fraction(repr(x)) if isinstance(x, float) else x
        assert all(E.holds_bounds(k)[1] <= xf for k in range(m, 2001))
        assert m == 2 or E.holds_bounds(m - 1)[1] > xf
    assert law.upper_bound_from(Fraction(2, 7)) == 7  # 12/42 = 16/56 = 2/7 at n = 7 and 8
    assert law.upper_bound_from(0.3) == 5
    with pytest.raises(ValueError, match="never reached"):
        law.upper_bound_from(0.25)


def _grid(rows):
    return pd.DataFrame([{"ensemble": e, "n": n, "rb_p_holds": p, "rb_ci_low": lo, "rb_ci_high": hi}
                         for e, n, p, lo, hi in rows])


def test_approach_sides_and_first_below():
    g = _grid([("a", 8, 0.27, 0.26, 0.28), ("a", 64, 0.252, 0.251, 0.253),
               ("b", 8, 0.26, 0.25, 0.27), ("b", 64, 0.233, 0.230, 0.236), ("b", 128, 0.249, 0.245, 0.253),
               ("c", 4, 0.3, 0.2, 0.4), ("c", 16, 0.2501, 0.2499, 0.2503)])
    ap = law.approach(g, ["a", "b", "c"]).set_index("ensemble")
    assert ap.loc["a", "side"] == "above" and ap.loc["b", "side"] == "at" and ap.loc["c", "side"] == "at"
    assert ap.loc["b", "first_below"] == 64 and ap.loc["b", "n_min"] == 64 and ap.loc["b", "p_min"] == 0.233
    assert np.isnan(ap.loc["a", "first_below"]) and ap.loc["c", "n_max"] == 16
    with pytest.raises(ValueError, match="no sizes"):
        law.approach(g, ["zzz"])


def test_typical_pairs_compares_at_equal_n():
    cells = [("dirichlet(1)", 16, 300)]
    grid = C.run_grid(cells, 5, check=False, cache=None)
    typ = law.typical_pairs(grid, ["dirichlet(1)"], [16, 32], matrices=10, seed=9)
    r16, r32 = typ.iloc[0], typ.iloc[1]
    fp = law.fixed_pair_split("dirichlet(1)", 16, 10, 9)
    sc = law.split_constant(grid).iloc[0]
    assert r16["c_fixed"] == fp["c"] and r16["c_n"] == sc["c_n"]
    assert r16["gap"] == pytest.approx(sc["c_n"] - fp["c"])
    assert r16["h_gap"] == pytest.approx(np.hypot((sc["c_hi"] - sc["c_lo"]) / 2, fp["halfwidth"]))
    assert r16["c_W"] == pytest.approx(0.125, abs=1e-6)
    assert np.isnan(r32["c_n"])  # no grid cell at n = 32
