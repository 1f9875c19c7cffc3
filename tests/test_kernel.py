"""The pairwise-distance kernel: every path computes the same bits.

The kernel's contract (``dobrushin.math.kernel``) is bit-exact: ``D_ij = 0.5 * (Σ_k |A_ik − A_jk|)`` with the sum
accumulated in index order.  So the fast numba path, the torch path (the one CUDA tensors take) and an
independent plain-Python loop must agree *exactly* — on random, peaked, binary-fraction and tie-heavy
matrices, for every input flavour — and so must SciPy's ``pdist(metric="cityblock")``, which sums in the
same order.
"""
from __future__ import annotations


import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.spatial.distance import pdist, squareform

from dobrushin.math import kernel

nb = pytest.importorskip("dobrushin.math._kernel_numba")

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


def sink_heavy(rng, n, b=1):
    """Attention-like: most rows put a large share on one or two 'sink' tokens (as trained transformers
    do), a few outlier rows are peaked elsewhere; then bound-based pruning can skip most tiles."""
    out = np.empty((b, n, n))
    for m in range(b):
        base = np.zeros(n)
        base[rng.integers(0, n, size=2)] += [0.7, 0.3]
        lam = rng.uniform(0.3, 0.95, size=(n, 1))
        out[m] = lam * base + (1 - lam) * rng.dirichlet(np.full(n, 0.3), size=n)
        for i in rng.choice(n, size=min(n, 3), replace=False):
            out[m, i] = rng.dirichlet(np.full(n, 0.02))
    return out


