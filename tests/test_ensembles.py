"""Random ensembles and the law of the random baseline (lib/dobrushin/random/ensembles.py).

Checks against independent computations: a brute-force (pure numpy, no kernel) classifier, the
sympy integral for n = 2, scipy's softmax, the Dirichlet moments, exhaustive column permutations for
the column-averaging lemma, and exact integer arithmetic for the direct comparison.
"""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dobrushin as db
from dobrushin.random import cells as C
from dobrushin.random import ensembles as E

ENSEMBLES = ["dirichlet(1)", "dirichlet(0.1)", "dirichlet(10)", "softmax_gaussian(0.3)", "softmax_gaussian(2)"]


def brute_force(A: np.ndarray):
    """Independent classifier: all pairwise half-L1 distances by explicit loops (exact order of
    summation irrelevant: continuous ensembles have a unique attaining pair a.s.), then the
    comparisons on the attaining pair.  Returns (holds, both_reversed, mixed)."""
    n = A.shape[0]
    best, pair = -1.0, None
    for i in range(n):
        for j in range(i + 1, n):
            d = 0.5 * float(np.sum(np.abs(A[i] - A[j])))
            if d > best:
                best, pair = d, (i, j)
    i, j = pair
    x, y = A[i, i] >= A[j, i], A[j, j] >= A[i, j]
    return x and y, (not x) and (not y), x != y


# -------------------------------------------------------------------------------------- samplers
@pytest.mark.parametrize("spec", ENSEMBLES)
def test_samplers_produce_stochastic_matrices(spec):
    ens = E.parse_ensemble(spec)
    A = ens.sample(7, 50, np.random.default_rng(1))
    assert A.shape == (50, 7, 7) and A.dtype == np.float64
    db.check_stochastic(A, atol=1e-12)  # raises on any negative entry or row sum off 1
    assert (A >= 0).all()


def test_dirichlet_moments_match_theory():
    # Dirichlet(α,…,α) on n coordinates: E = 1/n, Var = (1/n)(1 − 1/n)/(nα + 1)
    n, rng = 5, np.random.default_rng(2)
    for alpha in (0.1, 1.0, 10.0):
        X = E.dirichlet(n, alpha, 4000, rng).reshape(-1, n)  # 20000 rows
        var = (1 / n) * (1 - 1 / n) / (n * alpha + 1)
        se_mean = math.sqrt(var / len(X))
        assert np.all(np.abs(X.mean(0) - 1 / n) < 6 * se_mean)
        # variance estimate: relative standard error ≤ ~sqrt(kurtosis/N); 10% is ≥ 5 se here
        assert np.all(np.abs(X.var(0) / var - 1) < 0.1), (alpha, X.var(0), var)


def test_softmax_gaussian_matches_scipy_softmax():
    from scipy.special import softmax

    A = E.softmax_gaussian(6, 0.5, 3, np.random.default_rng(5))
    Z = np.random.default_rng(5).standard_normal((3, 6, 6))
    np.testing.assert_allclose(A, softmax(Z / 0.5, axis=-1), rtol=1e-13, atol=1e-300)


@pytest.mark.parametrize("bad", [dict(n=0), dict(n=2.5), dict(alpha=0), dict(alpha=-1), dict(alpha=float("nan")),
                                 dict(batch=-1), dict(rng=np.random.RandomState(0))])
def test_sampler_bad_input(bad):
    args = dict(n=3, alpha=1.0, batch=2, rng=np.random.default_rng(0)) | bad
    with pytest.raises(ValueError):
        E.dirichlet(args["n"], args["alpha"], args["batch"], args["rng"])


@pytest.mark.parametrize("spec", ["dirichlet", "dirichlet()", "uniform(1)", "softmax_gaussian(-1)", "dirichlet(x)"])
def test_parse_ensemble_rejects(spec):
    with pytest.raises(ValueError):
        E.parse_ensemble(spec)


def test_parse_ensemble_names_round_trip():
    for spec in ENSEMBLES:
        ens = E.parse_ensemble(spec)
        assert E.parse_ensemble(ens.name) == ens


