"""Float error bounds for tests that compare two different numeric paths.

Bit-equality is asserted only where the project guarantees it by construction (the index-order κ kernel
against its plain loops, numba against the torch recheck, copies and gathers, the same call twice in one
process).  Two *different* paths — a batched and an unbatched matrix product, numpy's and torch's row
sums, another summation order, another thread count, another CPU's BLAS kernels — agree only to a
rounding bound, and the tests use the bounds below (Higham, *Accuracy and Stability of Numerical
Algorithms*, 2nd ed., §3.1 and §3.5: a sum of m terms in any order has error ≤ γ_{m−1} Σ|terms|, a dot
product of length m ≤ γ_m Σ|terms|, with γ_m = m u / (1 − m u) and u = 2⁻⁵³ the float64 unit roundoff).
"""
from __future__ import annotations

import numpy as np

#: unit roundoff of float64
U64 = np.finfo(np.float64).eps / 2


def gamma(m: int, u: float = U64) -> float:
    """γ_m = m u / (1 − m u)."""
    return m * u / (1 - m * u)


def rollout_paths_atol(n: int, L: int) -> float:
    """Entrywise bound on the difference between two float64 evaluations of F_L ⋯ F_1 (any summation order
    in each product) of L stochastic n × n factors: each product adds at most γ_n · (|F||R|)_ij ≤ γ_n
    (|F||R| = F R is stochastic, entries ≤ 1), and a stochastic F does not enlarge the max-abs error it
    multiplies, so each path is within (L − 1) γ_n of the exact product; two paths within twice that."""
    return 2 * max(L - 1, 0) * gamma(n) * (1 + 1e-9)


def row_normalise_rtol(k: int) -> float:
    """Relative bound on the difference between two evaluations of S_ij / Σ_l S_il (k kept columns,
    nonnegative entries, the sums in any order): each sum is within γ_{k−1} relatively, the division adds
    u, so each result is within γ_{k−1} + 2u of exact (first order); two paths within twice that."""
    return 2 * (gamma(max(k - 1, 0)) + 2 * U64) * (1 + 1e-9)


def near_tie(A: np.ndarray, tol: float, eps: float) -> np.ndarray:
    """For a stack ``(..., n, n)``: whether the equality test on each matrix is within ``eps`` of flipping,
    i.e. whether a perturbation of each decisive quantity by at most ``eps`` could change its answer.

    The test asks: does some pair with D_ij ≥ κ − tol have x_ij = A_ii − A_ji ≥ −tol and
    y_ij = A_jj − A_ij ≥ −tol?  It can flip only if some D_ij is within ``eps`` of κ − tol, or some pair
    within ``eps`` of attaining has x_ij + tol or y_ij + tol within ``eps`` of 0.  Computed here from the
    definitions (numpy, its own summation order), independently of the kernel."""
    A = np.asarray(A, dtype=np.float64)
    D = 0.5 * np.abs(A[..., :, None, :] - A[..., None, :, :]).sum(-1)
    n = A.shape[-1]
    iu = np.triu_indices(n, 1)
    Dp = D[..., iu[0], iu[1]]
    if Dp.shape[-1] == 0:
        return np.zeros(A.shape[:-2], dtype=bool)
    kap = Dp.max(-1, keepdims=True)
    near_threshold = np.abs(Dp - (kap - tol)) <= eps
    candidate = Dp >= kap - tol - eps
    diag = np.diagonal(A, axis1=-2, axis2=-1)
    x = diag[..., iu[0]] - A[..., iu[1], iu[0]]
    y = diag[..., iu[1]] - A[..., iu[0], iu[1]]
    near_dominance = candidate & ((np.abs(x + tol) <= eps) | (np.abs(y + tol) <= eps))
    return (near_threshold | near_dominance).any(-1)
