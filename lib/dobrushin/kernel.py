"""The pairwise-distance kernel behind :func:`kappa`, :func:`attaining_pairs` and :func:`equality_holds`.

All routines take a float64 torch tensor ``(b, n, n)`` (CPU or CUDA) and compute every pairwise
half-L1 row distance ``D_ij = ½ Σ_k |A_ik − A_jk|`` exactly once per matrix, in row blocks whose
temporary never exceeds :data:`BLOCK_BYTES` (no ``n³`` intermediate).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

#: upper bound on the size of the temporary of one block, in bytes
BLOCK_BYTES = 32 * 2**20


def half_l1_distances(T: torch.Tensor) -> torch.Tensor:
    """``D[b, i, j] = ½ ‖T[b, i] − T[b, j]‖₁`` in float64, computed in row blocks."""
    T = T.to(torch.float64)
    b, n, _ = T.shape
    D = torch.empty((b, n, n), dtype=torch.float64, device=T.device)
    rows = max(1, BLOCK_BYTES // (8 * n * n))
    for m in range(b):
        M = T[m]
        for i0 in range(0, n, rows):
            i1 = min(n, i0 + rows)
            D[m, i0:i1] = (M[i0:i1, None, :] - M[None, :, :]).abs_().sum(-1)
    D.mul_(0.5)
    return D


def kappa_only(T: torch.Tensor) -> torch.Tensor:
    """κ of each matrix of ``(b, n, n)`` → ``(b,)`` float64 (0 for n = 1)."""
    return half_l1_distances(T).flatten(1).amax(1)


class PairSummary(NamedTuple):
    kappa: torch.Tensor  # (b,) float64
    kappa_factor: torch.Tensor  # (b,) float64, κ(½(I+A))
    holds: torch.Tensor  # (b,) bool
    witness: torch.Tensor  # (b, 2) int64


def pair_summary(T: torch.Tensor, tol: float) -> PairSummary:
    """κ(A), κ(½(I+A)), the equality condition and a witness pair for each matrix of ``(b, n, n)``.

    Uses ½‖B_i − B_j‖₁ = ½ + ½(D_ij − x⁻ − y⁻) with x = A_ii − A_ji, y = A_jj − A_ij, t⁻ = max(−t, 0).
    """
    T = T.to(torch.float64)
    b, n, _ = T.shape
    dev = T.device
    if n < 2:
        z = torch.zeros(b, dtype=torch.float64, device=dev)
        return PairSummary(z, z.clone(), torch.zeros(b, dtype=torch.bool, device=dev),
                           torch.full((b, 2), -1, dtype=torch.int64, device=dev))
    D = half_l1_distances(T)
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
    # witness: first good pair if any, else first attaining pair
    pick = torch.where(holds[:, None], good.flatten(1), attaining.flatten(1))
    flat = pick.to(torch.int8).argmax(1)
    witness = torch.stack([flat // n, flat % n], 1)
    return PairSummary(kap, kf, holds, witness)
