r"""Matrix routines: the Dobrushin coefficient, the rollout factor, the layer bound and the equality condition.

``A`` is row-stochastic ``n x n``; D_ij = ½‖A_i − A_j‖₁; κ(A) = max D_ij; B = ½(I + A).  With
x_ij = A_ii − A_ji, y_ij = A_jj − A_ij and t⁻ = max(−t, 0): ½‖B_i − B_j‖₁ = ½ + ½(D_ij − x_ij⁻ − y_ij⁻), so
κ(B) ≤ ½(1 + κ(A)), with equality iff some pair attaining κ(A) has x_ij ≥ 0 and y_ij ≥ 0.

Every function takes a numpy array or torch tensor ``(..., n, n)``, validates it unless
``validate=False``, and computes in float64.  ``tol`` is absolute; with ``tol=0`` results are exact
when the entries are binary fractions exactly representable in float64 (every sum is then exact).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from . import kernel
from .validation import DEFAULT_ATOL, check_stochastic, check_tol, is_torch, native_float, to_float64

#: default absolute tolerance of the equality test: absorbs float64 rounding (~1e-16) of
#: renormalised real attention, far below any meaningful difference.
DEFAULT_TOL = 1e-12


def _prepare(A: Any, validate: bool, atol: float, *, native: bool = False):
    """``A`` as float64 (checked when ``validate``); ``native`` keeps float32 input, which the kernel reads
    exactly, so no float64 copy."""
    if validate:
        return check_stochastic(A, atol=atol, convert=not native)
    X = native_float(A) if native else to_float64(A)
    if X.ndim < 2:
        raise ValueError(f"expected a matrix of shape (..., n, n), got shape {tuple(X.shape)}")
    return X


def _as_torch(X) -> torch.Tensor:
    return X if is_torch(X) else torch.from_numpy(np.ascontiguousarray(X))


def _out(t: torch.Tensor, like):
    """Return ``t`` in the array family of ``like`` (numpy in -> numpy out)."""
    if is_torch(like):
        return t
    arr = t.cpu().numpy()
    return arr[()] if arr.ndim == 0 else arr


@dataclass(frozen=True)
class Analysis:
    """Per-matrix results of ``analyse``, numpy arrays of shape ``A.shape[:-2]``.

    ``slack`` = bound − kappa_factor ≥ 0.  ``witness`` ``(..., 2)``: an attaining pair ``i < j``, mutually
    self-dominant when ``holds``, else one that fails (``-1, -1`` when n = 1).  The margins (see
    ``kernel.Margins``) are set only by ``analyse(..., margins=True)``, else None.
    """

    kappa: np.ndarray
    kappa_factor: np.ndarray
    bound: np.ndarray
    slack: np.ndarray
    holds: np.ndarray
    witness: np.ndarray
    kappa_gap: Any = None
    self_margin_i: Any = None
    self_margin_j: Any = None


def analyse(A: Any, tol: float = DEFAULT_TOL, *, validate: bool = True, atol: float = DEFAULT_ATOL,
            margins: bool = False) -> Analysis:
    """Every per-matrix number of ``A`` ``(..., n, n)`` in one kernel pass (``Analysis``); with
    ``margins=True`` also the decision margins."""
    tol = check_tol(tol)
    X = _as_torch(_prepare(A, validate, atol, native=True))
    lead = tuple(X.shape[:-2])
    flat = X.reshape((-1,) + tuple(X.shape[-2:]))
    if margins:
        s, m = kernel.pair_summary_margins(flat, tol)
    else:
        s, m = kernel.pair_summary(flat, tol), None
    f = lambda t: t.reshape(lead).cpu().numpy()  # noqa: E731
    kap, kf = f(s.kappa), f(s.kappa_factor)
    bound = 0.5 * (1.0 + kap)
    extra = {} if m is None else {"kappa_gap": f(m.kappa_gap), "self_margin_i": f(m.self_margin_i),
                                  "self_margin_j": f(m.self_margin_j)}
    return Analysis(
        kappa=kap,
        kappa_factor=kf,
        bound=bound,
        slack=bound - kf,
        holds=f(s.holds),
        witness=s.witness.reshape(lead + (2,)).cpu().numpy(),
        **extra,
    )


def kappa(A: Any, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """Dobrushin coefficient κ(A) = ½ max_{i,j} ‖A_i· − A_j·‖₁, float64, shape ``A.shape[:-2]``."""
    X = _prepare(A, validate, atol, native=True)
    T = _as_torch(X)
    lead = tuple(T.shape[:-2])
    k = kernel.kappa_only(T.reshape((-1,) + tuple(T.shape[-2:])))
    return _out(k.reshape(lead), X)


def rollout_factor(A: Any, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """The attention-rollout factor ½(I + A), same shape and array family as ``A`` (float64)."""
    X = _prepare(A, validate, atol)
    n = X.shape[-1]
    eye = torch.eye(n, dtype=X.dtype, device=X.device) if is_torch(X) else np.eye(n)
    return 0.5 * (X + eye)


def layer_bound(A: Any, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """The layer bound ½(1 + κ(A))."""
    return 0.5 * (1.0 + kappa(A, validate=validate, atol=atol))


def _single(X, name: str):
    if X.ndim != 2:
        raise ValueError(f"{name} takes a single n x n matrix, got shape {tuple(X.shape)}")


def attaining_pairs(A: Any, tol: float = DEFAULT_TOL, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """Pairs ``(i, j)``, ``i < j``, with ½‖A_i − A_j‖₁ ≥ κ(A) − tol of one matrix, in lexicographic order."""
    tol = check_tol(tol)
    X = _prepare(A, validate, atol)
    _single(X, "attaining_pairs")
    T = _as_torch(X)
    D = kernel.half_l1_distances(T[None])[0]
    n = T.shape[-1]
    if n < 2:
        return []
    iu = torch.triu_indices(n, n, 1, device=T.device)
    d = D[iu[0], iu[1]]
    keep = d >= d.max() - tol
    return [(int(i), int(j)) for i, j in zip(iu[0][keep].tolist(), iu[1][keep].tolist())]


def mutually_self_dominant(
    A: Any, i: int, j: int, tol: float = DEFAULT_TOL, *, validate: bool = True, atol: float = DEFAULT_ATOL
) -> bool:
    """True iff A_ii − A_ji ≥ −tol and A_jj − A_ij ≥ −tol, the same float64 comparison as the kernel's."""
    tol = check_tol(tol)
    X = _prepare(A, validate, atol)
    _single(X, "mutually_self_dominant")
    n = X.shape[-1]
    for name, v in (("i", i), ("j", j)):
        if not isinstance(v, (int, np.integer)) or not 0 <= v < n:
            raise ValueError(f"{name}={v!r} is not a token index in range(0, {n})")
    return bool(X[i, i] - X[j, i] >= -tol) and bool(X[j, j] - X[i, j] >= -tol)


