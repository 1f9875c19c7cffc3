"""What the attention of a model looks like near its diagonal, measured on a few inputs, next to random
row-stochastic matrices of the same size: why a control holds more often than a random matrix does.

For a matrix whose entries carry no structure (Dirichlet(1) rows), the two events ``A_ii ≥ A_ji`` and
``A_jj ≥ A_ij`` of a pair are each about as likely as not and nearly independent, so about a quarter of all
pairs — and of the κ-attaining pairs — are mutually self-dominant.  A diagonal that is systematically larger
than the entries beside it raises that share.  :func:`diagonal_structure` measures, per layer, the mean diagonal
and off-diagonal entry (times ``n``, so 1 is uniform), the share of *all* pairs that are mutually self-dominant
and the share of inputs whose κ-attaining pair is (the equality condition).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..capture.extract import extract_attention
from ..math.coefficient import DEFAULT_TOL, analyse, kappa, restrict
from ..random.ensembles import sample_matrices

STRUCTURE_COLUMNS = ("layer", "n_tokens", "diag_x_n", "offdiag_x_n", "excess_sd", "msd_all_pairs", "holds", "kappa")


def matrix_structure(A: np.ndarray, tol: float = DEFAULT_TOL) -> dict:
    """For a batch ``(..., n, n)`` of row-stochastic matrices: mean diagonal × n, mean off-diagonal × n, the
    diagonal excess in units of the spread of the off-diagonal entries (``excess_sd``: per matrix, (mean A_ii −
    mean A_ij) / sd(A_ij), i ≠ j, averaged), the share of pairs i < j that are mutually self-dominant, the share of
    matrices where the equality condition holds, and the mean κ."""
    X = np.asarray(A, dtype=np.float64).reshape(-1, A.shape[-2], A.shape[-1])
    n = X.shape[-1]
    d = np.diagonal(X, axis1=-2, axis2=-1)  # (m, n)
    off = (X.sum((-2, -1)) - d.sum(-1)) / (n * (n - 1))
    offmask = ~np.eye(n, dtype=bool)
    sd = X[:, offmask].std(-1)
    excess = np.where(sd > 0, (d.mean(-1) - off) / np.where(sd > 0, sd, 1.0), 0.0)
    dom = (d[:, None, :] - X) >= -tol  # dom[m, j, i]: A_ii >= A_ji
    msd = dom & np.swapaxes(dom, -1, -2)
    iu = np.triu_indices(n, 1)
    res = analyse(X, tol, validate=False)
    return {"n_tokens": n, "diag_x_n": float(d.mean() * n), "offdiag_x_n": float(off.mean() * n),
            "excess_sd": float(excess.mean()),
            "msd_all_pairs": float(msd[:, iu[0], iu[1]].mean()), "holds": float(np.mean(res.holds)),
            "kappa": float(np.mean(res.kappa))}


def diagonal_structure(lm, items: Sequence, *, variant: str = "content", tol: float = DEFAULT_TOL) -> pd.DataFrame:
    """Per layer, :func:`matrix_structure` of ``lm``'s head-averaged attention on ``items`` (restricted to the
    variant's tokens and renormalised, as in the test), pooled over the items (one at a time, so no padding)."""
    rows = []
    for item in items:
        ex = extract_attention(lm.model, lm.preprocess([item]))
        keep = np.asarray(ex.keep(0, variant))
        if len(keep) < 2:
            continue
        A = restrict(ex.attention[0].double(), keep, validate=False).numpy()  # (L, n, n)
        for layer in range(A.shape[0]):
            rows.append({"layer": layer, **matrix_structure(A[layer], tol)})
    if not rows:
        raise ValueError("no item kept two or more tokens")
    df = pd.DataFrame(rows)
    return df.groupby("layer", as_index=False).mean()[list(STRUCTURE_COLUMNS)]


def random_structure(n: int, *, count: int = 64, seed: int = 0, ensemble: str = "dirichlet(1)",
                     tol: float = DEFAULT_TOL) -> dict:
    """:func:`matrix_structure` of ``count`` random matrices of size ``n`` (the seeded stream of
    :func:`dobrushin.random.ensembles.sample_matrices`)."""
    return matrix_structure(sample_matrices(ensemble, int(n), 0, int(count), int(seed)), tol)


def random_kappa(n: int, *, count: int = 64, seed: int = 0, ensemble: str = "dirichlet(1)") -> np.ndarray:
    """κ of ``count`` random matrices of size ``n`` (seeded stream)."""
    X = sample_matrices(ensemble, int(n), 0, int(count), int(seed))
    return np.asarray(kappa(torch.from_numpy(X), validate=False).numpy(), dtype=np.float64)


__all__ = ["STRUCTURE_COLUMNS", "diagonal_structure", "matrix_structure", "random_kappa", "random_structure"]
