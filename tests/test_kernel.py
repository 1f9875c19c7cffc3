"""The pairwise-distance kernel: every path computes the same bits.

The kernel's contract (``dobrushin.kernel``) is bit-exact: ``D_ij = 0.5 * (Σ_k |A_ik − A_jk|)`` with the sum
accumulated in index order.  So the fast numba path, the torch path (the one CUDA tensors take) and an
independent plain-Python loop must agree *exactly* — on random, peaked, binary-fraction and tie-heavy
matrices, for every input flavour — and so must SciPy's ``pdist(metric="cityblock")``, which sums in the
same order.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist, squareform

from dobrushin import kernel

nb = pytest.importorskip("dobrushin._kernel_numba")

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ------------------------------------------------------------------------------------------ matrices


def dirichlet(rng, n, alpha=0.05, b=1):
    return rng.dirichlet(np.full(n, alpha), size=(b, n))


def binary(rng, n, b=1, denom=64):
    """Rows of multiples of 1/denom summing to exactly 1 (every kernel operation is then exact)."""
    out = np.zeros((b, n, n))
    for m in range(b):
        for i in range(n):
            cuts = np.sort(rng.integers(0, denom + 1, size=n - 1))
            out[m, i] = np.diff(np.concatenate([[0], cuts, [denom]])) / denom
    return out


def tie_heavy(rng, n, b=1):
    """A few distinct one-hot / half-half rows repeated: many pairs share the maximal distance."""
    protos = []
    for _ in range(3):
        r = np.zeros(n)
        k = rng.integers(0, n, size=2)
        r[k[0]] += 0.5
        r[k[1]] += 0.5
        protos.append(r)
    protos.append(np.eye(n)[rng.integers(0, n)])
    idx = rng.integers(0, len(protos), size=(b, n))
    return np.array(protos)[idx]


def brute_distances(A: np.ndarray) -> np.ndarray:
    """Independent: plain Python floats, sum in index order."""
    n = A.shape[0]
    D = np.zeros((n, n))
    rows = A.tolist()
    for i in range(n):
        for j in range(n):
            s = 0.0
            for a, c in zip(rows[i], rows[j]):
                s += abs(a - c)
            D[i, j] = 0.5 * s
    return D


def brute_summary(A: np.ndarray, tol: float):
    """Independent: κ, κ(½(I+A)) from the factor's own distances, holds, first witness."""
    n = A.shape[0]
    if n < 2:
        return 0.0, 0.0, False, (-1, -1)
    D = brute_distances(A)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    kap = max(D[i, j] for i, j in pairs)
    thr = kap - tol
    att = [(i, j) for i, j in pairs if D[i, j] >= thr]
    good = [(i, j) for i, j in att if A[i, i] - A[j, i] >= -tol and A[j, j] - A[i, j] >= -tol]
    pen = max(D[i, j] - max(A[j, i] - A[i, i], 0.0) - max(A[i, j] - A[j, j], 0.0) for i, j in pairs)
    return kap, 0.5 + 0.5 * pen, bool(good), (good or att)[0]


def summaries_equal(a: kernel.PairSummary, b: kernel.PairSummary) -> bool:
    return all(torch.equal(x.cpu(), y.cpu()) for x, y in zip(a, b))


def run_paths(A, tol, monkeypatch):
    """The numba summary and the torch summary of the same input."""
    monkeypatch.setenv("DOBRUSHIN_KERNEL", "numba")
    fast = kernel.pair_summary(A, tol)
    monkeypatch.setenv("DOBRUSHIN_KERNEL", "torch")
    ref = kernel.pair_summary(A, tol)
    monkeypatch.delenv("DOBRUSHIN_KERNEL")
    return fast, ref


KINDS = {
    "uniform-random": lambda rng, n, b: rng.random((b, n, n)) / n,  # rows need not sum to 1 here
    "dirichlet-0.05": lambda rng, n, b: dirichlet(rng, n, 0.05, b),
    "dirichlet-1": lambda rng, n, b: dirichlet(rng, n, 1.0, b),
    "binary-64": lambda rng, n, b: binary(rng, n, b),
    "tie-heavy": tie_heavy,
}