# ------------------------------------------------------------------------------------ exact values
def test_exact_values_and_bounds():
    import sympy as sp

    assert E.exact_probability(2) == sp.Rational(1, 2)
    assert E.exact_probability(3) == sp.Rational(1, 3)
    with pytest.raises(ValueError, match="depends on the ensemble"):
        E.exact_probability(4)
    for n in range(2, 40):
        lo, hi = E.holds_bounds(n)
        # the bounds are the extremes of p(n − p)/(n(n − 1)) over 1 ≤ p ≤ n − 1
        vals = [p * (n - p) / (n * (n - 1)) for p in range(1, n)]
        assert float(lo) == pytest.approx(min(vals)) and float(hi) == pytest.approx(max(vals))


def test_n2_value_by_symbolic_integration():
    # n = 2, rows (p, 1 − p) and (q, 1 − q) uniform: the only pair has x = y = p − q, so the condition
    # holds iff p ≥ q; integrate the indicator over the unit square symbolically.
    import sympy as sp

    p, q = sp.symbols("p q", real=True)
    val = sp.integrate(sp.Piecewise((1, p >= q), (0, True)), (q, 0, 1), (p, 0, 1))
    assert sp.nsimplify(val) == E.exact_probability(2)


@pytest.mark.parametrize("spec", ["dirichlet(1)", "softmax_gaussian(0.5)"])
def test_n2_simulation_within_binomial_bound(spec):
    T = 200_000
    c = E.simulate(spec, 2, T, seed=11)
    # |p̂ − ½| ≤ 5 standard errors of a Binomial(T, ½) proportion (false alarm ≈ 6e-7)
    assert abs(c["holds"] / T - 0.5) <= 5 * math.sqrt(0.25 / T)
    assert c["mixed"] == 0 and c["disagreements"] == 0  # n = 2: x = y on the only pair


@pytest.mark.parametrize("spec", ["dirichlet(1)", "dirichlet(10)", "softmax_gaussian(2)"])
def test_n3_exact_third_against_simulation_and_brute_force(spec):
    T = 150_000
    c = E.simulate(spec, 3, T, seed=12)
    third = float(E.exact_probability(3))
    assert abs(c["holds"] / T - third) <= 5 * math.sqrt(third * (1 - third) / T)
    # the column-averaged score is exactly 2/6 for every 3 x 3 matrix (P·N = 2 when P + N = 3)
    assert c["rb_holds_num"] == 2 * T and c["rb_holds_num_sq"] == 4 * T
    # independent classifier on a prefix of the same stream: identical verdicts
    A = E.sample_matrices(spec, 3, 0, 3000, seed=12)
    bf = np.array([brute_force(a) for a in A])
    c_small = E.simulate(spec, 3, 3000, seed=12)
    assert (c_small["holds"], c_small["both_reversed"], c_small["mixed"]) == tuple(int(v) for v in bf.sum(0))


@pytest.mark.parametrize("n", [4, 6, 9])
def test_counts_agree_with_brute_force(n):
    A = E.sample_matrices("dirichlet(1)", n, 0, 400, seed=3)
    bf = np.array([brute_force(a) for a in A]).sum(0)
    c = E.simulate("dirichlet(1)", n, 400, seed=3)
    assert (c["holds"], c["both_reversed"], c["mixed"]) == tuple(int(v) for v in bf)
    assert c["holds"] + c["both_reversed"] + c["mixed"] == 400


