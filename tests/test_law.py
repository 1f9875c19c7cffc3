"""The baseline-law statistics (dobrushin.random.law) against direct computations."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

import dobrushin as db
from dobrushin.random import ensembles as E
from dobrushin.random import law


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
