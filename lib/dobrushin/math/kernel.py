r"""The pairwise-distance kernel behind :func:`kappa`, :func:`attaining_pairs` and :func:`equality_holds`.

Definition (bit-exact).  For a matrix ``A`` (``n × n``) the kernel computes, in float64,

.. math::  D_{ij} = 0.5 \cdot \mathrm{fl}\Big(\sum_{k=0}^{n-1} |A_{ik} - A_{jk}|\Big)

with the sum accumulated **in index order** ``k = 0, 1, …, n−1`` (the order
``scipy.spatial.distance.pdist(metric="cityblock")`` uses).  Every implementation below follows that
order, so they agree with each other and with SciPy exactly, and the derived quantities (κ, κ(½(I+A)),
the equality test with ``tol = 0``, the witness pair) are identical whichever path runs.  On
binary-fraction inputs every operation is exact, so ties are real ties.

Summation-order decision: the contract above stays **bit-exact in index order** (no relaxed order).
The CPU kernel vectorises *across pairs* (SIMD lanes = columns j, loaded contiguously from a transposed
panel), tiles over rows i, and runs k sequentially, so each lane is an in-order sum; this already runs
near the float64 add throughput of one core, and both cores share a single matrix (threads over row
blocks) or a batch (one matrix per thread).  The torch path uses a float screen in any order with a
rigorous error bound and rechecks every pair it cannot settle in index order, so its answers are the
same bits as well.

Two implementations:

* **numba** (CPU, the default when numba is installed): 4 × 8 register tiles (32 float64 partial sums
  in 8 AVX2 registers), upper triangle only, with the equality test fused into the same pass
  (:mod:`dobrushin.math._kernel_numba`); memory is O(n²) per thread on top of the input (never a copy of the
  whole batch, never an n³ intermediate).  Tiles whose exact upper bound
  ½(max s_i + max s_j) − Σ_k min(min_i A_ik, min_j A_jk) (over 16 × 16 groups, plus a rounding margin)
  shows that they can neither attain κ − tol nor raise κ(½(I+A)) are skipped (:data:`PRUNE`): the
  answers are the same bits, and attention with "sink" tokens — most rows sharing mass on a few
  columns — skips most tiles, while matrices without such structure pay about 10 % for the bounds.
  Then a float32 screen (8 × 8 tiles of float32 sums, twice the pairs per instruction) tightens each
  remaining tile's bound to its float32 maximum plus a rigorous error bound and raises the lower bounds
  of κ and κ(½(I+A)) from the same sums; only the tiles it cannot settle are computed in float64
  (typically well under 1 % of them), so on rows without structure the kernel runs near the float32
  rate.  Every answer still comes from float64 sums in index order: the same bits as without pruning.
  Float32 input is read as its exact float64 upcast for those sums.
* **torch** (any device, used for CUDA tensors and as the CPU fallback): ``torch.cdist(p=1)`` as a
  screen in the input's precision, a rigorous bound on its error, and an exact index-order recheck of
  the candidate pairs the bound cannot settle (:func:`_pair_summary_torch`), in chunks of matrices whose
  temporaries stay under :data:`SCREEN_BYTES` / :data:`CUDA_SCREEN_BYTES`.  The full distance matrix
  (:func:`half_l1_distances`) still takes the exact k-by-k accumulation (:func:`_half_l1_torch`).

``DOBRUSHIN_KERNEL=torch`` forces the torch path on CPU (``auto``, the default, picks numba when it
imports).  All routines take a ``(b, n, n)`` torch tensor or numpy array (float32 or float64, any
strides) and return torch tensors on the input's device.
"""
from __future__ import annotations

import contextlib
import os
import threading
from typing import NamedTuple

import numpy as np
import torch

try:  # numba is optional: without it every call takes the torch path
    from . import _kernel_numba as _nb
except ImportError:  # pragma: no cover - exercised only where numba is missing
    _nb = None

