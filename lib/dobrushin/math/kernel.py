r"""The pairwise-distance kernel behind :func:`kappa`, :func:`attaining_pairs` and :func:`equality_holds`.

Definition (bit-exact).  For a matrix ``A`` (``n × n``) the kernel computes, in float64,

.. math::  D_{ij} = 0.5 \cdot \mathrm{fl}\Big(\sum_{k=0}^{n-1} |A_{ik} - A_{jk}|\Big)

with the sum accumulated **in index order** ``k = 0, 1, …, n−1`` (the order
``scipy.spatial.distance.pdist(metric="cityblock")`` uses).  Every implementation below follows that
order, so they agree with each other and with SciPy exactly, and the derived quantities (κ, κ(½(I+A)),
the equality test with ``tol = 0``, the witness pair) are identical whichever path runs.  On
binary-fraction inputs every operation is exact, so ties are real ties.

Two implementations:

* **numba** (CPU, the default when numba is installed): register-tiled, upper triangle only, with the
  equality test fused into the same pass (:mod:`dobrushin._kernel_numba`); memory is O(n²) per thread
  on top of the input (never a copy of the whole batch, never an n³ intermediate).  Tiles whose exact
  upper bound ½(max s_i + max s_j) − Σ_k min(min_i A_ik, min_j A_jk) (plus a rounding margin) shows that
  they can neither attain κ − tol nor raise κ(½(I+A)) are skipped (:data:`PRUNE`): the answers are the
  same bits, and attention with "sink" tokens — most rows sharing mass on a few columns — skips most
  tiles, while matrices without such structure pay a few per cent for the bounds.
* **torch** (any device, used for CUDA tensors and as the CPU fallback/reference): row blocks of the
  distance matrix are accumulated one ``k`` at a time with in-place ops, so the temporary of a block
  stays under :data:`BLOCK_BYTES` (CPU) or :data:`CUDA_BLOCK_BYTES`.

``DOBRUSHIN_KERNEL=torch`` forces the torch path on CPU (``auto``, the default, picks numba when it
imports).  All routines take a ``(b, n, n)`` torch tensor or numpy array (float32 or float64, any
strides) and return torch tensors on the input's device.
"""
from __future__ import annotations

import os
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


def _as_torch64(T) -> torch.Tensor:
    t = T if isinstance(T, torch.Tensor) else torch.from_numpy(np.asarray(T))
    return t.detach().to(torch.float64)


def _device(T) -> torch.device:
    return T.device if isinstance(T, torch.Tensor) else torch.device("cpu")


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


def _pair_summary_torch(T: torch.Tensor, tol: float) -> PairSummary:
    T = T.to(torch.float64)
    b, n, _ = T.shape
    dev = T.device
    if n < 2:
        z = torch.zeros(b, dtype=torch.float64, device=dev)
        return PairSummary(z, z.clone(), torch.zeros(b, dtype=torch.bool, device=dev),
                           torch.full((b, 2), -1, dtype=torch.int64, device=dev))
    # a chunk of matrices at a time bounds the (chunk, n, n) temporaries of the epilogue
    budget = CUDA_BLOCK_BYTES if dev.type == "cuda" else 64 * 2**20
    chunk = max(1, budget // (8 * 8 * n * n))
    parts = [_summary_from_distances(T[m:m + chunk], _half_l1_torch(T[m:m + chunk]), tol)
             for m in range(0, b, chunk)]
    return PairSummary(*(torch.cat(f) for f in zip(*parts)))


# ---------------------------------------------------------------------------------------------- numba


def _threads() -> int:
    import numba

    return numba.get_num_threads()


def _pair_summary_numba(T, tol: float, prune: bool | None = None) -> PairSummary:
    prune = PRUNE if prune is None else bool(prune)
    A = _as_numpy(T)
    b, n, _ = A.shape
    kap = np.zeros(b)
    kf = np.zeros(b)
    holds = np.zeros(b, dtype=np.bool_)
    wit = np.full((b, 2), -1, dtype=np.int64)
    if b and n >= 2:
        with _nb.slp_enabled():
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
        with _nb.slp_enabled():
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
    return _pair_summary_torch(_as_torch64(T), tol)


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
            _nb.distances_one_serial(a[0], np.zeros((3, 3)))
