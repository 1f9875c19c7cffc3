"""Input validation shared by every public entry point (one validator, clear messages).

Every public routine of :mod:`dobrushin` accepts a numpy array or a torch tensor of shape
``(..., n, n)`` whose last two axes are a row-stochastic matrix.  :func:`check_stochastic`
is the single place where that is checked; its :class:`ValueError` messages say exactly what
is wrong and where ("matrix (0, 3): row 2 sums to 0.97").

The scalar arguments of every layer (counts, sizes, seeds, a choice among names) are checked here too,
by :func:`check_integer`, :func:`check_positive` and :func:`check_choices`, so that each rule has one
implementation and one wording ("batch_size must be an integer >= 1, got 0").
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Optional, Sequence, Tuple

import numpy as np

try:  # torch is a required dependency (coefficient.py and kernel.py import it, and numpy input goes
    import torch  # numpy -> torch -> numpy there); only this module's checks also run without it
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
    """``A`` itself when it is a float32 or float64 numpy array / torch tensor (no copy), else
    :func:`to_float64` of it.  For routines that read float32 exactly (the distance kernel)."""
    if is_torch(A):
        return A.detach() if A.dtype in (torch.float32, torch.float64) else to_float64(A)
    arr = np.asarray(A)
    return arr if arr.dtype in (np.float32, np.float64) else to_float64(arr)


def _where(index: tuple, shape: tuple) -> str:
    lead = index[:-2] if len(shape) > 2 else ()
    return f"matrix {tuple(int(i) for i in lead)}: " if lead else ""


def check_stochastic(A: Any, atol: float = DEFAULT_ATOL, *, convert: bool = True):
    """Check that ``A`` (shape ``(..., n, n)``) is a stack of row-stochastic matrices.

    Returns the input converted to float64 (numpy array or torch tensor); with ``convert=False`` a
    float32 input is checked and returned as it is (no float64 copy of the batch; row sums are still
    accumulated in float64).  Raises :class:`ValueError` naming the problem: not a matrix, not square,
    empty, NaN or inf, a negative entry, or a row that does not sum to 1 within ``atol`` (naming the row).

    A valid input is read twice (its smallest entry and its row sums, :func:`_accepts`); a float32 input
    whose float32 row sums are far enough inside ``1 ± atol`` for a rounding bound to settle it skips the
    float64 sums (:func:`_float32_settles`).  Only an input that fails is read again, by the checks that
    name the first problem.
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
    # something fails: the three checks below find the first problem and name it.  Each runs a block of
    # matrices at a time (bounded temporaries: torch's isfinite alone makes a full-size float copy), and in
    # the same order as on the whole batch, so the first problem reported is the same
    bad = _first(X, lambda Y: ~xp.isfinite(Y))
    if bad is not None:
        val = float(X[tuple(bad)])
        return _raise(f"{_where(tuple(bad), shape)}entry ({bad[-2]}, {bad[-1]}) is {val} (NaN or inf)")
    bad = _first(X, lambda Y: Y < -atol)
    if bad is not None:
        return _raise(
            f"{_where(tuple(bad), shape)}negative entry {float(X[tuple(bad)]):.6g} at ({bad[-2]}, {bad[-1]})"
        )
    sums = _row_sums64(X)
    off = (sums - 1).abs() > atol if is_torch(X) else np.abs(sums - 1) > atol
    if bool(off.any()):
        bad = np.argwhere(off.cpu().numpy() if is_torch(X) else off)[0]
        s = float(sums[tuple(bad)])
        lead = tuple(int(i) for i in bad[:-1])
        prefix = f"matrix {lead}: " if lead else ""
        return _raise(f"{prefix}row {int(bad[-1])} sums to {s:.10g}, not 1 (atol={atol:g})")
    return X  # (not reached: the two passes and the three checks read the same entries and the same sums)


#: entries per chunk of the float64 row sums of float32 input (bounds the float64 temporary)
_SUM_CHUNK = 1 << 22


