"""``exact_equality``: the equality condition in exact integer arithmetic on the float64 entries of one
matrix, for the rare matrices where the float64 comparison is too close to call."""
from __future__ import annotations

import math

import numpy as np


def _exact_ints(A: np.ndarray) -> list:
    """The entries of a float64 matrix as exact integers in units of 2**-1074 (nested lists)."""
    out = []
    for row in A:
        r = []
        for x in row.tolist():
            if not (x >= 0 and math.isfinite(x)):
                raise ValueError(f"exact_equality needs finite non-negative entries, got {x!r}")
            p, q = float(x).as_integer_ratio()  # q is a power of two ≤ 2**1074
            r.append(p << (1075 - q.bit_length()))
        out.append(r)
    return out


def _exact_max_distance(M: list, X: np.ndarray) -> int:
    """max_{i<j} Σ_k |M_ik − M_jk| for the exact integer matrix ``M``, ``X`` its float64 values (within
    2**-53 relative).  Only pairs within 8·n·eps of the float64 maximum are summed exactly: every float64
    distance is within 3n·eps, so the exact maximiser is among them."""
    import torch

    from ..math.kernel import half_l1_distances

    n = X.shape[0]
    D = np.asarray(half_l1_distances(torch.from_numpy(np.ascontiguousarray(X)[None]))[0].cpu().numpy())
    iu, ju = np.triu_indices(n, 1)
    d = D[iu, ju]
    cand = np.flatnonzero(d >= d.max() - 8 * n * np.finfo(np.float64).eps)
    best = 0
    for c in cand:
        ri, rj = M[iu[c]], M[ju[c]]
        best = max(best, sum(abs(x - y) for x, y in zip(ri, rj)))
    return best


def exact_equality(A: np.ndarray) -> bool:
    """κ(½(I+A)) = ½(1+κ(A)) decided exactly for one matrix, no tolerance.

    With S = 2**1074 and M = A·S (exact integers): 4S·κ(½(I+A)) = max Σ_k |(M + S·I)_ik − (M + S·I)_jk|
    and 4S·½(1+κ(A)) = 2S + max Σ_k |M_ik − M_jk|; float64 distances only shortlist the pairs summed.
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] < 2:
        raise ValueError(f"exact_equality takes one n x n matrix with n >= 2, got shape {A.shape}")
    if (A > 1).any():
        raise ValueError("exact_equality needs entries in [0, 1]")
    S = 1 << 1074
    M = _exact_ints(A)
    Bm = [row[:] for row in M]
    for k in range(A.shape[0]):
        Bm[k][k] += S
    Bf = 0.5 * (A + np.eye(A.shape[0]))
    return _exact_max_distance(Bm, Bf) == 2 * S + _exact_max_distance(M, A)