def near_tie(rng, n, b=1):
    """Adversarial for any float screen: tie-heavy binary-fraction rows, then in some rows a tiny mass
    ε ∈ {2⁻⁵², 2⁻⁴⁰, 1e-9, 1e-6} moved between two entries, so many distances differ from the
    maximum (or from each other) by a few ulps up to 1e-6 — inside the screens' error bounds."""
    out = tie_heavy(rng, n, b)
    eps = np.array([2.0**-52, 2.0**-40, 1e-9, 1e-6])
    for m in range(b):
        for i in rng.choice(n, size=max(1, n // 2), replace=False):
            e = eps[rng.integers(0, len(eps))]
            src = np.flatnonzero(out[m, i] >= e)
            k1, k2 = rng.integers(0, n), src[rng.integers(0, len(src))]
            if k1 != k2:
                out[m, i, k1] += e
                out[m, i, k2] -= e
    return out


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
    "sink-heavy": sink_heavy,
    "near-tie": near_tie,
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
    # bitwise by construction: numba, torch, the plain loop and SciPy's cityblock all add |A_ik − A_jk| in
    # index order k = 0..n−1, the one order the kernel's contract fixes (independent of threads and CPU)
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
       tol=st.sampled_from([0.0, 1e-12, 1e-3]), f32=st.booleans())
def test_property_fast_equals_torch(n, seed, kind, tol, f32):
    """numba kernel == screened torch path (cdist screen + exact recheck) == the exact torch reference
    (every distance in index order), on float64 and float32 input."""
    A = KINDS[kind](np.random.default_rng(seed), n, 2)
    if f32:
        A = A.astype(np.float32)
    fast = kernel._pair_summary_numba(A, tol)
    assert summaries_equal(fast, kernel._pair_summary_torch(torch.from_numpy(A), tol))
    assert summaries_equal(fast, kernel._pair_summary_torch_exact(torch.from_numpy(A), tol))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n", [2, 9, 64, 200])
def test_torch_screen_never_changes_an_answer_on_near_ties(n, dtype):
    """Near-tie matrices (distances a few ulps to 1e-6 apart): the float screen cannot settle those
    pairs, the exact recheck must; answers equal the brute force and the numba kernel bit for bit."""
    rng = np.random.default_rng(n)
    A = near_tie(rng, n, 3).astype(dtype)
    for tol in (0.0, 1e-12, 1e-7):
        s = kernel._pair_summary_torch(torch.from_numpy(A), tol)
        assert summaries_equal(s, kernel._pair_summary_numba(A, tol))
        if n <= 64:
            for m in range(3):
                k, kf, h, w = brute_summary(A[m].astype(np.float64), tol)
                assert (s.kappa[m].item(), s.kappa_factor[m].item(), bool(s.holds[m])) == (k, kf, h)
                assert tuple(s.witness[m].tolist()) == w


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("kind", ["dirichlet-0.05", "uniform-random", "near-tie"])
def test_screen_error_bound_holds(kind, dtype):
    """|½ cdist − D| ≤ c·(r_i + r_j) (c = screen_coefficient), D the exact index-order distances."""
    rng = np.random.default_rng(7)
    n = 120
    A = torch.from_numpy(KINDS[kind](rng, n, 2)).to(dtype)
    Dt = 0.5 * torch.cdist(A, A, p=1).to(torch.float64)
    A64 = A.to(torch.float64)
    r = A64.abs().sum(-1)
    c = kernel.screen_coefficient(n, dtype)
    for m in range(2):
        D = torch.from_numpy(0.5 * squareform(pdist(A64[m].numpy(), "cityblock")))
        err = (Dt[m] - D).abs()
        assert bool((err <= c * (r[m][:, None] + r[m][None, :])).all())
    assert kernel.screen_coefficient(n, torch.float32) > kernel.screen_coefficient(n, torch.float64)


def test_torch_path_chunks_bound_memory_and_agree(monkeypatch):
    """With a tiny budget every chunk is one matrix: same answers as one big chunk."""
    A = torch.from_numpy(near_tie(np.random.default_rng(3), 30, 5))
    whole = kernel._pair_summary_torch(A, 0.0)
    monkeypatch.setattr(kernel, "SCREEN_BYTES", 1)
    assert summaries_equal(whole, kernel._pair_summary_torch(A, 0.0))


def test_generated_tile_is_up_to_date():
    import inspect

    src = inspect.getsource(nb)
    for tag, code in ((f"tile_source({nb.RB}, {nb.CB})", nb.tile_source(nb.RB, nb.CB)),
                      ("tile32_source(8, 8)", nb.tile32_source(8, 8))):
        block = src.split(f"# --- BEGIN GENERATED: {tag} ---\n")[1].split("# --- END GENERATED ---")[0]
        assert block == code, tag


def test_threading_layer_is_the_one_chosen():
    import numba

    assert nb.THREADING_LAYER in ("tbb", "omp", "workqueue")
    A = dirichlet(np.random.default_rng(0), 40, 0.1, 8)
    r = (np.zeros(8), np.zeros(8), np.zeros(8, np.bool_), np.zeros((8, 2), np.int64))
    with nb.slp_enabled():
        nb.summary_batch(A, 0.0, True, *r)  # a parallel region: the layer is now loaded
    assert numba.threading_layer() == nb.THREADING_LAYER


def test_every_numba_driver_agrees():
    """serial batch, parallel batch (one matrix per thread) and parallel-within-a-matrix, each with and
    without pruning: the same bits."""
    rng = np.random.default_rng(5)
    for n in (2, 7, 16, 17, 50, 130):
        A = np.concatenate([dirichlet(rng, n, 0.05, 2), binary(rng, n, 2), tie_heavy(rng, n, 2),
                            sink_heavy(rng, n, 2)])
        b = A.shape[0]
        outs = []
        with nb.slp_enabled():
            for prune in (False, True):
                for fn in (nb.summary_batch, nb.summary_batch_serial):
                    r = (np.zeros(b), np.zeros(b), np.zeros(b, np.bool_), np.zeros((b, 2), np.int64))
                    fn(A, 0.0, prune, *r)
                    outs.append(r)
                one = [nb.summary_one(A[m], 0.0, prune) for m in range(b)]
                for m in range(b):
                    k, f, h, i, j = one[m]
                    assert (k, f, h, i, j) == (outs[0][0][m], outs[0][1][m], outs[0][2][m], *outs[0][3][m])
        for r in outs[1:]:
            assert all(np.array_equal(x, y) for x, y in zip(outs[0], r))
        with nb.slp_enabled():
            for m in range(b):
                D1 = np.zeros((n, n))
                D2 = np.zeros((n, n))
                nb.distances_one(A[m], D1)
                nb.distances_one_serial(A[m], D2)
                assert np.array_equal(D1, D2)
                assert np.array_equal(D1, 0.5 * squareform(pdist(A[m], "cityblock")))


@pytest.mark.parametrize("kind", ["sink-heavy", "dirichlet-0.05", "tie-heavy", "binary-64"])
@pytest.mark.parametrize("tol", [0.0, 1e-12, 0.02])
def test_pruning_never_changes_an_answer(kind, tol):
    rng = np.random.default_rng(len(kind) + int(tol * 1000))
    for n in (nb.PRUNE_MIN_N - 1, nb.PRUNE_MIN_N, 150, 203):
        A = KINDS[kind](rng, n, 3)
        a = kernel._pair_summary_numba(A, tol, prune=False)
        b = kernel._pair_summary_numba(A, tol, prune=True)
        assert summaries_equal(a, b), (kind, n, tol)
        assert summaries_equal(a, kernel._pair_summary_torch(torch.from_numpy(A), tol))


@pytest.mark.parametrize("kind", ["sink-heavy", "dirichlet-0.05", "uniform-random"])
def test_tile_bounds_are_upper_bounds_and_prune_sink_heavy_matrices(kind):
    rng = np.random.default_rng(2)
    n = 150
    A = KINDS[kind](rng, n, 2)
    skipped = []
    for m in range(2):
        D = 0.5 * squareform(pdist(A[m], "cityblock"))
        kap = D[np.triu_indices(n, 1)].max()
        with nb.slp_enabled():
            ub, margin, bmin, bsum = nb._bounds(A[m], n, True)
            assert np.all(np.isinf(nb._bounds(A[m], n, False)[0]))
            # the finer bounds of the tiles that might reach κ (lower bounds as good as the seeds can give)
            fine = ub.copy()
            nb._refine(n, 0.0, fine, np.zeros(ub.shape, dtype=np.bool_), np.full(2, kap), margin, bmin, bsum)
            packed, packed_par, Pan = nb._pack_rows(A[m]), nb._pack_rows_par(A[m]), nb._pack(A[m])
        assert 0 < margin < 1e-6
        # one packing pass gives the panels and the row statistics, serial and threaded alike (the sums
        # may be re-associated, so equal up to rounding; panels and minima exactly)
        assert np.array_equal(packed[0], Pan)
        assert np.array_equal(packed[0], packed_par[0]) and np.array_equal(packed[3], packed_par[3])
        assert np.allclose(packed[1], packed_par[1], rtol=0, atol=1e-12)
        assert np.allclose(packed[2], packed_par[2], rtol=0, atol=1e-12)
        assert np.allclose(packed[1], A[m].sum(1), rtol=0, atol=1e-12)
        assert np.allclose(packed[2], np.abs(A[m]).sum(1), rtol=0, atol=1e-12)
        # the row blocks' minima and largest row sums, against numpy
        blocks = [A[m][q * nb.RB:(q + 1) * nb.RB] for q in range(ub.shape[0])]
        assert np.array_equal(bmin, np.stack([b.min(0) for b in blocks]))
        assert np.allclose(bsum, [b.sum(1).max() for b in blocks], rtol=0, atol=1e-12)
        n_skip = n_fine = tighter = 0
        for q in range(ub.shape[0]):
            for p in range((q * nb.RB + 1) // nb.CB, ub.shape[1]):
                rows = range(q * nb.RB, min(n, (q + 1) * nb.RB))
                cols = range(p * nb.CB, min(n, (p + 1) * nb.CB))
                tile = [D[i, j] for i in rows for j in cols if j > i]
                if tile:
                    assert max(tile) <= ub[q, p] + margin
                    assert max(tile) <= fine[q, p] + margin
                assert fine[q, p] <= ub[q, p]
                tighter += fine[q, p] < ub[q, p]
                n_skip += bool(tile) and ub[q, p] < kap - margin
                n_fine += bool(tile) and fine[q, p] < kap - margin
        skipped.append((n_skip, n_fine, tighter))
    if kind == "sink-heavy":
        assert min(s[0] for s in skipped) > 0  # the bound does prune attention-like matrices
        # and the bounds of fewer rows prune more tiles
        assert all(s[1] > s[0] and s[2] > 0 for s in skipped)


def test_bounds_are_off_for_non_finite_input():
    A = dirichlet(np.random.default_rng(0), 150, 0.1, 1)[0]
    A[3, 5] = np.inf
    with nb.slp_enabled():
        ub, margin, bmin, bsum = nb._bounds(A, 150, True)
    assert np.all(np.isinf(ub)) and margin == 0.0 and bmin.shape[0] == 0 and bsum.shape[0] == 0


# ------------------------------------------------------------------------------ the float32 screen


def in_order_f32_distances(A: np.ndarray) -> np.ndarray:
    """Independent: ½ × the float32 in-order sum of |fl32(A_ik) − fl32(A_jk)| (``np.cumsum`` adds in order)."""
    X = A.astype(np.float32)
    diff = np.abs(X[:, None, :] - X[None, :, :])
    return 0.5 * np.cumsum(diff, axis=-1, dtype=np.float32)[..., -1].astype(np.float64)


def scaled_rows(rng, n, b, scale):
    return rng.random((b, n, n)) * (scale / n)


def half_ulp(rng, n, b):
    """Adversarial for the float32 screen: row 1's entries lie just below a float32 rounding midpoint, so
    fl32 loses about half an ulp at every term and the κ pair (0, 1) (D = 1 exactly) comes out of the
    float32 sums about 3.7e-6 short; rows 64 and 65 tie at D = 1, exact in float32, so their lower bound
    would prune the tile of (0, 1) if the error bound were ~5× too small, and the witness (the first
    attaining self-dominant pair) would move from (0, 1) to (64, 65)."""
    out = np.empty((b, n, n))
    for m in range(b):
        A = 0.5 * np.eye(n)[np.zeros(n, dtype=int)] + 0.5 * rng.dirichlet(np.ones(n), size=n)
        A[0] = np.eye(n)[0]
        c = np.floor((1.0 / (n - 1)) / 2.0**-23) * 2.0**-23 + 2.0**-24 - 2.0**-30
        A[1] = np.concatenate([[0.0], np.full(n - 2, c), [1.0 - c * (n - 2)]])
        A[64] = 2.0**-23 * np.eye(n)[0] + (1 - 2.0**-23) * np.eye(n)[64]
        A[65] = np.eye(n)[65]
        out[m] = A
    return out


SCREEN_KINDS = {
    "half-ulp": half_ulp,
    "dirichlet-0.3": lambda rng, n, b: dirichlet(rng, n, 0.3, b),
    "sink-heavy": sink_heavy,
    "near-tie": near_tie,
    "binary-64": lambda rng, n, b: binary(rng, n, b),
    "subnormal": lambda rng, n, b: dirichlet(rng, n, 1.0, b) * 2.0**-1000,  # float32 flushes these to 0
    "row-sums-1e3": lambda rng, n, b: scaled_rows(rng, n, b, 1e3),
}


@pytest.mark.parametrize("kind", sorted(SCREEN_KINDS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_screen_error_bounds_the_float32_distances(kind, dtype):
    """|D̃ − D| ≤ screen_error(n, margin), D̃ the float32 in-order distances, D the exact float64 ones
    (SciPy, index order); and the generated float32 tile computes exactly D̃."""
    rng = np.random.default_rng(11)
    n = 136
    A = SCREEN_KINDS[kind](rng, n, 2).astype(dtype)
    with nb.slp_enabled():
        for m in range(2):
            margin = nb._bounds(A[m], n, True)[1]
            assert margin > 0
            err = nb.screen_error(n, margin)
            Dt = in_order_f32_distances(A[m])
            D = 0.5 * squareform(pdist(A[m].astype(np.float64), "cityblock"))
            assert np.all(np.abs(Dt - D) <= err), (kind, np.abs(Dt - D).max(), err)
            if kind == "half-ulp":  # the case has teeth: the float32 error is a large share of the bound
                assert abs(Dt[0, 1] - D[0, 1]) > 0.3 * err and D[0, 1] == D[np.triu_indices(n, 1)].max()
            P32 = np.empty(((n + nb.CB - 1) // nb.CB, n, nb.CB), dtype=np.float32)
            for p in range(P32.shape[0]):
                nb._pack32(A[m], P32, p)
            out = np.empty((2 * nb.RB, nb.CB), dtype=np.float32)
            for a, p in [(0, 0), (1, 5), (3, P32.shape[0] - 1)]:
                nb._tile32(P32[a], P32[p], n, out)
                rows = range(a * nb.CB, min(n, (a + 1) * nb.CB))
                cols = range(p * nb.CB, min(n, (p + 1) * nb.CB))
                got = 0.5 * out[: len(rows), : len(cols)].astype(np.float64)
                assert np.array_equal(got, Dt[np.ix_(list(rows), list(cols))])


def _screened_state(A, tol):
    n = A.shape[0]
    Pan, diag, rowmax, rowpen, rowmsd, ub, margin, done, lb = nb._init_state(A, nb._pack_rows(A), n, tol, True)
    nb._screen(A, Pan, diag, n, tol, ub, done, lb, margin)
    return ub, margin, done, lb


@pytest.mark.parametrize("kind", sorted(SCREEN_KINDS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_screened_bounds_are_bounds_and_settle_most_tiles(kind, dtype):
    """After the screen: every tile's exact maximum ≤ its bound + margin; the lower bounds lb[0] ≤ κ and
    lb[1] ≤ max pen; and on rows without structure (Dirichlet(0.3), where the group bounds prune nothing)
    the screen leaves under 5 % of the tiles for the float64 pass."""
    rng = np.random.default_rng(5)
    n = 203
    A = SCREEN_KINDS[kind](rng, n, 2).astype(dtype)
    for m in range(2):
        A64 = A[m].astype(np.float64)
        D = 0.5 * squareform(pdist(A64, "cityblock"))
        iu = np.triu_indices(n, 1)
        kap = D[iu].max()
        diag = np.diag(A64)
        x = diag[:, None] - A64.T  # x_ij = A_ii − A_ji
        pen = D - np.minimum(x, 0) * -1 - np.minimum(x.T, 0) * -1
        with nb.slp_enabled():
            ub, margin, done, lb = _screened_state(A[m], 0.0)
        assert lb[0] <= kap and lb[1] <= pen[iu].max() + 1e-12
        thr = min(lb[0], lb[1]) - margin
        left = total = 0
        for q in range(ub.shape[0]):
            for p in range((q * nb.RB + 1) // nb.CB, ub.shape[1]):
                rows = range(q * nb.RB, min(n - 1, (q + 1) * nb.RB))
                tile = [D[i, j] for i in rows for j in range(max(i + 1, p * nb.CB), min(n, (p + 1) * nb.CB))]
                if not tile or done[q, p]:
                    continue
                assert max(tile) <= ub[q, p] + margin, (kind, q, p)
                total += 1
                left += not (ub[q, p] < thr)
        if kind == "dirichlet-0.3":
            assert left < 0.05 * total, (left, total)
        if kind == "half-ulp":  # the κ pair's tile is the screen's to keep (not one the seeding computed)
            assert not done[0, 0] and not (ub[0, 0] < thr)


def test_screen_is_off_where_float32_could_overflow_or_there_are_no_bounds():
    assert not nb._screen_on(200, 0.0)  # no bounds: pruning off, n < PRUNE_MIN_N or non-finite input
    assert nb._screen_on(200, 1e-9)
    assert not nb._screen_on(200, 1e-9 * nb.SCREEN_MAX_SCALE * 10)
    rng = np.random.default_rng(4)
    for scale in (1e29, 1e36):  # on, and off (float32 would overflow): the answers never change
        A = scaled_rows(rng, 150, 2, scale)
        a = kernel._pair_summary_numba(A, 0.0, prune=False)
        assert summaries_equal(a, kernel._pair_summary_numba(A, 0.0, prune=True)), scale


@pytest.mark.parametrize("kind", sorted(SCREEN_KINDS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("tol", [0.0, 1e-7])
def test_screen_never_changes_a_summary_or_a_margin(kind, dtype, tol):
    """Pruned (group bounds + float32 screen) and unpruned: the same bits for the summary and the decision
    margins, for every driver that screens (batch, one matrix per thread, and threads within a matrix)."""
    rng = np.random.default_rng(len(kind))
    smallest = max(nb.PRUNE_MIN_N, 66) if kind == "half-ulp" else nb.PRUNE_MIN_N  # (that case uses rows 64, 65)
    for n in (smallest, 203, 257):
        A = SCREEN_KINDS[kind](rng, n, 3).astype(dtype)
        s0, m0 = kernel._pair_summary_margins_numba(A, tol, prune=False)
        s1, m1 = kernel._pair_summary_margins_numba(A, tol, prune=True)
        assert summaries_equal(s0, s1), (kind, n)
        assert all(np.array_equal(u.numpy(), v.numpy(), equal_nan=True) for u, v in zip(m0, m1)), (kind, n)
        assert summaries_equal(s0, kernel._pair_summary_numba(A, tol, prune=True))
        with nb.slp_enabled():
            for m in range(3):
                one = nb.summary_one(A[m], tol, True)
                assert one == (s0.kappa[m].item(), s0.kappa_factor[m].item(), bool(s0.holds[m]),
                               *s0.witness[m].tolist())
                kap, _, _, _, _, g, x, y = nb.summary_margins_one(A[m], tol, True)
                got = (kap - g if np.isfinite(g) else np.nan, x, y)  # g: the largest non-attaining distance
                want = (m0.kappa_gap[m].item(), m0.self_margin_i[m].item(), m0.self_margin_j[m].item())
                assert np.array_equal(np.array(got), np.array(want), equal_nan=True)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here (run where one is: "
                          "tools/gpu_check.py runs this test on the device machine)")


@CUDA
@pytest.mark.parametrize("kind", sorted(set(KINDS) | set(SCREEN_KINDS)))
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_cuda_tensors_get_the_cpu_kernels_answers(kind, dtype):
    """A CUDA tensor takes the torch path (cdist screen and test on the device, the exact index-order recheck of
    the pairs the screen cannot settle on the host, kernel._exact_pair_sums): its
    summary and its decision margins are the CPU numba kernel's bits, on every kind of matrix the CPU tests
    use (near ties, half-ulp float32 traps, binary fractions, sink-heavy attention), results on the device."""
    builders = {**KINDS, **SCREEN_KINDS}
    rng = np.random.default_rng(len(kind) + 17)
    for n in ((66, 257) if kind in SCREEN_KINDS else (2, 9, 130)):
        A = builders[kind](rng, n, 3).astype(dtype)
        for tol in (0.0, 1e-12, 1e-7):
            T = torch.from_numpy(A).cuda()
            assert kernel.backend(T) == "torch"
            s, m = kernel.pair_summary_margins(T, tol)
            assert s.kappa.device.type == "cuda"
            want_s, want_m = kernel._pair_summary_margins_numba(A, tol)
            assert summaries_equal(s, want_s), (kind, n, tol)
            assert all(np.array_equal(u.cpu().numpy(), v.numpy(), equal_nan=True) for u, v in zip(m, want_m)), \
                (kind, n, tol)
            assert summaries_equal(kernel.pair_summary(T, tol), want_s)