def equality_holds(A: Any, tol: float = DEFAULT_TOL, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """True iff some pair attaining κ(A) within ``tol`` is mutually self-dominant within ``tol``.

    At ``tol=0`` in exact arithmetic this is ``kappa(rollout_factor(A)) == layer_bound(A)``; with
    ``tol > 0`` ties and dominance are decided up to ``tol``, so it need not agree with a float ``==``.
    Returns a bool for one matrix, else a bool array / tensor of shape ``A.shape[:-2]``; False when n = 1.
    """
    res = analyse(A, tol, validate=validate, atol=atol)
    if np.ndim(res.holds) == 0:
        return bool(res.holds)
    return torch.from_numpy(res.holds) if is_torch(A) else res.holds


def restrict(A: Any, keep: Any, renormalize: bool = True, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """Submatrix of every matrix of ``A`` on the tokens ``keep`` (indices or a boolean mask of length n),
    with each row divided by its sum when ``renormalize``; ValueError when a kept row has no mass there."""
    X = _prepare(A, validate, atol)
    n = X.shape[-1]
    k = np.asarray(keep.cpu() if is_torch(keep) else keep)
    if k.dtype == bool:
        if k.shape != (n,):
            raise ValueError(f"boolean keep mask has shape {k.shape}, expected ({n},)")
        idx = np.flatnonzero(k)
    else:
        if k.ndim != 1 or (k.size and not np.issubdtype(k.dtype, np.integer)):
            raise ValueError("keep must be a 1-d array of integer token indices or a boolean mask")
        idx = k.astype(np.int64)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise ValueError(f"keep has an index outside range(0, {n})")
        idx = np.where(idx < 0, idx + n, idx)
        if len(np.unique(idx)) != len(idx):
            raise ValueError("keep lists a token more than once")
    if idx.size == 0:
        raise ValueError("keep selects no tokens")
    if is_torch(X):
        ti = torch.as_tensor(idx, device=X.device)
        S = X.index_select(-2, ti).index_select(-1, ti)
    else:
        S = X[..., idx[:, None], idx[None, :]]
    if not renormalize:
        return S
    sums = S.sum(-1, keepdim=True) if is_torch(S) else S.sum(-1, keepdims=True)
    zero = sums <= 0
    if bool(zero.any()):
        bad = np.argwhere((zero.cpu().numpy() if is_torch(zero) else zero)[..., 0])[0]
        raise ValueError(f"row {int(idx[bad[-1]])} puts no mass on the kept tokens; it cannot be renormalised")
    return S / sums


def rollout(As: Any, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """Rollout F_L ⋯ F_1, F_l = ½(I + A_l), of a stack ``(..., L, n, n)`` → ``(..., n, n)`` float64."""
    F = rollout_factor(As, validate=validate, atol=atol)
    if F.ndim < 3:
        raise ValueError(f"rollout expects a stack of layers (..., L, n, n), got shape {tuple(F.shape)}")
    T = _as_torch(F)
    R = T[..., 0, :, :]
    for layer in range(1, T.shape[-3]):
        R = T[..., layer, :, :] @ R
    return _out(R, F)


def rollout_bound(As: Any, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """Product of the layer bounds ∏_l ½(1 + κ(A_l)) over the layer axis of ``(..., L, n, n)``;
    bounds κ(rollout(As)) because κ is submultiplicative."""
    b = layer_bound(As, validate=validate, atol=atol)
    if np.ndim(b) < 1:
        raise ValueError("rollout_bound expects a stack of layers (..., L, n, n)")
    return b.prod(-1)


def kappa_factor(A: Any, *, validate: bool = True, atol: float = DEFAULT_ATOL):
    """κ(½(I + A)) computed from the pairwise distances of A (no second distance pass)."""
    return _out(torch.from_numpy(np.asarray(analyse(A, validate=validate, atol=atol).kappa_factor)), to_float64(A))
