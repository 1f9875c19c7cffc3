"""The Theory chapter's worked examples: table, picture and text agree with direct computation."""
from fractions import Fraction

import matplotlib

matplotlib.use("Agg")
import numpy as np
import pytest

from dobrushin.report import theory_figures as TF


def _kappa_exact(M):
    """κ in exact rational arithmetic (independent of the library)."""
    n = len(M)
    return max((sum(abs(M[i][k] - M[j][k]) for k in range(n)) / 2 for i in range(n) for j in range(n)),
               default=Fraction(0))


def test_examples_exact_and_stochastic():
    for name, A in TF.examples().items():
        assert np.allclose(A.sum(1), 1) and (A * 8 == np.round(A * 8)).all(), name


def test_table_matches_exact_arithmetic():
    df = TF.example_rows(TF.examples())
    assert list(df["matrix"]) == ["holds", "fails", "tie"]
    assert "equality_holds" in df.columns
    for (name, E8), row in zip(TF.EXAMPLES_EIGHTHS.items(), df.to_dict("records")):
        M = [[Fraction(x, 8) for x in r] for r in E8]
        n = len(M)
        B = [[(Fraction(int(i == k)) + M[i][k]) / 2 for k in range(n)] for i in range(n)]
        kA, kB = _kappa_exact(M), _kappa_exact(B)
        assert row["κ(A)"] == float(kA) and row["κ(½(I+A))"] == float(kB)
        assert row["bound ½(1+κ(A))"] == float((1 + kA) / 2)
        assert row["equality_holds"] == (kB == (1 + kA) / 2)
    assert list(df["equality_holds"]) == [True, False, True]


def test_witness_is_self_dominant_when_holds():
    for name, A in TF.examples().items():
        i, j = TF.witness(A)
        msd = A[i, i] >= A[j, i] and A[j, j] >= A[i, j]
        assert msd == (name != "fails")


def test_text_and_figure():
    exs = TF.examples()
    v = TF.worked_example_values(exs)
    # the roles the notebook's sentences state: holds attains the bound, fails falls short because A_ii < A_ji,
    # the tie's first pair is self-dominant through a tie A_jj = A_ij, its second is not
    assert (v["ex-holds-b"], v["ex-holds-bound"], v["ex-fails-b"], v["ex-fails-bound"]) == ("13/16", "13/16", "3/4", "15/16")
    val = lambda k: eval(v[k]) if "/" in v[k] else float(v[k])  # noqa: E731  (fractions as written)
    assert val("ex-fails-0-aii") < val("ex-fails-0-aji") and v["ex-fails-msd"] == "none"
    assert val("ex-tie-0-ajj") == val("ex-tie-0-aij") and val("ex-tie-1-aii") < val("ex-tie-1-aji")
    assert v["ex-tie-pairs"] == "(0, 2), (1, 2)" and v["ex-tie-msd"] == "(0, 2)" and v["ex-tie-b"] == v["ex-tie-bound"]
    r = TF.rollout_values(exs)
    assert float(r["ex-rollout"]) <= float(r["ex-rollout-b"]) <= float(r["ex-rollout-bound"])
    assert float(r["ex-rollout-bound"]) == pytest.approx((13 / 16) * (15 / 16) * (3 / 4), abs=1e-6)
    fig = TF.worked_examples_figure(exs)
    assert len(fig.axes) == 3
    titles = [ax.get_title() for ax in fig.axes]
    assert "holds" in titles[0] and "fails" in titles[1]
    texts = {t.get_text() for t in fig.axes[1].texts}
    assert {"7/8", "1/8", "1/2", "0"} <= texts


def test_bad_input():
    with pytest.raises(ValueError, match="n x n"):
        TF.describe("x", np.ones((2, 3)) / 3)
    with pytest.raises(ValueError, match="needs the examples"):
        TF.worked_example_values({"holds": TF.examples()["holds"]})
    assert TF.fraction_text(0.375) == "3/8" and TF.fraction_text(1.0) == "1"
