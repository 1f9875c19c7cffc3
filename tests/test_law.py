"""The baseline-law statistics (dobrushin.random.law) against direct computations."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dobrushin as db
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