# --------------------------------------------------------------------------------------------- tests


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 15, 16, 17, 24, 33])
def test_fast_path_equals_reference_and_brute_force(kind, n, monkeypatch):
    rng = np.random.default_rng(n * 31 + len(kind))
    A = KINDS[kind](rng, n, 3)
    for tol in (0.0, 1e-12, 0.05):
        fast, ref = run_paths(A, tol, monkeypatch)
        assert summaries_equal(fast, ref), (kind, n, tol)
        for m in range(A.shape[0]):
            k, kf, h, w = brute_summary(A[m], tol)
            assert fast.kappa[m].item() == k
            assert fast.kappa_factor[m].item() == kf
            assert bool(fast.holds[m]) == h
            assert tuple(fast.witness[m].tolist()) == w


@pytest.mark.parametrize("n", [2, 3, 16, 17, 40])
def test_distances_match_brute_force_and_scipy_bitwise(n, monkeypatch):
    rng = np.random.default_rng(n)
    A = dirichlet(rng, n, 0.1, 2)
    monkeypatch.setenv("DOBRUSHIN_KERNEL", "numba")
    Dn = kernel.half_l1_distances(A).numpy()
    monkeypatch.setenv("DOBRUSHIN_KERNEL", "torch")
    Dt = kernel.half_l1_distances(torch.from_numpy(A)).numpy()
    for m in range(2):
        assert np.array_equal(Dn[m], brute_distances(A[m]))
        assert np.array_equal(Dn[m], 0.5 * squareform(pdist(A[m], "cityblock")))
    assert np.array_equal(Dn, Dt)
    assert np.array_equal(Dn, Dn.transpose(0, 2, 1))