# --------------------------------------------------------------------------------------- lemmas
def _swap_rows(A, i, j):
    B = A.copy()
    B[[i, j]] = B[[j, i]]
    return B


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 12), spec=st.sampled_from(ENSEMBLES))
def test_row_swap_lemma(seed, n, spec):
    """Swapping the two rows of the attaining pair keeps it attaining and flips both comparisons."""
    A = E.parse_ensemble(spec).sample(n, 1, np.random.default_rng(seed))[0]
    pairs = db.attaining_pairs(A, tol=0)
    (i, j) = pairs[0]
    B = _swap_rows(A, i, j)
    tau = {i: j, j: i}
    relabel = sorted(tuple(sorted((tau.get(a, a), tau.get(b, b)))) for a, b in pairs)
    assert db.attaining_pairs(B, tol=0) == relabel  # every distance moves with its rows
    assert (i, j) in db.attaining_pairs(B, tol=0)
    assert db.kappa(B) == db.kappa(A)
    # both comparisons flip: x' = −x, y' = −y exactly
    assert B[i, i] - B[j, i] == -(A[i, i] - A[j, i]) and B[j, j] - B[i, j] == -(A[j, j] - A[i, j])
    x, y = A[i, i] > A[j, i], A[j, j] > A[i, j]
    xs, ys = B[i, i] > B[j, i], B[j, j] > B[i, j]
    strict = A[i, i] != A[j, i] and A[j, j] != A[i, j]
    if strict:
        assert xs == (not x) and ys == (not y)
        if len(pairs) == 1:  # unique attaining pair: "holds" and "both reversed" trade places
            assert db.equality_holds(B, tol=0) == ((not x) and (not y))
            assert db.equality_holds(A, tol=0) == (x and y)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 5), spec=st.sampled_from(ENSEMBLES))
def test_column_averaging_lemma_exhaustive(seed, n, spec):
    """Over all n! column permutations the fraction that hold is ((P+Z)(N+Z) − Z)/(n(n−1))."""
    A = E.parse_ensemble(spec).sample(n, 1, np.random.default_rng(seed))[0]
    res = db.analyse(A[None], tol=0)
    stt = E.pair_statistics(A[None], res.witness)
    P, N, Z = int(stt["pos"][0]), int(stt["neg"][0]), int(stt["zero"][0])
    if len(db.attaining_pairs(A, tol=0)) != 1:
        return  # the lemma needs a unique attaining pair (almost sure, float ties aside)
    perms = list(itertools.permutations(range(n)))
    Ap = np.stack([A[:, list(s)] for s in perms])
    holds = db.equality_holds(Ap, tol=0)
    assert int(holds.sum()) * n * (n - 1) == ((P + Z) * (N + Z) - Z) * len(perms)


# ------------------------------------------------------------------------ theorem + exact check
def test_exact_equality_on_known_matrices():
    holds = np.array([[6, 1, 1], [1, 6, 1], [1, 1, 6]]) / 8
    fails = np.array([[1, 7, 0], [7, 1, 0], [4, 0, 4]]) / 8
    tie = np.array([[5, 2, 1], [3, 2, 3], [1, 6, 1]]) / 8
    assert E.exact_equality(holds) and not E.exact_equality(fails) and E.exact_equality(tie)


def test_exact_equality_resolves_what_float64_cannot():
    # n = 2 with p = 1e-300 < q = 2e-300: x = p − q < 0, so equality fails; in float64 1 − p = 1 − q = 1,
    # and the direct comparison of κ(½(I+A)) with the bound sees equality.
    p, q = 1e-300, 2e-300
    A = np.array([[p, 1 - p], [q, 1 - q]])
    assert db.kappa(db.rollout_factor(A)) == db.layer_bound(A)  # float64 cannot tell
    assert not db.equality_holds(A, tol=0)
    assert not E.exact_equality(A)
    assert E.exact_equality(A[::-1].copy())  # rows swapped: x = y = q − p > 0, equality holds


def test_exact_equality_agrees_with_theorem_on_random_matrices():
    A = E.sample_matrices("dirichlet(1)", 6, 0, 60, seed=9)
    got = [E.exact_equality(a) for a in A]
    assert got == list(db.equality_holds(A, tol=0))


@pytest.mark.parametrize("spec", ["dirichlet(0.1)", "softmax_gaussian(0.3)"])
def test_no_disagreements_with_theorem(spec):
    c = E.simulate(spec, 5, 20_000, seed=4)
    assert c["checked"] == 20_000 and c["disagreements"] == 0


def test_exact_equality_bad_input():
    with pytest.raises(ValueError):
        E.exact_equality(np.ones((2, 3)) / 3)
    with pytest.raises(ValueError):
        E.exact_equality(np.array([[-0.5, 1.5], [0.5, 0.5]]))