#: upper bound on the temporary of one row block of the torch path on CPU (bytes; cache-sized)
BLOCK_BYTES = 2 * 2**20
#: the same on CUDA (bytes)
CUDA_BLOCK_BYTES = 256 * 2**20
#: below this much work (b·n³) the numba path runs on the calling thread (about a millisecond)
SERIAL_WORK = 2 * 10**7
#: skip tiles of the numba path whose exact upper bound shows they cannot change any answer
#: (results are identical either way; ``DOBRUSHIN_PRUNE=0`` turns it off)
PRUNE = os.environ.get("DOBRUSHIN_PRUNE", "1").strip() not in ("0", "false", "no", "off")


class PairSummary(NamedTuple):
    kappa: torch.Tensor  # (b,) float64
    kappa_factor: torch.Tensor  # (b,) float64, κ(½(I+A))
    holds: torch.Tensor  # (b,) bool
    witness: torch.Tensor  # (b, 2) int64


class Margins(NamedTuple):
    """How far each decision of :func:`pair_summary` is from flipping (``(b,)`` float64 each).

    ``kappa_gap``: κ minus the largest D_ij over the pairs that do not attain κ (D_ij < κ − tol); NaN when
    every pair attains.  ``self_margin_i``, ``self_margin_j``: x = A_ii − A_ji and y = A_jj − A_ij of the
    *deciding pair*: the attaining pair (i < j) with the largest min(x, y), ties to the first in
    lexicographic order — when the condition holds, the mutually self-dominant attaining pair with the
    largest min(x, y); when it fails, the attaining pair closest to holding.  NaN when n < 2."""

    kappa_gap: torch.Tensor
    self_margin_i: torch.Tensor
    self_margin_j: torch.Tensor


def backend(T) -> str:
    """``"numba"`` or ``"torch"``: the path a call with ``T`` takes."""
    choice = os.environ.get("DOBRUSHIN_KERNEL", "auto").strip().lower()
    if choice not in ("auto", "numba", "torch"):
        raise ValueError(f"DOBRUSHIN_KERNEL={choice!r}: expected auto, numba or torch")
    on_cpu = not isinstance(T, torch.Tensor) or T.device.type == "cpu"
    if choice == "torch" or not on_cpu:
        return "torch"
    if _nb is None:
        if choice == "numba":
            raise RuntimeError("DOBRUSHIN_KERNEL=numba but numba is not importable")
        return "torch"
    return "numba"


def _check3(T) -> tuple:
    if T.ndim != 3 or T.shape[-1] != T.shape[-2]:
        raise ValueError(f"kernel expects a (b, n, n) stack, got shape {tuple(T.shape)}")
    return tuple(T.shape)


def _as_numpy(T) -> np.ndarray:
    """A float32/float64 numpy view of ``T`` (CPU) without copying when possible."""
    a = T.detach().numpy() if isinstance(T, torch.Tensor) else np.asarray(T)
    if a.dtype not in (np.float32, np.float64):
        a = a.astype(np.float64)
    return a


def _as_torch_native(T) -> torch.Tensor:
    """A torch tensor of ``T`` in float32 (kept: the screen runs in it) or float64."""
    t = T if isinstance(T, torch.Tensor) else torch.from_numpy(np.asarray(T))
    t = t.detach()
    return t if t.dtype in (torch.float32, torch.float64) else t.to(torch.float64)


def _as_torch64(T) -> torch.Tensor:
    t = T if isinstance(T, torch.Tensor) else torch.from_numpy(np.asarray(T))
    return t.detach().to(torch.float64)


# ---------------------------------------------------------------------------------------------- torch


