"""The library's matrix routines against an independent brute-force implementation.

Everything here is checked against plain-Python loops written in this file (pairs of rows, sums of
|a − b|, and the 1 − Σ min formula as a second route to κ), on adversarial matrices: identical rows,
identity and permutation matrices, one-hot rows, many tied pairs, n = 1 and 2, and exact binary
fractions (multiples of 1/64 and coarser) where every float64 operation is exact, so that with
``tol = 0`` a tie must be found, never missed.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _numerics import rollout_paths_atol, row_normalise_rtol

import dobrushin as d
from dobrushin import (
    analyse,
    attaining_pairs,
    check_stochastic,
    equality_holds,
    kappa,
    layer_bound,
    mutually_self_dominant,
    restrict,
    rollout,
    rollout_bound,
    rollout_factor,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ----------------------------------------------------------------------------- brute-force reference


def bf_dist(A, i, j) -> float:
    """½ Σ_k |A_ik − A_jk| with plain floats (index order)."""
    s = 0.0
    for k in range(len(A)):
        s += abs(float(A[i][k]) - float(A[j][k]))
    return 0.5 * s


def bf_dist_min(A, i, j) -> float:
    """The same distance by the other route: ½(Σ_k A_ik + Σ_k A_jk) − Σ_k min(A_ik, A_jk)
    (= 1 − Σ min for stochastic rows)."""
    si = sum(float(v) for v in A[i])
    sj = sum(float(v) for v in A[j])
    return 0.5 * (si + sj) - sum(min(float(a), float(b)) for a, b in zip(A[i], A[j]))


def bf_kappa(A) -> float:
    n = len(A)
    return max((bf_dist(A, i, j) for i in range(n) for j in range(n)), default=0.0)


def bf_msd(A, i, j, tol) -> bool:
    """A_ii − A_ji ≥ −tol and A_jj − A_ij ≥ −tol."""
    return float(A[i][i]) - float(A[j][i]) >= -tol and float(A[j][j]) - float(A[i][j]) >= -tol


def bf_attaining(A, tol):
    n = len(A)
    k = bf_kappa(A)
    return [(i, j) for i in range(n) for j in range(i + 1, n) if bf_dist(A, i, j) >= k - tol]


def bf_holds(A, tol) -> bool:
    return any(bf_msd(A, i, j, tol) for i, j in bf_attaining(A, tol))


def bf_factor(A):
    n = len(A)
    return [[0.5 * ((1.0 if i == k else 0.0) + float(A[i][k])) for k in range(n)] for i in range(n)]


def bf_matmul(X, Y):
    n = len(X)
    return [[sum(X[i][k] * Y[k][j] for k in range(n)) for j in range(n)] for i in range(n)]


# ----------------------------------------------------------------------------------------- strategies


def compose(rng_ints, denom):
    """A row of multiples of 1/denom summing to exactly 1, from n − 1 cut points."""
    cuts = sorted(rng_ints)
    return [(b - a) / denom for a, b in zip([0] + cuts, cuts + [denom])]


@st.composite
def binary_matrices(draw, max_n=7, n=None):
    """Adversarial stochastic matrices whose entries are exact binary fractions."""
    n = draw(st.integers(1, max_n)) if n is None else n
    denom = draw(st.sampled_from([2, 4, 8, 64]))
    kind = draw(st.sampled_from(["random", "onehot", "perm", "identity", "identical", "mixed-rows"]))
    if kind == "random":
        rows = [compose(draw(st.lists(st.integers(0, denom), min_size=n - 1, max_size=n - 1)), denom)
                for _ in range(n)]
    elif kind == "onehot":
        rows = [[1.0 if k == t else 0.0 for k in range(n)] for t in draw(
            st.lists(st.integers(0, n - 1), min_size=n, max_size=n))]
    elif kind == "perm":
        p = draw(st.permutations(range(n)))
        rows = [[1.0 if k == p[i] else 0.0 for k in range(n)] for i in range(n)]
    elif kind == "identity":
        rows = [[1.0 if k == i else 0.0 for k in range(n)] for i in range(n)]
    elif kind == "identical":
        r = compose(draw(st.lists(st.integers(0, denom), min_size=n - 1, max_size=n - 1)), denom)
        rows = [list(r) for _ in range(n)]
    else:  # a few prototype rows repeated: many tied pairs
        protos = [compose(draw(st.lists(st.integers(0, denom), min_size=n - 1, max_size=n - 1)), denom)
                  for _ in range(draw(st.integers(1, 3)))]
        rows = [list(protos[draw(st.integers(0, len(protos) - 1))]) for _ in range(n)]
    return np.array(rows, dtype=np.float64).reshape(n, n)


@st.composite
def float_matrices(draw, max_n=7):
    """Generic stochastic matrices (Dirichlet rows, sometimes very peaked)."""
    n = draw(st.integers(1, max_n))
    alpha = draw(st.sampled_from([0.02, 0.3, 1.0, 10.0]))
    seed = draw(st.integers(0, 2**32 - 1))
    return np.random.default_rng(seed).dirichlet(np.full(n, alpha), size=n)


any_matrices = st.one_of(binary_matrices(), float_matrices())


def dirichlet(seed, n, alpha=0.1, lead=()):
    return np.random.default_rng(seed).dirichlet(np.full(n, alpha), size=lead + (n,))


# ------------------------------------------------------------------------------------------ κ and D


@SETTINGS
@given(A=binary_matrices())
def test_kappa_exact_on_binary_fractions(A):
    k = bf_kappa(A)
    assert kappa(A) == k
    n = len(A)
    # second route (1 − Σ min) agrees exactly: every operation on these entries is exact
    assert k == max((bf_dist_min(A, i, j) for i in range(n) for j in range(n)), default=0.0)


@SETTINGS
@given(A=float_matrices())
def test_kappa_on_generic_matrices(A):
    k = kappa(A)
    assert k == bf_kappa(A)  # the library's definition: index-order sums, as brute force does
    n = len(A)
    alt = max((bf_dist_min(A, i, j) for i in range(n) for j in range(n)), default=0.0)
    assert abs(k - alt) <= 1e-12
    # at most ½(r_i + r_j) of the rows' exact sums, up to the rounding of n terms (rows summing to 1 in
    # floating point may exceed 1 by an ulp, and so may κ)
    top = max((0.5 * (math.fsum(A[i]) + math.fsum(A[j])) for i in range(n) for j in range(n)), default=0.0)
    assert 0.0 <= k <= top * (1 + 2 * n * np.finfo(float).eps)


def test_kappa_of_special_matrices():
    for n in range(1, 7):
        assert kappa(np.eye(n)) == (1.0 if n > 1 else 0.0)
        assert kappa(np.full((n, n), 1 / n)) == 0.0
        P = np.eye(n)[np.random.default_rng(n).permutation(n)]
        assert kappa(P) == (1.0 if n > 1 else 0.0)


# ------------------------------------------------------------------------------- the two theorems


@SETTINGS
@given(A=any_matrices)
def test_layer_bound_holds(A):
    B = rollout_factor(A)
    assert np.array_equal(B, np.array(bf_factor(A)))
    kB = kappa(B)
    assert kB == bf_kappa(bf_factor(A))
    assert kB <= layer_bound(A) + 1e-15
    # analyse computes κ(B) without forming B; it must match B's own κ up to rounding
    res = analyse(A)
    assert abs(float(res.kappa_factor) - kB) <= 1e-12
    assert float(res.slack) >= -1e-15


@SETTINGS
@given(A=binary_matrices())
def test_equality_iff_attaining_pair_is_mutually_self_dominant(A):
    """On exact inputs with tol = 0: equality_holds(A) ⇔ κ(½(I+A)) == ½(1+κ(A)) ⇔ brute force."""
    holds = equality_holds(A, tol=0)
    assert isinstance(holds, bool)
    kB = bf_kappa(bf_factor(A))
    bound = 0.5 * (1.0 + bf_kappa(A))
    assert kB <= bound
    assert holds == (kB == bound) == bf_holds(A, 0.0)
    assert holds == (kappa(rollout_factor(A)) == layer_bound(A))
    res = analyse(A, tol=0)
    assert float(res.kappa_factor) == kB  # exact too: every quantity is a binary fraction
    assert bool(res.holds) == holds and (float(res.slack) == 0.0) == holds


@SETTINGS
@given(A=float_matrices())
def test_equality_on_generic_matrices_matches_brute_force(A):
    tol = d.DEFAULT_TOL
    assert equality_holds(A) == bf_holds(A, tol)


@SETTINGS
@given(A=binary_matrices(), data=st.data())
def test_kappa_is_submultiplicative(A, data):
    B = data.draw(binary_matrices(n=len(A)))
    AB = np.array(bf_matmul(A.tolist(), B.tolist())).reshape(A.shape)
    AB = AB / AB.sum(1, keepdims=True)  # exact for binary fractions (sums are exactly 1)
    assert kappa(AB) <= kappa(A) * kappa(B) + 1e-15
    assert kappa(AB) == bf_kappa(AB)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), L=st.integers(1, 5), n=st.integers(1, 6),
       alpha=st.sampled_from([0.05, 0.5, 5.0]))
def test_rollout_and_its_bound(seed, L, n, alpha):
    As = dirichlet(seed, n, alpha, (L,))
    R = rollout(As)
    # independent product: F_L ⋯ F_1, layer 1 first
    want = bf_factor(As[0])
    for layer in range(1, L):
        want = bf_matmul(bf_factor(As[layer]), want)
    assert np.allclose(R, np.array(want), atol=1e-14, rtol=0)
    assert np.allclose(R.sum(-1), 1.0, atol=1e-12)
    bound = rollout_bound(As)
    assert abs(bound - np.prod([0.5 * (1 + bf_kappa(a)) for a in As])) <= 1e-14
    assert bf_kappa(R) <= bound + 1e-12
    assert kappa(R, atol=1e-9) <= bound + 1e-12


def test_rollout_of_batched_torch_stack():
    As = torch.from_numpy(dirichlet(1, 5, 0.2, (3, 4)))  # (B=3, L=4, 5, 5)
    R = rollout(As)
    assert isinstance(R, torch.Tensor) and R.shape == (3, 5, 5)
    # batched (bmm) and unbatched (mm) products are different BLAS kernels: on some CPUs they sum in
    # another order, so they agree to the rounding bound of a chain of stochastic products, not bitwise
    atol = rollout_paths_atol(n=5, L=4)
    for b in range(3):
        assert torch.allclose(R[b], torch.from_numpy(rollout(As[b].numpy())), atol=atol, rtol=0)
    rb = rollout_bound(As)
    assert rb.shape == (3,)
    assert torch.all(torch.from_numpy(np.asarray(kappa(R, atol=1e-9))) <= rb + 1e-12)
    with pytest.raises(ValueError, match="stack of layers"):
        rollout(np.eye(3))
    with pytest.raises(ValueError, match="stack of layers"):
        rollout_bound(np.eye(3))


# ---------------------------------------------------------------- attaining pairs and self-dominance


@SETTINGS
@given(A=any_matrices, tol=st.sampled_from([0.0, 1e-12, 0.1]))
def test_attaining_pairs_against_brute_force(A, tol):
    got = attaining_pairs(A, tol)
    assert got == bf_attaining(A, tol)
    assert got == sorted(got) and all(i < j for i, j in got)
    if len(A) >= 2:
        assert got, "κ is always attained by some pair"


@SETTINGS
@given(A=any_matrices, tol=st.sampled_from([0.0, 1e-12, 0.1]), data=st.data())
def test_mutually_self_dominant_against_brute_force(A, tol, data):
    n = len(A)
    i = data.draw(st.integers(0, n - 1))
    j = data.draw(st.integers(0, n - 1))
    assert mutually_self_dominant(A, i, j, tol) == bf_msd(A, i, j, tol)


@SETTINGS
@given(A=binary_matrices())
def test_witness_is_an_attaining_pair_that_proves_the_answer(A):
    res = analyse(A, tol=0)
    i, j = (int(v) for v in res.witness)
    if len(A) < 2:
        assert (i, j) == (-1, -1)
        return
    att = bf_attaining(A, 0.0)
    assert (i, j) in att
    assert mutually_self_dominant(A, i, j, 0) == bool(res.holds)
    good = [p for p in att if bf_msd(A, *p, 0.0)]
    assert (i, j) == (good or att)[0]  # the first qualifying pair in lexicographic order


def test_small_n_edge_cases():
    A1 = np.array([[1.0]])
    assert kappa(A1) == 0.0 and attaining_pairs(A1) == [] and equality_holds(A1) is False
    assert float(analyse(A1).kappa_factor) == 0.0
    for a, c in itertools.product([0.0, 0.25, 0.5, 1.0], repeat=2):
        A = np.array([[a, 1 - a], [c, 1 - c]])
        assert kappa(A) == abs(a - c)
        # n = 2: the only pair attains κ; it is self-dominant iff a ≥ c (both conditions reduce to that)
        assert equality_holds(A, tol=0) == (a >= c) == bf_holds(A, 0.0)


def test_tied_pairs_one_self_dominant():
    """Several pairs tie at κ; only a later one is mutually self-dominant: it must be found (tol = 0)."""
    A = np.array([
        [0.0, 1.0, 0.0, 0.0],   # rows 0 and 1 swap mass: pair (0, 1) attains κ = 1, not self-dominant
        [1.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0],   # rows 2 and 3 are self-attending: pair (2, 3) attains κ = 1 and is
        [0.0, 0.0, 0.0, 1.0],   # mutually self-dominant
    ])
    assert set(attaining_pairs(A, 0)) == {(i, j) for i in range(4) for j in range(i + 1, 4)}
    assert not mutually_self_dominant(A, 0, 1, 0)
    assert equality_holds(A, tol=0) and bf_holds(A, 0.0)
    assert tuple(analyse(A, tol=0).witness) == (0, 2)  # (0, 2): A_00 = 0 ≥ A_20 = 0 and A_22 = 1 ≥ A_02 = 0
    # only (0, 1) attains once the other rows are pulled together: no witness
    B = np.array([[0.0, 1.0, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    assert attaining_pairs(B, 0) == [(0, 1)] and not equality_holds(B, tol=0) and not bf_holds(B, 0.0)


def test_tol_widens_the_attaining_set_monotonically():
    A = dirichlet(7, 12, 0.3)
    sets = [set(attaining_pairs(A, t)) for t in (0.0, 1e-3, 1e-2, 0.1, 1.0)]
    assert all(a <= b for a, b in zip(sets, sets[1:]))
    assert len(sets[-1]) == 12 * 11 // 2


# ----------------------------------------------------------------------- batches, numpy and torch


@pytest.mark.parametrize("lead", [(3,), (2, 3)])
def test_batched_equals_per_matrix_loop(lead):
    rng = np.random.default_rng(11)
    n = 9
    A = rng.dirichlet(np.full(n, 0.2), size=lead + (n,))
    A[(0,) * len(lead)] = np.eye(n)
    res = analyse(A)
    k = kappa(A)
    h = equality_holds(A)
    lb = layer_bound(A)
    assert k.shape == lead and h.shape == lead and h.dtype == bool and res.witness.shape == lead + (2,)
    for idx in np.ndindex(*lead):
        one = analyse(A[idx])
        assert k[idx] == kappa(A[idx]) == bf_kappa(A[idx])
        assert h[idx] == equality_holds(A[idx])
        assert lb[idx] == layer_bound(A[idx])
        assert res.kappa_factor[idx] == one.kappa_factor
        assert tuple(res.witness[idx]) == tuple(one.witness)


def test_numpy_and_torch_agree():
    A = dirichlet(5, 8, 0.1, (4,))
    A[1] = np.eye(8)
    T = torch.from_numpy(A)
    # κ, the test and the layer bound: the same index-order kernel on the same bits, so bitwise; ½(I + A) is
    # one correctly rounded add and multiply per entry in numpy and torch alike, so bitwise too
    assert np.array_equal(kappa(A), kappa(T).numpy())
    assert isinstance(kappa(T), torch.Tensor)
    assert np.array_equal(equality_holds(A), equality_holds(T).numpy())
    assert np.array_equal(layer_bound(A), layer_bound(T).numpy())
    assert np.array_equal(rollout_factor(A), rollout_factor(T).numpy())
    assert attaining_pairs(A[2]) == attaining_pairs(T[2])
    assert mutually_self_dominant(A[2], 0, 3) == mutually_self_dominant(T[2], 0, 3)
    # renormalised restriction: numpy's and torch's row sums may add in another order (see _numerics)
    np.testing.assert_allclose(restrict(A, [0, 2, 5]), restrict(T, [0, 2, 5]).numpy(), rtol=row_normalise_rtol(3),
                               atol=0)
    # float32 torch input (what attention capture gives) is analysed in float64, same as its upcast
    T32 = T.float()
    assert np.array_equal(kappa(T32, atol=1e-5).numpy(), kappa(T32.double().numpy(), atol=1e-5))
    ra, rt = analyse(A), analyse(T)
    for f in ("kappa", "kappa_factor", "bound", "slack", "holds", "witness"):
        assert np.array_equal(getattr(ra, f), getattr(rt, f)), f


def test_equality_holds_return_types():
    A = dirichlet(3, 5)
    assert type(equality_holds(A)) is bool
    assert type(equality_holds(torch.from_numpy(A))) is bool
    assert isinstance(equality_holds(np.stack([A, A])), np.ndarray)
    assert isinstance(equality_holds(torch.from_numpy(np.stack([A, A]))), torch.Tensor)


# -------------------------------------------------------------------------------------- bad input


BAD = [
    (np.ones((2, 3)) / 3, "not square"),
    (np.zeros((0, 0)), "empty"),
    (np.zeros((2, 0, 0)), "empty"),
    (np.ones(3) / 3, "shape"),
    (np.array(0.5), "shape"),
    (np.array([[0.5, np.nan], [0.5, 0.5]]), "NaN"),
    (np.array([[0.5, 0.5], [np.inf, 0.5]]), "entry (1, 0)"),
    (np.array([[1.2, -0.2], [0.5, 0.5]]), "negative entry"),
    (np.full((2, 3, 2), 0.5), "3 x 2"),
    (np.array([[0.5, 0.5, 0.0], [0.2, 0.2, 0.2], [0.0, 0.0, 1.0]]), "row 1 sums to 0.6"),
    (np.array([["a", "b"], ["c", "d"]]), "non-numeric"),
    (np.array([[1 + 0j, 0], [0, 1]]), "complex"),
    (np.array([[0.5, None], [0.5, 0.5]], dtype=object), "non-numeric"),
]


@pytest.mark.parametrize("A, message", BAD, ids=[m for _, m in BAD])
@pytest.mark.parametrize("fn", [kappa, equality_holds, layer_bound, rollout_factor, analyse, check_stochastic,
                                lambda A: restrict(A, [0])])
def test_bad_input_raises_a_useful_value_error(A, message, fn):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        fn(A)


def test_bad_row_is_named_in_a_batch_and_in_torch():
    A = np.stack([np.eye(3), np.eye(3)])
    A[1, 2] = [0.3, 0.3, 0.3]
    with pytest.raises(ValueError, match=r"matrix \(1,\): row 2 sums to 0\.9"):
        kappa(A)
    with pytest.raises(ValueError, match=r"matrix \(1,\): row 2 sums to 0\.9"):
        kappa(torch.from_numpy(A))
    A[1, 2] = [0.5, np.nan, 0.5]
    with pytest.raises(ValueError, match=r"matrix \(1,\): entry \(2, 1\) is nan"):
        equality_holds(A)


def test_tolerances_are_checked():
    A = np.eye(3)
    with pytest.raises(ValueError, match="tol"):
        equality_holds(A, tol=-1e-3)
    with pytest.raises(ValueError, match="tol"):
        attaining_pairs(A, tol=float("nan"))
    with pytest.raises(ValueError, match="atol"):
        kappa(A, atol=-1)
    near = np.array([[0.5 + 1e-7, 0.5], [0.5, 0.5]])
    assert kappa(near) >= 0  # within the default atol of 1e-6
    with pytest.raises(ValueError, match=r"row 0 sums to 1\.0000001, not 1"):  # enough digits to see why
        kappa(near, atol=1e-9)


def test_single_matrix_functions_reject_batches_and_bad_indices():
    A = np.stack([np.eye(3)] * 2)
    with pytest.raises(ValueError, match="single n x n matrix"):
        attaining_pairs(A)
    with pytest.raises(ValueError, match="single n x n matrix"):
        mutually_self_dominant(A, 0, 1)
    with pytest.raises(ValueError, match=r"j=3 is not a token index in range\(0, 3\)"):
        mutually_self_dominant(np.eye(3), 0, 3)
    with pytest.raises(ValueError, match="i=0.5 is not a token index"):
        mutually_self_dominant(np.eye(3), 0.5, 1)


# ------------------------------------------------------------------------------------------ restrict


@SETTINGS
@given(A=any_matrices, data=st.data())
def test_restrict_matches_brute_force(A, data):
    n = len(A)
    keep = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    raw = restrict(A, keep, renormalize=False)
    assert np.array_equal(raw, np.array([[A[i][j] for j in keep] for i in keep]))
    mass = [sum(float(A[i][j]) for j in keep) for i in keep]
    if min(mass) <= 0:
        with pytest.raises(ValueError, match=r"row \d+ puts no mass on the kept tokens"):
            restrict(A, keep)
        bad = keep[[m <= 0 for m in mass].index(True)]
        with pytest.raises(ValueError, match=f"row {bad} "):
            restrict(A, keep)
        return
    R = restrict(A, keep)
    want = np.array([[A[i][j] / m for j in keep] for i, m in zip(keep, mass)])
    assert np.allclose(R, want, rtol=1e-14, atol=0)
    assert np.allclose(R.sum(-1), 1.0, atol=1e-14)
    mask = np.zeros(n, dtype=bool)
    mask[keep] = True
    assert np.array_equal(restrict(A, mask), restrict(A, sorted(keep)))


def test_restrict_batches_torch_and_negative_indices():
    A = dirichlet(2, 6, 0.5, (2, 3))
    R = restrict(A, [5, 0, 2])
    assert R.shape == (2, 3, 3, 3)
    # the raw submatrix is a gather: bitwise; the renormalised one divides by row sums that numpy (batched
    # or not) and torch may add in another order: within the bound of row_normalise_rtol
    rtol = row_normalise_rtol(3)
    for idx in np.ndindex(2, 3):
        assert np.array_equal(restrict(A, [5, 0, 2], renormalize=False)[idx],
                              restrict(A[idx], [5, 0, 2], renormalize=False))
        np.testing.assert_allclose(R[idx], restrict(A[idx], [5, 0, 2]), rtol=rtol, atol=0)
    assert np.array_equal(restrict(A, [-1, 0]), restrict(A, [5, 0]))
    T = torch.from_numpy(A)
    assert torch.equal(restrict(T, torch.tensor([5, 0, 2]), renormalize=False),
                       torch.from_numpy(restrict(A, [5, 0, 2], renormalize=False)))
    np.testing.assert_allclose(restrict(T, torch.tensor([5, 0, 2])).numpy(), R, rtol=rtol, atol=0)
    mask = torch.tensor([True, False, True, False, False, True])
    assert torch.equal(restrict(T, mask), restrict(T, [0, 2, 5]))


@pytest.mark.parametrize("keep, message", [
    ([], "selects no tokens"),
    (np.zeros(4, dtype=bool), "selects no tokens"),
    (np.ones(3, dtype=bool), r"boolean keep mask has shape \(3,\), expected \(4,\)"),
    ([0, 4], r"outside range\(0, 4\)"),
    ([-5], r"outside range\(0, 4\)"),
    ([1, 1], "more than once"),
    ([0.0, 1.0], "integer token indices"),
    ([[0, 1]], "1-d array"),
])
def test_restrict_bad_keep(keep, message):
    with pytest.raises(ValueError, match=message):
        restrict(np.eye(4), keep)


def test_restrict_zero_mass_row_is_named():
    A = np.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5], [0.0, 0.0, 1.0]])
    with pytest.raises(ValueError, match="row 0 puts no mass on the kept tokens"):
        restrict(A, [0, 2])
    raw = restrict(A, [0, 2], renormalize=False)  # the raw submatrix is still available
    assert np.array_equal(raw, np.array([[0.0, 0.0], [0.0, 1.0]]))


def test_float32_input_is_analysed_exactly_without_a_float64_copy():
    A32 = dirichlet(4, 30, 0.1, (3,)).astype(np.float32)
    up = A32.astype(np.float64)
    for X in (A32, torch.from_numpy(A32)):
        r32, r64 = analyse(X, atol=1e-5), analyse(up, atol=1e-5)
        for f in ("kappa", "kappa_factor", "bound", "slack", "holds", "witness"):
            assert np.array_equal(getattr(r32, f), getattr(r64, f)), f
        assert np.array_equal(np.asarray(kappa(X, atol=1e-5)), kappa(up, atol=1e-5))
    assert check_stochastic(A32, atol=1e-5, convert=False) is A32  # validated in place
    assert check_stochastic(A32, atol=1e-5).dtype == np.float64
    bad = A32.copy()
    bad[1, 2, 3] += np.float32(0.01)
    with pytest.raises(ValueError, match=r"matrix \(1,\): row 2 sums to 1\.01"):
        analyse(bad, atol=1e-5)