# ---------------------------------------------------------------------------------- determinism
def test_same_seed_same_counts_regardless_of_batch():
    a = E.simulate("dirichlet(1)", 12, 900, seed=5)
    b = E.simulate("dirichlet(1)", 12, 900, seed=5, batch=7)
    c = E.simulate("dirichlet(1)", 12, 900, seed=5)
    assert a == b == c
    assert E.simulate("dirichlet(1)", 12, 900, seed=6) != a


def test_runs_extend_additively():
    whole = E.simulate("softmax_gaussian(1)", 9, 1500, seed=8)
    first = E.simulate("softmax_gaussian(1)", 9, 1000, seed=8)
    rest = E.simulate("softmax_gaussian(1)", 9, 500, seed=8, start=1000)
    assert {k: first[k] + rest[k] for k in whole} == whole


def test_sample_matrices_is_position_stable(monkeypatch):
    monkeypatch.setattr(E, "BLOCK_ELEMENTS", 64)  # 4 matrices of 4 x 4 per block
    full = E.sample_matrices("dirichlet(1)", 4, 0, 11, seed=1)
    assert E.block_size(4) == 4
    np.testing.assert_array_equal(E.sample_matrices("dirichlet(1)", 4, 3, 9, seed=1), full[3:9])


def test_simulate_bad_input():
    for kw in (dict(n=1), dict(trials=-1), dict(seed=-2), dict(batch=0), dict(n=3.0)):
        args = dict(ensemble="dirichlet(1)", n=3, trials=5, seed=0) | kw
        batch = args.pop("batch", None)
        with pytest.raises(ValueError):
            E.simulate(**args, batch=batch)


# ------------------------------------------------------------------------------------- summaries
def test_summarise_against_independent_formulas():
    n, T = 7, 3000
    A = E.sample_matrices("dirichlet(1)", n, 0, T, seed=2)
    res = db.analyse(A, tol=0)
    stt = E.pair_statistics(A, res.witness)
    x, y = stt["x_ok"], stt["y_ok"]
    c = E.simulate("dirichlet(1)", n, T, seed=2)
    row = E.summarise(pd.DataFrame([{"n": n, "ensemble": "dirichlet(1)", **c}])).iloc[0]
    assert row["p"] == pytest.approx(x.__and__(y).mean())
    from scipy.stats import binomtest

    ci = binomtest(int(c["holds"]), T).proportion_ci(method="wilson")  # an implementation independent of ours
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)
    assert row["corr"] == pytest.approx(np.corrcoef(x.astype(float), y.astype(float))[0, 1])
    s = ((stt["pos"] + stt["zero"]) * (stt["neg"] + stt["zero"]) - stt["zero"]) / (n * (n - 1))
    assert row["rb_p_holds"] == pytest.approx(s.mean())
    half = row["rb_ci_high"] - row["rb_p_holds"]
    assert half == pytest.approx(1.96 * s.std(ddof=1) / math.sqrt(T), rel=2e-3)
    assert row["imbalance_c"] == pytest.approx(np.mean((stt["pos"] - n / 2) ** 2) / n)
    # the lemma on these data: P(holds) and P(both reversed) have the same column-averaged estimate
    assert row["rb_p_reversed"] == pytest.approx(row["rb_p_holds"])
    assert row["rb_p_mixed"] == pytest.approx(1 - 2 * row["rb_p_holds"])


# ---------------------------------------------------------------------------------- cache + files
def test_run_grid_caches_cells(tmp_path):
    cells = [("dirichlet(1)", 5, 300), ("softmax_gaussian(1)", 6, 200)]
    a = C.run_grid(cells, seed=1, cache=tmp_path)
    assert not a["cached"].any()
    b = C.run_grid(cells, seed=1, cache=tmp_path)
    assert b["cached"].all()
    keep = [c for c in a.columns if c not in ("cached",)]
    pd.testing.assert_frame_equal(a[keep], b[keep])
    assert list(a.columns) == list(b.columns)  # a table lists its columns alike, computed or read back
    # a changed parameter is a different cell; a corrupt file is recomputed
    assert not C.run_grid([("dirichlet(1)", 5, 301)], seed=1, cache=tmp_path)["cached"].any()
    C.cell_path(tmp_path, C.cell_params("dirichlet(1)", 5, 300, 1, True)).write_text("{not json")
    assert not C.run_grid(cells[:1], seed=1, cache=tmp_path)["cached"].any()
    files = list(tmp_path.glob("*.json"))
    # keyed by the digest of the code that computes a cell (not a hand-bumped version)
    from dobrushin.store.code import code_digest

    assert all(json.loads(f.read_text())["params"]["code_digest"] == code_digest(E.CELL_CODE) for f in files)