def _half_l1_torch(T: torch.Tensor) -> torch.Tensor:
    """Reference/CUDA path: ``D[b, i, j]`` accumulated one ``k`` at a time (index order)."""
    T = T.to(torch.float64)
    b, n, _ = T.shape
    D = torch.zeros((b, n, n), dtype=torch.float64, device=T.device)
    if n == 0 or b == 0:
        return D
    budget = CUDA_BLOCK_BYTES if T.device.type == "cuda" else BLOCK_BYTES
    per_row = 8 * n  # bytes of one row of D for one matrix
    mats = max(1, min(b, budget // (per_row * n)))
    rows = n if mats > 1 else max(1, min(n, budget // per_row))
    Tt = T.transpose(1, 2)  # Tt[m, k, j] = T[m, j, k]
    for m0 in range(0, b, mats):
        m1 = min(b, m0 + mats)
        for i0 in range(0, n, rows):
            i1 = min(n, i0 + rows)
            acc = D[m0:m1, i0:i1]
            tmp = torch.empty_like(acc)
            for k in range(n):
                torch.sub(T[m0:m1, i0:i1, k, None], Tt[m0:m1, None, k, :], out=tmp)
                acc.add_(tmp.abs_())
    return D.mul_(0.5)


def _summary_from_distances(T: torch.Tensor, D: torch.Tensor, tol: float) -> PairSummary:
    b, n, _ = T.shape
    dev = T.device
    upper = torch.ones(n, n, dtype=torch.bool, device=dev).triu(1)
    Dm = D.masked_fill(~upper, -1.0)
    kap = Dm.flatten(1).amax(1)
    diag = T.diagonal(dim1=-2, dim2=-1)  # (b, n)
    x = diag[:, :, None] - T.transpose(-1, -2)  # x[i, j] = A_ii - A_ji
    y = diag[:, None, :] - T  # y[i, j] = A_jj - A_ij
    msd = (x >= -tol) & (y >= -tol)
    attaining = upper & (Dm >= (kap - tol)[:, None, None])
    good = attaining & msd
    holds = good.flatten(1).any(1)
    # κ(B): max over pairs of ½ + ½ (D − x⁻ − y⁻)
    pen = D - x.neg().clamp_min(0) - y.neg().clamp_min(0)
    kf = 0.5 + 0.5 * pen.masked_fill(~upper, -float("inf")).flatten(1).amax(1)
    # witness: first good pair (lexicographic) if any, else first attaining pair
    pick = torch.where(holds[:, None], good.flatten(1), attaining.flatten(1))
    flat = pick.to(torch.int8).argmax(1)
    witness = torch.stack([flat // n, flat % n], 1)
    return PairSummary(kap, kf, holds, witness)


def _pair_summary_torch_exact(T: torch.Tensor, tol: float) -> PairSummary:
    """Reference: every distance in index order (:func:`_half_l1_torch`), then the test on the full
    matrices.  Slow (n ops per row block); used for non-finite input and by the tests."""
    T = T.to(torch.float64)
    b, n, _ = T.shape
    dev = T.device
    if n < 2:
        return _empty_summary(b, dev)
    # a chunk of matrices at a time bounds the (chunk, n, n) temporaries of the epilogue
    budget = CUDA_BLOCK_BYTES if dev.type == "cuda" else 64 * 2**20
    chunk = max(1, budget // (8 * 8 * n * n))
    parts = [_summary_from_distances(T[m:m + chunk], _half_l1_torch(T[m:m + chunk]), tol)
             for m in range(0, b, chunk)]
    return PairSummary(*(torch.cat(f) for f in zip(*parts)))


def _empty_summary(b: int, dev) -> PairSummary:
    z = torch.zeros(b, dtype=torch.float64, device=dev)
    return PairSummary(z, z.clone(), torch.zeros(b, dtype=torch.bool, device=dev),
                       torch.full((b, 2), -1, dtype=torch.int64, device=dev))


#: unit roundoff of the screen's arithmetic
_UNIT = {torch.float32: 2.0**-24, torch.float64: 2.0**-53}
#: bytes per matrix entry of the screen's temporaries (about eight (chunk, n, n) float64 arrays)
_SCREEN_BYTES_PER_ENTRY = 72
#: temporaries of one chunk of the screened torch path, CPU / CUDA (bytes)
SCREEN_BYTES = 64 * 2**20
CUDA_SCREEN_BYTES = 2 * 2**30


def screen_coefficient(n: int, dtype: torch.dtype) -> float:
    """``c`` such that ``|D̃_ij − D_ij| ≤ c · (r_i + r_j)`` (see :func:`_pair_summary_torch`), with a
    factor-2 safety margin, plus slack for the few float64 operations on the bounds themselves."""
    def gamma(m, u):
        if m * u >= 0.5:
            raise ValueError(f"n = {n} is too large for a rigorous {dtype} screen")
        return m * u / (1 - m * u)

    return 2.0 * (gamma(n + 1, _UNIT[dtype]) + gamma(n + 1, 2.0**-53)) + 2.0**-46


def _exact_pair_sums(Ai: torch.Tensor, Aj: torch.Tensor) -> torch.Tensor:
    """``Σ_k |Ai[p, k] − Aj[p, k]|`` accumulated in float64 in index order (the kernel's definition),
    on the CPU: with numba one compiled loop, else one vectorised torch op per k."""
    Ai = Ai.detach().to("cpu", torch.float64)
    Aj = Aj.detach().to("cpu", torch.float64)
    if _nb is not None:
        out = np.empty(Ai.shape[0])
        _nb.pair_sums(Ai.numpy(), Aj.numpy(), out)
        return torch.from_numpy(out)
    acc = torch.zeros(Ai.shape[0], dtype=torch.float64)
    tmp = torch.empty_like(acc)
    for k in range(Ai.shape[1]):
        torch.sub(Ai[:, k], Aj[:, k], out=tmp)
        acc.add_(tmp.abs_())
    return acc


def _screened_chunk(X: torch.Tensor, tol: float) -> PairSummary:
    """:func:`_pair_summary_torch` on one chunk ``(c, n, n)`` (float32 or float64, finite)."""
    c, n, _ = X.shape
    dev = X.device
    ninf = -float("inf")
    X64 = X.to(torch.float64)
    # screen: D̃ from cdist in the input's precision; per matrix one bound E ≥ |D̃ − D| (+ the bound
    # arithmetic): c·(r_i + r_j + x⁻ + y⁻) ≤ 4c·max_i r_i, since x⁻ + y⁻ ≤ |A_ii| + |A_ji| + |A_jj| + |A_ij|
    D = torch.cdist(X, X, p=1).to(torch.float64).mul_(0.5)
    E = X64.abs().sum(-1).amax(1).mul_(4.0 * screen_coefficient(n, X.dtype))  # (c,)
    diag = X64.diagonal(dim1=-2, dim2=-1)
    x = diag[:, :, None] - X64.transpose(-1, -2)  # x[i, j] = A_ii − A_ji
    y = diag[:, None, :] - X64  # y[i, j] = A_jj − A_ij
    lower = torch.ones(n, n, dtype=torch.bool, device=dev).tril_()
    D.masked_fill_(lower, ninf)
    pen = D - x.neg().clamp_min_(0)
    pen.sub_(y.neg().clamp_min(0))  # D̃ − x⁻ − y⁻ (−inf off the upper triangle)
    # every pair with D ≥ κ − tol has D̃ ≥ max D̃ − 2E − tol; the maximiser of pen has p̃en ≥ max p̃en − 2E
    # (the 2⁻⁵⁰ terms cover the rounding of these thresholds whatever the size of tol)
    dmax = D.flatten(1).amax(1)
    pmax = pen.flatten(1).amax(1)
    cand1 = D >= (dmax - 2 * E - tol - 2.0**-50 * (dmax.abs() + abs(tol)))[:, None, None]
    cand = pen >= (pmax - 2 * E - 2.0**-50 * pmax.abs())[:, None, None]
    in2_full = cand.clone()
    cand |= cand1
    del pen, D
    m, i, j = cand.nonzero(as_tuple=True)  # lexicographic order within each matrix
    in1, in2 = cand1[m, i, j], in2_full[m, i, j]
    del cand, cand1, in2_full
    # exact recheck of the candidates, in index order
    d = 0.5 * _exact_pair_sums(X64[m, i], X64[m, j]).to(dev)
    xs, ys = x[m, i, j], y[m, i, j]
    kap = torch.full((c,), ninf, dtype=torch.float64, device=dev)
    kap.scatter_reduce_(0, m, torch.where(in1, d, ninf), "amax")
    att = in1 & (d >= (kap - tol)[m])
    good = att & (xs >= -tol) & (ys >= -tol)
    pen = (d - xs.neg().clamp_min(0)) - ys.neg().clamp_min(0)
    pmax = torch.full((c,), ninf, dtype=torch.float64, device=dev)
    pmax.scatter_reduce_(0, m, torch.where(in2, pen, ninf), "amax")
    holds = torch.zeros(c, dtype=torch.int64, device=dev)  # (integer: scatter_reduce on bool is not on every device)
    holds = holds.scatter_reduce_(0, m, good.to(torch.int64), "amax").bool()
    pos = torch.arange(m.numel(), device=dev)
    big = m.numel()
    pick = torch.where(holds[m], good, att)
    first = torch.full((c,), big, dtype=torch.int64, device=dev)
    first.scatter_reduce_(0, m, torch.where(pick, pos, big), "amin")
    witness = torch.stack([i[first], j[first]], 1)
    return PairSummary(kap, 0.5 + 0.5 * pmax, holds, witness)


def _pair_summary_torch(T: torch.Tensor, tol: float) -> PairSummary:
    r"""The torch path (CUDA tensors; CPU without numba or with ``DOBRUSHIN_KERNEL=torch``).

    *Screen and exact recheck.*  ``D̃ = ½ torch.cdist(A, A, p=1)`` in the input's precision, any
    summation order.  Each term |a − b| is rounded once and the n terms are added by n − 1 rounded
    additions in some order, so (Higham, Accuracy and Stability, §4.2) the computed sum is within
    γ_n Σ_k |A_ik − A_jk| ≤ γ_n (r_i + r_j) of the exact one, r_i = Σ_k |A_ik|, and the contract's
    float64 index-order sum is within γ_n^(64) (r_i + r_j) of it too; :func:`screen_coefficient`
    doubles both and adds slack for the float64 bound arithmetic; one bound per matrix,
    E = 4c·max_i r_i ≥ c·(r_i + r_j + x⁻ + y⁻), covers every pair and the penalty arithmetic.  With
    |D̃ − D| ≤ E: κ ≥ max D̃ − E, so every pair with D ≥ κ − tol has D̃ ≥ max D̃ − 2E − tol; and the
    maximiser of pen = D − x⁻ − y⁻ has D̃ − x⁻ − y⁻ ≥ max(D̃ − x⁻ − y⁻) − 2E.  Only those candidate pairs are recomputed
    exactly (:func:`_exact_pair_sums`), and κ, the attaining set, the test, the witness and κ(½(I+A))
    are taken over them: the same bits as the numba kernel, whatever the cdist implementation's order.
    Memory: chunks of matrices whose temporaries stay under :data:`SCREEN_BYTES` (CPU) or
    :data:`CUDA_SCREEN_BYTES` (one matrix at least).  Non-finite input takes the exact reference.
    """
    if T.dtype not in (torch.float32, torch.float64):
        T = T.to(torch.float64)
    b, n, _ = T.shape
    dev = T.device
    if n < 2 or b == 0:
        return _empty_summary(b, dev)
    budget = CUDA_SCREEN_BYTES if dev.type == "cuda" else SCREEN_BYTES
    chunk = max(1, budget // (_SCREEN_BYTES_PER_ENTRY * n * n))
    parts = []
    for m0 in range(0, b, chunk):
        X = T[m0:m0 + chunk]
        if bool(torch.isfinite(X).all()):
            parts.append(_screened_chunk(X, tol))
        else:
            parts.append(_pair_summary_torch_exact(X, tol))
    return PairSummary(*(torch.cat(f) for f in zip(*parts)))


# ---------------------------------------------------------------------------------------------- numba


def _threads() -> int:
    import numba

    return numba.get_num_threads()


#: the workqueue threading layer is not thread-safe: parallel calls then take this lock
_PAR_LOCK = threading.Lock() if (_nb is not None and _nb.THREADING_LAYER == "workqueue") else contextlib.nullcontext()


def _pair_summary_numba(T, tol: float, prune: bool | None = None) -> PairSummary:
    prune = PRUNE if prune is None else bool(prune)
    A = _as_numpy(T)
    b, n, _ = A.shape
    kap = np.zeros(b)
    kf = np.zeros(b)
    holds = np.zeros(b, dtype=np.bool_)
    wit = np.full((b, 2), -1, dtype=np.int64)
    if b and n >= 2:
        with _nb.slp_enabled(), _PAR_LOCK:
            # little work in all: stay on this thread (waking the pool costs more, a lot more on a busy
            # machine); many matrices or small ones: one matrix per thread; else share each matrix
            if b * n**3 < SERIAL_WORK:
                _nb.summary_batch_serial(A, float(tol), prune, kap, kf, holds, wit)
            elif b >= 2 * _threads() or n <= 96:
                _nb.summary_batch(A, float(tol), prune, kap, kf, holds, wit)
            else:
                for m in range(b):
                    kap[m], kf[m], holds[m], wit[m, 0], wit[m, 1] = _nb.summary_one(A[m], float(tol), prune)
    f = torch.from_numpy
    return PairSummary(f(kap), f(kf), f(holds), f(wit))


def _half_l1_numba(T) -> torch.Tensor:
    A = _as_numpy(T)
    b, n, _ = A.shape
    D = np.zeros((b, n, n))
    if n >= 2:
        with _nb.slp_enabled(), _PAR_LOCK:
            fn = _nb.distances_one_serial if n**3 < SERIAL_WORK else _nb.distances_one
            for m in range(b):
                fn(A[m], D[m])
    return torch.from_numpy(D)


# ---------------------------------------------------------------------------------------------- API


def half_l1_distances(T) -> torch.Tensor:
    """``D[b, i, j] = ½ ‖T[b, i] − T[b, j]‖₁`` (float64, exact index-order sums), shape ``(b, n, n)``."""
    _check3(T)
    if backend(T) == "numba":
        return _half_l1_numba(T)
    return _half_l1_torch(_as_torch64(T))


def pair_summary(T, tol: float) -> PairSummary:
    """κ(A), κ(½(I+A)), the equality condition and a witness pair for each matrix of ``(b, n, n)``.

    Uses ½‖B_i − B_j‖₁ = ½ + ½(D_ij − x⁻ − y⁻) with x = A_ii − A_ji, y = A_jj − A_ij, t⁻ = max(−t, 0).
    ``holds``: some pair with D_ij ≥ κ − tol has x ≥ −tol and y ≥ −tol.  ``witness``: the first such
    pair ``(i, j)``, ``i < j``, in lexicographic order when ``holds``, else the first pair with
    D_ij ≥ κ − tol; ``(-1, -1)`` when ``n < 2``.
    """
    _check3(T)
    tol = float(tol)
    if backend(T) == "numba":
        return _pair_summary_numba(T, tol)
    return _pair_summary_torch(_as_torch_native(T), tol)


def _margins_from_distances(T: torch.Tensor, D: torch.Tensor, kap: torch.Tensor, tol: float) -> Margins:
    b, n, _ = T.shape
    nan = float("nan")
    upper = torch.ones(n, n, dtype=torch.bool, device=T.device).triu(1)
    att = upper & (D >= (kap - tol)[:, None, None])
    non = upper & ~att
    g = D.masked_fill(~non, -float("inf")).flatten(1).amax(1)
    gap = torch.where(non.flatten(1).any(1), kap - g, torch.full_like(kap, nan))
    diag = T.diagonal(dim1=-2, dim2=-1)
    x = diag[:, :, None] - T.transpose(-1, -2)  # x[i, j] = A_ii − A_ji
    y = diag[:, None, :] - T  # y[i, j] = A_jj − A_ij
    m = torch.minimum(x, y).masked_fill(~att, -float("inf"))
    flat = m.flatten(1).argmax(1)  # the first maximum: lexicographic tie-break
    rows = torch.arange(b, device=T.device)
    return Margins(gap, x.flatten(1)[rows, flat], y.flatten(1)[rows, flat])


def _margins_torch(T: torch.Tensor, kap: torch.Tensor, tol: float) -> Margins:
    """The torch path's margins: exact index-order distances (:func:`half_l1_distances`, the same bits
    as the numba kernel), a chunk of matrices at a time."""
    T = T.to(torch.float64)
    b, n, _ = T.shape
    if n < 2 or b == 0:
        nan = torch.full((b,), float("nan"), dtype=torch.float64, device=T.device)
        return Margins(nan, nan.clone(), nan.clone())
    budget = CUDA_BLOCK_BYTES if T.device.type == "cuda" else 64 * 2**20
    chunk = max(1, budget // (8 * 8 * n * n))
    parts = [_margins_from_distances(T[m:m + chunk], _half_l1_torch(T[m:m + chunk]), kap[m:m + chunk], tol)
             for m in range(0, b, chunk)]
    return Margins(*(torch.cat(f) for f in zip(*parts)))


def _pair_summary_margins_numba(T, tol: float, prune: bool | None = None):
    prune = PRUNE if prune is None else bool(prune)
    A = _as_numpy(T)
    b, n, _ = A.shape
    kap, kf, gap = np.zeros(b), np.zeros(b), np.full(b, -np.inf)
    mx, my = np.full(b, np.nan), np.full(b, np.nan)
    holds = np.zeros(b, dtype=np.bool_)
    wit = np.full((b, 2), -1, dtype=np.int64)
    if b and n >= 2:
        with _nb.slp_enabled(), _PAR_LOCK:
            if b * n**3 < SERIAL_WORK:
                _nb.summary_margins_batch_serial(A, float(tol), prune, kap, kf, holds, wit, gap, mx, my)
            elif b >= 2 * _threads() or n <= 96:
                _nb.summary_margins_batch(A, float(tol), prune, kap, kf, holds, wit, gap, mx, my)
            else:
                for m in range(b):
                    (kap[m], kf[m], holds[m], wit[m, 0], wit[m, 1],
                     gap[m], mx[m], my[m]) = _nb.summary_margins_one(A[m], float(tol), prune)
    gap = np.where(np.isfinite(gap), kap - gap, np.nan)  # −inf: every pair attains
    f = torch.from_numpy
    return PairSummary(f(kap), f(kf), f(holds), f(wit)), Margins(f(gap), f(mx), f(my))


def pair_summary_margins(T, tol: float):
    """:func:`pair_summary` and the :class:`Margins` of each matrix, ``(PairSummary, Margins)``; on the
    numba path in the same call (a second, pruned pass over the tiles that can matter)."""
    _check3(T)
    tol = float(tol)
    if backend(T) == "numba":
        return _pair_summary_margins_numba(T, tol)
    X = _as_torch_native(T)
    s = _pair_summary_torch(X, tol)
    return s, _margins_torch(X, s.kappa, tol)


def kappa_only(T) -> torch.Tensor:
    """κ of each matrix of ``(b, n, n)`` → ``(b,)`` float64 (0 for n = 1)."""
    return pair_summary(T, 0.0).kappa


def warm_up() -> None:
    """Compile (or load from numba's cache) the CPU kernels now rather than on first use."""
    if _nb is None:
        return
    A = np.full((1, 3, 3), 1 / 3)
    for a in (A, A.astype(np.float32)):
        with _nb.slp_enabled():
            for fn in (_nb.summary_batch, _nb.summary_batch_serial):
                fn(a, 0.0, True, np.zeros(1), np.zeros(1), np.zeros(1, np.bool_), np.zeros((1, 2), np.int64))
            _nb.summary_one(a[0], 0.0, True)
            _nb.distances_one(a[0], np.zeros((3, 3)))
            z = lambda: np.zeros(1)  # noqa: E731
            for fn in (_nb.summary_margins_batch, _nb.summary_margins_batch_serial):
                fn(a, 0.0, True, z(), z(), np.zeros(1, np.bool_), np.zeros((1, 2), np.int64), z(), z(), z())
            _nb.summary_margins_one(a[0], 0.0, True)
            _nb.distances_one_serial(a[0], np.zeros((3, 3)))
