"""Input validation shared by every public entry point: ``check_stochastic`` for ``(..., n, n)``
row-stochastic stacks (numpy or torch), and ``check_integer``, ``check_positive``, ``check_choices`` for
scalar arguments.  Each raises ValueError saying what is wrong and where ("matrix (0, 3): row 2 sums to 0.97").
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional, Sequence, Tuple

import numpy as np

try:  # torch is required by the package; only this module's checks also run without it
    import torch
except ImportError:  # pragma: no cover
    torch = None  # type: ignore[assignment]

DEFAULT_ATOL = 1e-6


def is_torch(A: Any) -> bool:
    return torch is not None and isinstance(A, torch.Tensor)


def to_float64(A: Any):
    """Return ``A`` as a float64 numpy array or float64 torch tensor (same device)."""
    if is_torch(A):
        return A.detach().to(torch.float64)
    arr = np.asarray(A)
    if arr.dtype == object:
        raise ValueError("matrix has non-numeric entries (object array)")
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == bool):
        raise ValueError(f"matrix has non-numeric dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise ValueError("matrix is complex; a stochastic matrix must be real")
    return arr.astype(np.float64, copy=False)


def native_float(A: Any):
    """``A`` itself when float32 or float64 (no copy), else ``to_float64(A)``."""
    if is_torch(A):
        return A.detach() if A.dtype in (torch.float32, torch.float64) else to_float64(A)
    arr = np.asarray(A)
    return arr if arr.dtype in (np.float32, np.float64) else to_float64(arr)


def _where(lead) -> str:
    """``"matrix (i, j): "`` for the indices of a matrix in a stack, ``""`` for a lone matrix."""
    lead = tuple(int(i) for i in lead)
    return f"matrix {lead}: " if lead else ""


def check_stochastic(A: Any, atol: float = DEFAULT_ATOL, *, convert: bool = True):
    """Check that ``A`` ``(..., n, n)`` is a stack of row-stochastic matrices; return it as float64
    (``convert=False``: float32 stays float32, row sums still taken in float64).

    ValueError names the first problem: not a matrix, not square, empty, NaN or inf, an entry < −atol,
    or a row whose sum is not within ``atol`` of 1.  A valid input is read twice (``_accepts``); only a
    failing one is read again, to name the problem.
    """
    if atol < 0 or not np.isfinite(atol):
        raise ValueError(f"atol must be a finite non-negative number, got {atol!r}")
    X = to_float64(A) if convert else native_float(A)
    shape = tuple(X.shape)
    if len(shape) < 2:
        raise ValueError(f"expected a matrix of shape (..., n, n), got an array of shape {shape}")
    if shape[-1] != shape[-2]:
        raise ValueError(f"matrix is not square: its last two dimensions are {shape[-2]} x {shape[-1]}")
    if shape[-1] == 0 or any(s == 0 for s in shape):
        raise ValueError(f"matrix is empty (shape {shape})")
    if _accepts(X, atol):
        return X
    xp = torch if is_torch(X) else np
    # something fails: find and name the first problem, a block of matrices at a time (bounded temporaries)
    bad = _first(X, lambda Y: ~xp.isfinite(Y))
    if bad is not None:
        val = float(X[tuple(bad)])
        raise ValueError(f"{_where(bad[:-2])}entry ({bad[-2]}, {bad[-1]}) is {val} (NaN or inf)")
    bad = _first(X, lambda Y: Y < -atol)
    if bad is not None:
        raise ValueError(f"{_where(bad[:-2])}negative entry {float(X[tuple(bad)]):.6g} at ({bad[-2]}, {bad[-1]})")
    sums = _row_sums64(X)
    off = (sums - 1).abs() > atol if is_torch(X) else np.abs(sums - 1) > atol
    if bool(off.any()):
        bad = np.argwhere(off.cpu().numpy() if is_torch(X) else off)[0]
        s = float(sums[tuple(bad)])
        raise ValueError(f"{_where(bad[:-1])}row {int(bad[-1])} sums to {s:.10g}, not 1 (atol={atol:g})")
    return X  # (not reached: the two passes and the three checks read the same entries and the same sums)


#: entries per chunk of the float64 row sums of float32 input (bounds the float64 temporary)
_SUM_CHUNK = 1 << 22


def _blocks(X):
    """``(start, block)`` over ``X.reshape((-1, n, n))``, ``_SUM_CHUNK`` entries (one matrix at least) at
    a time: every check walks a batch this way, so all take the same float64 row sums (the summation
    order depends on the block's layout)."""
    shape = tuple(X.shape)
    flat = X.reshape((-1,) + shape[-2:])
    step = max(1, _SUM_CHUNK // max(1, shape[-1] * shape[-2]))
    for i in range(0, flat.shape[0], step):
        yield i, flat[i:i + step]


def _sum64(blk):
    """Row sums of a block accumulated in float64 (a float64 copy of one block, not of the batch)."""
    return blk.sum(-1, dtype=torch.float64) if is_torch(blk) else blk.sum(-1, dtype=np.float64)


def _first(X, pred):
    """Index (over all axes) of the first entry in C order where ``pred`` holds, else None."""
    shape = tuple(X.shape)
    for i, blk in _blocks(X):
        m = pred(blk)
        if bool(m.any()):
            hit = np.argwhere(m.cpu().numpy() if is_torch(m) else m)[0]
            lead = np.unravel_index(i + int(hit[0]), shape[:-2]) if len(shape) > 2 else ()
            return tuple(int(v) for v in lead) + (int(hit[1]), int(hit[2]))
    return None


def _accepts(X, atol: float) -> bool:
    """Whether every check of ``check_stochastic`` passes, in two passes per block: the smallest entry
    (≥ −atol), then the float64 row sums (within ``atol`` of 1; a non-finite entry makes its row sum
    non-finite, so this catches NaN and inf too).  A float32 block settled by ``_float32_settles`` skips
    the float64 sums."""
    torch_in = is_torch(X)
    for _, blk in _blocks(X):  # (the blocks of _row_sums64, so the same float64 sums)
        low = float(blk.amin()) if torch_in else float(blk.min())
        if not low >= -atol:  # a negative entry, NaN or −inf
            return False
        if low >= 0.0 and _float32_settles(blk, atol):
            continue
        sums = _sum64(blk)
        if not bool(((sums - 1).abs() <= atol).all() if torch_in else (np.abs(sums - 1) <= atol).all()):
            return False
    return True


def _float32_settles(blk, atol: float) -> bool:
    """True when float32 row sums prove every row of ``blk`` (float32 ``(m, n, n)``) sums to within
    ``atol`` of 1 in float64 too (float64 sums are about ten times slower); False means the float64 sums
    decide.  Precondition: every entry ≥ 0 (checked by the caller, not here).

    With entries ≥ 0 a float32 sum ŝ in any order is within γ·s of the exact s, γ = (n−1)u / (1 − (n−1)u),
    u = 2⁻²⁴ (Higham §4.2), so |s − 1| ≤ |ŝ − 1| + γŝ/(1 − γ); the float64 sum is within the same bound
    with u = 2⁻⁵³.  Settled when the largest |ŝ − 1| plus both bounds (and a few ulps) is ≤ ``atol``."""
    if is_torch(blk):
        if blk.dtype != torch.float32 or blk.numel() == 0:
            return False
    elif blk.dtype != np.float32 or blk.size == 0:
        return False
    n = int(blk.shape[-1])
    g32 = (n - 1) * 2.0 ** -24
    if g32 >= 0.5:
        return False
    g32 /= 1 - g32
    g64 = 2 * n * 2.0 ** -53  # ≥ γ_{n−1} for u = 2⁻⁵³ (n < 2⁵⁰)
    if g32 + g64 >= atol:  # the bound alone exceeds the tolerance: no block of this size can be settled
        return False
    s = blk.sum(-1)  # float32 sums (numpy: pairwise; torch: vectorised lanes; the bound holds for any order)
    lo, hi = (float(s.amin()), float(s.amax())) if is_torch(s) else (float(s.min()), float(s.max()))
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    top = hi / (1 - g32)  # ≥ every exact row sum
    dev = max(abs(hi - 1.0), abs(lo - 1.0)) + g32 * top + g64 * top
    return dev * (1 + 2.0 ** -40) <= atol


def _row_sums64(X):
    """Float64 row sums, shape ``X.shape[:-1]``: the same blocks and sums as ``_accepts``."""
    parts = [_sum64(blk) for _, blk in _blocks(X)]
    lead = tuple(X.shape[:-1])
    return torch.cat(parts).reshape(lead) if is_torch(X) else np.concatenate(parts).reshape(lead)


def check_tol(tol: float) -> float:
    tol = float(tol)
    if not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite non-negative number, got {tol!r}")
    return tol


def check_integer(name: str, value: Any, minimum: Optional[int] = None, *, optional: bool = False) -> Optional[int]:
    """``value`` (an int or numpy integer, not a bool) as an ``int`` ≥ ``minimum``; ``None`` passes when
    ``optional``.  ValueError: "n must be an integer >= 2, got 1"."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"{name} must be an integer{bound}{' or None' if optional else ''}, got {value!r}")
    return int(value)


def check_positive(name: str, value: Any) -> float:
    """``value`` (a number or its spelling, not a bool) as a finite positive float, else ValueError."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def check_choices(name: str, values: Any, allowed: Sequence[str]) -> Tuple[str, ...]:
    """``values`` (one name or an iterable) as a non-empty tuple of members of ``allowed``, else ValueError."""
    values = (values,) if isinstance(values, str) else tuple(values if isinstance(values, Iterable) else (values,))
    if not values or any(v not in allowed for v in values):
        raise ValueError(f"{name} must be a non-empty subset of {tuple(allowed)}, got {values}")
    return values