def test_write_table_and_reference(tmp_path):
    ref = pd.DataFrame({"n": [9, 197], "ensemble": ["dirichlet(1)"] * 2, "p": [0.27, 0.25],
                        "ci_low": [0.26, 0.249], "ci_high": [0.28, 0.251]})
    entry = C.write_table(ref, tmp_path / "baseline" / "reference.csv", {"k": 1})
    man = json.loads((tmp_path / "baseline" / "manifest.json").read_text())
    assert man["files"]["reference.csv"]["sha256"] == entry["sha256"]
    # the table as the chapters read it back
    from dobrushin.experiments.results_loading import load_reference_grid

    assert load_reference_grid(tmp_path).to_dict("list") == {"n": [9, 197], "p": [0.27, 0.25]}
    assert load_reference_grid(tmp_path / "elsewhere") is None


# ------------------------------------------------------------------------------ split constant
def test_pair_split_constant_closed_forms_and_quadrature():
    from scipy import integrate, stats

    assert E.pair_split_constant("dirichlet(1)") == pytest.approx(1 / 8, abs=1e-10)  # Exp(1): ¼ + ⅛ − ¼
    # softmax closed form against direct quadrature with the log-normal density (s = 1/T = 1)
    d = stats.lognorm(1.0)
    pp = -integrate.quad(lambda w: w * d.pdf(w) ** 2, 0, np.inf)[0]
    gmd = 2 * integrate.quad(lambda x: d.cdf(x) * d.sf(x), 0, np.inf)[0]
    want = 0.25 + 2 * pp**2 * d.var() / d.mean() ** 2 + pp * gmd / d.mean()
    assert E.pair_split_constant("softmax_gaussian(1)") == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("spec", ["dirichlet(1)", "softmax_gaussian(3)"])
def test_pair_split_constant_matches_fixed_pairs(spec):
    # fixed pairs of independent rows at n = 400: c = E[(P − n/2)²]/n within 5 standard errors
    # plus 0.005 for the finite-n correction of the first-order (delta-method) formula
    n, K = 400, 10_000
    A = E.parse_ensemble(spec).sample(n, K // n * 2, np.random.default_rng(21)).reshape(-1, 2, n)
    P = (A[:, 0] > A[:, 1]).sum(1)
    c = (P - n / 2) ** 2 / n
    assert abs(c.mean() - E.pair_split_constant(spec)) < 5 * c.std() / math.sqrt(len(c)) + 0.005


def test_exact_equality_against_fractions():
    """Independent exact computation with Fractions over all pairs (no float shortlist)."""
    from fractions import Fraction

    def exact_all_pairs(A):
        n = A.shape[0]
        F = [[Fraction(float(x)) for x in row] for row in A]
        B = [[(Fraction(int(i == k)) + F[i][k]) / 2 for k in range(n)] for i in range(n)]
        kap = lambda X: max(sum(abs(X[i][k] - X[j][k]) for k in range(n)) / 2  # noqa: E731
                            for i in range(n) for j in range(i + 1, n))
        return kap(B) == (1 + kap(F)) / 2

    for spec, n in (("dirichlet(0.1)", 7), ("dirichlet(1)", 5), ("softmax_gaussian(0.3)", 6)):
        A = E.sample_matrices(spec, n, 0, 40, seed=13)
        assert [E.exact_equality(a) for a in A] == [exact_all_pairs(a) for a in A]
    p, q = 1e-300, 2e-300  # the float64-invisible case
    A = np.array([[p, 1 - p], [q, 1 - q]])
    assert E.exact_equality(A) == exact_all_pairs(A) is False
