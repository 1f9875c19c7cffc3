"""Statistics of the law of the random baseline (the baseline-law chapter), computed from the grid of
:func:`dobrushin.random.ensembles.run_grid` / :func:`~dobrushin.random.ensembles.summarise` and from
sampled matrices; tested in ``tests/test_law.py``."""
from __future__ import annotations

import numpy as np
import pandas as pd

from .ensembles import pair_statistics, sample_matrices


def swap_z(grid: pd.DataFrame) -> pd.Series:
    """Standardised difference between the fractions of matrices that hold and that are both reversed,
    per cell: ``d / sqrt((h + r − d²) / T)`` with ``d = h − r`` (``h = p_holds``, ``r = p_both_reversed``,
    ``T = trials``), the multinomial variance of the per-matrix difference of the two indicators.  About
    standard normal when the two events are equally likely (the swap lemma)."""
    h, r, T = grid["p_holds"].astype(float), grid["p_both_reversed"].astype(float), grid["trials"].astype(float)
    d = h - r
    return (d / np.sqrt((h + r - d**2) / T)).rename("z_swap")


def split_constant(grid: pd.DataFrame) -> pd.DataFrame:
    """The split constant of the attaining pair, ``c_n = n/4 − (n − 1) P̂(both reversed)`` from the
    column-averaged estimate ``rb_p_reversed``, with the 95% interval from that estimate's interval
    (``c_lo`` from its upper end, ``c_hi`` from its lower end).  Equals ``E[(P − n/2)²]/n`` of the
    attaining pair's sign count P when no column ties."""
    n = grid["n"].astype(float)
    return pd.DataFrame({"c_n": n / 4 - (n - 1) * grid["rb_p_reversed"],
                         "c_lo": n / 4 - (n - 1) * grid["rb_reversed_ci_high"],
                         "c_hi": n / 4 - (n - 1) * grid["rb_reversed_ci_low"]}, index=grid.index)


def fixed_pair_counts(A: np.ndarray) -> np.ndarray:
    """``P = #{k: A_rk > A_sk}`` for the fixed disjoint pairs of rows ``(0, 1), (2, 3), ...`` of every
    matrix of ``A`` (``(b, n, n)``), by :func:`~dobrushin.random.ensembles.pair_statistics`; shape
    ``(n // 2 · b,)``, pair by pair."""
    A = np.asarray(A)
    b, n = A.shape[0], A.shape[-1]
    pairs = np.arange(n - n % 2).reshape(-1, 2)
    return np.concatenate([pair_statistics(A, np.tile(p, (b, 1)))["pos"] for p in pairs]) if len(pairs) else \
        np.zeros(0, dtype=np.int64)


def fixed_pair_split(ensemble, n: int, matrices: int, seed: int) -> dict:
    """The split constant of *fixed* pairs of rows, ``E[(P − n/2)²]/n``, on ``matrices`` sampled matrices
    of size ``n`` (stream ``seed``): ``{"pairs", "c", "halfwidth"}`` (half-width of a normal 95% interval)."""
    P = fixed_pair_counts(sample_matrices(ensemble, n, 0, matrices, seed))
    v = (P - n / 2) ** 2 / n
    half = 1.96 * v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return {"pairs": int(v.size), "c": float(v.mean()) if v.size else float("nan"), "halfwidth": float(half)}


__all__ = ["fixed_pair_counts", "fixed_pair_split", "split_constant", "swap_z"]