def _blocks(X):
    """``(start, block)`` over ``X.reshape((-1, n, n))``, :data:`_SUM_CHUNK` entries of matrices at a
    time (one matrix at least): the one way the checks below walk a batch, so that the two passes of
    :func:`_accepts` and the checks that name a problem read the same rows in the same blocks (the order
    in which a row is added depends on the block's layout)."""
    shape = tuple(X.shape)
    flat = X.reshape((-1,) + shape[-2:])
    step = max(1, _SUM_CHUNK // max(1, shape[-1] * shape[-2]))
    for i in range(0, flat.shape[0], step):
        yield i, flat[i:i + step]


def _sum64(blk):
    """Row sums of a block accumulated in float64 (torch's ``sum(dtype=float64)`` of a float32 tensor
    converts the block first: a float64 copy of one block, not of the batch)."""
    return blk.sum(-1, dtype=torch.float64) if is_torch(blk) else blk.sum(-1, dtype=np.float64)


def _first(X, pred):
    """Index (a tuple over all axes) of the first entry, in C order, where ``pred`` holds; None if none.
    Evaluated a block of matrices at a time."""
    shape = tuple(X.shape)
    for i, blk in _blocks(X):
        m = pred(blk)
        if bool(m.any()):
            hit = np.argwhere(m.cpu().numpy() if is_torch(m) else m)[0]
            lead = np.unravel_index(i + int(hit[0]), shape[:-2]) if len(shape) > 2 else ()
            return tuple(int(v) for v in lead) + (int(hit[1]), int(hit[2]))
    return None


def _accepts(X, atol: float) -> bool:
    """Whether every check of :func:`check_stochastic` passes on ``X`` (``(..., n, n)``, not empty, float32
    or float64), in two passes a block of matrices at a time instead of three: the smallest entry, then the
    float64 row sums (taken as :func:`_row_sums64` takes them).  When every row sum is within ``atol`` of 1
    and the smallest entry is ≥ −``atol``, every check passes: a NaN or ±inf entry makes its row sum NaN or
    infinite (or the smallest entry NaN or −inf), so the sums catch every non-finite entry; the smallest
    entry is there for finite negative entries in a row that still sums to 1.  A float32 block whose float32
    row sums settle the question (:func:`_float32_settles`) skips the float64 sums.  False means some check
    fails, and the three checks find and name it."""
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
    """True when float32 row sums prove that every row of ``blk`` (float32, ``(m, n, n)``) sums to within
    ``atol`` of 1 in float64 too, so the float64 row sums (a sum with a float64 accumulator reads every
    entry some ten times slower than a float32 one) need not be taken; False
    when they cannot (any other dtype, a NaN or infinite sum, a sum too close to 1 ± ``atol``), and the
    float64 sums decide.  **Precondition:** every entry is ≥ 0 (the caller, :func:`_accepts`, has read the
    smallest entry; the bound below needs it, and this function does not check it again).

    Why it is sound: with every entry ≥ 0, a float32 sum ŝ of n entries in any order is within
    γ·s of the exact sum s, γ = (n − 1)u / (1 − (n − 1)u), u = 2⁻²⁴ (Higham, *Accuracy and Stability*,
    §4.2), so s ≤ ŝ / (1 − γ) and |s − 1| ≤ |ŝ − 1| + γ ŝ / (1 − γ); the float64 sum is within the same
    bound with u = 2⁻⁵³ of s.  When the largest |ŝ − 1| plus both bounds (and a few ulps for evaluating
    them) is ≤ ``atol``, every float64 row sum is within ``atol`` of 1."""
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
    """Row sums accumulated in float64, shape ``X.shape[:-1]``, a block at a time (:func:`_blocks`,
    :func:`_sum64`): the sums :func:`_accepts` took, whatever the layout of ``X``."""
    parts = [_sum64(blk) for _, blk in _blocks(X)]
    lead = tuple(X.shape[:-1])
    return torch.cat(parts).reshape(lead) if is_torch(X) else np.concatenate(parts).reshape(lead)


def _raise(msg: str):
    raise ValueError(msg)


def check_tol(tol: float) -> float:
    tol = float(tol)
    if not np.isfinite(tol) or tol < 0:
        raise ValueError(f"tol must be a finite non-negative number, got {tol!r}")
    return tol


def check_integer(name: str, value: Any, minimum: Optional[int] = None, *, optional: bool = False) -> Optional[int]:
    """``value`` as a Python ``int``: an ``int`` or a numpy integer, never a bool, a float or a string;
    at least ``minimum`` when given; ``None`` passes (and is returned) when ``optional``.  ValueError
    naming ``name``: "n must be an integer >= 2, got 1"."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or (minimum is not None and value < minimum):
        bound = f" >= {minimum}" if minimum is not None else ""
        raise ValueError(f"{name} must be an integer{bound}{' or None' if optional else ''}, got {value!r}")
    return int(value)


def check_positive(name: str, value: Any) -> float:
    """``value`` as a finite positive ``float`` (a number or its spelling; not a bool); ValueError naming
    ``name``: "alpha must be a finite positive number, got 0"."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a finite positive number, got {value!r}")
    return v


def check_choices(name: str, values: Any, allowed: Sequence[str]) -> Tuple[str, ...]:
    """``values`` (one name or an iterable of names) as a non-empty tuple of members of ``allowed``;
    ValueError naming ``name``: "weights must be a non-empty subset of ('pretrained', 'untrained'), got ()"."""
    values = (values,) if isinstance(values, str) else tuple(values if isinstance(values, Iterable) else (values,))
    if not values or any(v not in allowed for v in values):
        raise ValueError(f"{name} must be a non-empty subset of {tuple(allowed)}, got {values}")
    return values