def test_binary_fraction_ties_are_found_with_tol_zero():
    """Tie-heavy binary-fraction matrices: κ is attained by many pairs; with tol = 0 every attaining
    pair counts (the witness is the lexicographically first good pair)."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        n = int(rng.integers(2, 30))
        A = tie_heavy(rng, n, 1)[0]
        s = kernel.pair_summary(A[None], 0.0)
        k, kf, h, w = brute_summary(A, 0.0)
        assert (s.kappa.item(), s.kappa_factor.item(), bool(s.holds), tuple(s.witness[0].tolist())) == (k, kf, h, w)


@SETTINGS
@given(n=st.integers(1, 40), seed=st.integers(0, 2**32 - 1), kind=st.sampled_from(sorted(KINDS)),
       tol=st.sampled_from([0.0, 1e-12, 1e-3]))
def test_property_fast_equals_torch(n, seed, kind, tol):
    A = KINDS[kind](np.random.default_rng(seed), n, 2)
    fast = kernel._pair_summary_numba(A, tol)
    ref = kernel._pair_summary_torch(torch.from_numpy(A), tol)
    assert summaries_equal(fast, ref)


def test_every_numba_driver_agrees():
    """serial batch, parallel batch (one matrix per thread) and parallel-within-a-matrix."""
    rng = np.random.default_rng(5)
    for n in (2, 7, 16, 17, 50, 130):
        A = np.concatenate([dirichlet(rng, n, 0.05, 3), binary(rng, n, 2), tie_heavy(rng, n, 2)])
        b = A.shape[0]
        outs = []
        with nb.slp_enabled():
            for fn in (nb.summary_batch, nb.summary_batch_serial):
                r = (np.zeros(b), np.zeros(b), np.zeros(b, np.bool_), np.zeros((b, 2), np.int64))
                fn(A, 0.0, *r)
                outs.append(r)
            one = [nb.summary_one(A[m], 0.0) for m in range(b)]
        for r in outs[1:]:
            assert all(np.array_equal(x, y) for x, y in zip(outs[0], r))
        for m in range(b):
            k, f, h, i, j = one[m]
            assert (k, f, h, i, j) == (outs[0][0][m], outs[0][1][m], outs[0][2][m], *outs[0][3][m])
        with nb.slp_enabled():
            for m in range(b):
                D1 = np.zeros((n, n))
                D2 = np.zeros((n, n))
                nb.distances_one(A[m], D1)
                nb.distances_one_serial(A[m], D2)
                assert np.array_equal(D1, D2)
                assert np.array_equal(D1, 0.5 * squareform(pdist(A[m], "cityblock")))


@pytest.mark.parametrize("flavour", ["float32", "transposed", "strided", "torch", "torch-float32",
                                     "torch-noncontig", "requires-grad"])
def test_input_flavours_give_the_same_bits(flavour, monkeypatch):
    rng = np.random.default_rng(3)
    base = dirichlet(rng, 19, 0.1, 3)
    big = np.zeros((3, 38, 38))
    big[:, ::2, ::2] = base
    X = {
        "float32": base.astype(np.float32),
        "transposed": np.ascontiguousarray(base.transpose(0, 2, 1)).transpose(0, 2, 1),
        "strided": big[:, ::2, ::2],
        "torch": torch.from_numpy(base),
        "torch-float32": torch.from_numpy(base.astype(np.float32)),
        "torch-noncontig": torch.from_numpy(big)[:, ::2, ::2],
        "requires-grad": torch.from_numpy(base).clone().requires_grad_(True),
    }[flavour]
    expect_src = base.astype(np.float32).astype(np.float64) if "float32" in flavour else base
    expect = kernel._pair_summary_torch(torch.from_numpy(expect_src), 1e-12)
    fast, ref = run_paths(X, 1e-12, monkeypatch)
    assert summaries_equal(fast, expect)
    assert summaries_equal(ref, expect)
    monkeypatch.setenv("DOBRUSHIN_KERNEL", "numba")
    assert torch.equal(kernel.half_l1_distances(X), kernel._half_l1_torch(torch.from_numpy(expect_src)))


def test_torch_path_blocking_does_not_change_bits(monkeypatch):
    """Tiny block budgets force row blocks and matrix chunks in the torch path; same bits."""
    rng = np.random.default_rng(9)
    A = torch.from_numpy(np.concatenate([dirichlet(rng, 23, 0.1, 3), binary(rng, 23, 2)]))
    want = kernel._pair_summary_torch(A, 0.0)
    wantD = kernel._half_l1_torch(A)
    for budget in (8 * 23, 8 * 23 * 5, 8 * 23 * 23 * 2):
        monkeypatch.setattr(kernel, "BLOCK_BYTES", budget)
        assert torch.equal(kernel._half_l1_torch(A), wantD)
        assert summaries_equal(kernel._pair_summary_torch(A, 0.0), want)


def test_results_are_on_the_input_device_and_dtypes():
    A = torch.from_numpy(dirichlet(np.random.default_rng(1), 6, 0.3, 2))
    s = kernel.pair_summary(A, 0.0)
    assert s.kappa.dtype == torch.float64 and s.kappa_factor.dtype == torch.float64
    assert s.holds.dtype == torch.bool and s.witness.dtype == torch.int64
    assert s.kappa.shape == (2,) and s.witness.shape == (2, 2)
    assert kernel.kappa_only(A).shape == (2,)


def test_kernel_rejects_bad_shapes_and_backend_names(monkeypatch):
    with pytest.raises(ValueError, match=r"\(b, n, n\)"):
        kernel.pair_summary(np.zeros((2, 3)), 0.0)
    with pytest.raises(ValueError, match=r"\(b, n, n\)"):
        kernel.half_l1_distances(np.zeros((1, 2, 3)))
    monkeypatch.setenv("DOBRUSHIN_KERNEL", "fortran")
    with pytest.raises(ValueError, match="DOBRUSHIN_KERNEL"):
        kernel.pair_summary(np.eye(2)[None], 0.0)


def test_generated_tile_is_up_to_date():
    src = Path(nb.__file__).read_text()
    m = re.search(r"# --- BEGIN GENERATED: tile_source\((\d+), (\d+)\) ---\n(.*?)# --- END GENERATED ---", src, re.S)
    assert m, "generated block markers missing"
    rb, cb = int(m.group(1)), int(m.group(2))
    assert (rb, cb) == (nb.RB, nb.CB)
    assert m.group(3) == nb.tile_source(rb, cb)
    assert nb.CB % nb.RB == 0  # a row block must lie inside one panel
