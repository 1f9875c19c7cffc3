r"""The pairwise-distance kernel behind ``kappa``, ``attaining_pairs`` and ``equality_holds``.

Contract (bit-exact): D_ij = 0.5 · fl(Σ_k |A_ik − A_jk|), summed in float64 in index order k = 0 … n−1
(as ``scipy.spatial.distance.pdist(metric="cityblock")``), so every path gives the same bits for κ,
κ(½(I+A)), the test and the witness.  Paths: numba on CPU when it imports (``_kernel_numba``), unless
``DOBRUSHIN_KERNEL=torch``; else torch: a ``cdist`` screen with a rigorous error bound and an exact
recheck of the pairs it cannot settle.  Routines take ``(b, n, n)`` float32 or float64 (any strides)
and return torch tensors on the input's device.
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
    """How far each decision of ``pair_summary`` is from flipping, ``(b,)`` float64 each.

    ``kappa_gap``: κ − max D_ij over non-attaining pairs (D_ij < κ − tol), NaN when every pair attains.
    ``self_margin_i/j``: x = A_ii − A_ji, y = A_jj − A_ij of the attaining pair (i < j) with the largest
    min(x, y), ties to the lexicographically first.  NaN when n < 2."""

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
    """Reference: every distance in index order, then the test.  Slow; for non-finite input and tests."""
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
    """``c`` with ``|D̃_ij − D_ij| ≤ c · (r_i + r_j)`` (see ``_pair_summary_torch``): 2(γ_{n+1} of the
    screen's dtype + γ_{n+1} of float64) plus slack for the float64 bound arithmetic."""
    def gamma(m, u):
        if m * u >= 0.5:
            raise ValueError(f"n = {n} is too large for a rigorous {dtype} screen")
        return m * u / (1 - m * u)

    return 2.0 * (gamma(n + 1, _UNIT[dtype]) + gamma(n + 1, 2.0**-53)) + 2.0**-46


def _exact_pair_sums(Ai: torch.Tensor, Aj: torch.Tensor) -> torch.Tensor:
    """``Σ_k |Ai[p, k] − Aj[p, k]|`` in float64, index order (the contract), on the CPU."""
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
    r"""The torch path: screen, then exact recheck (same bits as the numba kernel).

    D̃ = ½ cdist(A, A, p=1) in any order is within γ_n (r_i + r_j) of the exact sum, r_i = Σ_k |A_ik|
    (Higham §4.2), as is the float64 index-order D; one bound per matrix E = 4c·max_i r_i
    (c = ``screen_coefficient``) covers every pair.  Candidates: D̃ ≥ max D̃ − 2E − tol (may attain κ)
    or D̃ − x⁻ − y⁻ ≥ max(D̃ − x⁻ − y⁻) − 2E (may give κ(½(I+A))); only they are summed exactly.
    Chunks keep temporaries under ``SCREEN_BYTES`` / ``CUDA_SCREEN_BYTES``; non-finite input takes the
    exact reference.
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

    κ(½(I+A)) = max ½ + ½(D_ij − x⁻ − y⁻), x = A_ii − A_ji, y = A_jj − A_ij.  ``holds``: some pair with
    D_ij ≥ κ − tol has x ≥ −tol and y ≥ −tol.  ``witness``: the lexicographically first such pair
    (i < j), else the first pair with D_ij ≥ κ − tol; ``(-1, -1)`` when n < 2.
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
    """The torch path's margins from exact index-order distances, a chunk of matrices at a time."""
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
    """``(PairSummary, Margins)`` of each matrix; on the numba path in the same call."""
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
