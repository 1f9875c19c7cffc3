"""Binomial proportions: Wilson score intervals over independent draws, and intervals clustered by input
(cluster-robust variance, Wilson interval at the effective sample size)."""
from __future__ import annotations

import math
from typing import Tuple


Z95 = 1.959963984540054


def wilson(k: int, n: int, z: float = Z95) -> Tuple[float, float, float]:
    """Proportion ``k/n`` and its Wilson score interval ``(p, low, high)``; ``n = 0`` gives ``(nan, 0, 1)``."""
    k, n = int(k), int(n)
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return float("nan"), 0.0, 1.0
    p = k / n
    return (p, *wilson_n(p, n, z))


# --- intervals clustered by input -------------------------------------------------------------------
#: The (input, layer) pairs of one input share the input: they are not independent draws, and a Wilson
#: interval over pairs is too narrow when they agree with each other.  The clustered interval below treats
#: the *input* as the unit of sampling.


def cluster_sums(k, n) -> dict:
    """Sufficient statistics (integer sums) for ``clustered`` of per-input counts: ``k[i]`` of the ``n[i]``
    pairs of input ``i`` hold.  Sums over disjoint inputs add, so pooled intervals need only these."""
    import numpy as np

    k = np.asarray(k, dtype=np.int64).ravel()
    n = np.asarray(n, dtype=np.int64).ravel()
    if k.shape != n.shape:
        raise ValueError(f"k and n differ in length ({k.size} vs {n.size})")
    if (n < 0).any() or (k < 0).any() or (k > n).any():
        raise ValueError("need 0 <= k[i] <= n[i] for every input")
    return {"clusters": int(k.size), "k": int(k.sum()), "n": int(n.sum()), "kk": int((k * k).sum()),
            "kn": int((k * n).sum()), "nn": int((n * n).sum())}


def add_sums(*sums: dict) -> dict:
    """The :func:`cluster_sums` of the union of disjoint sets of inputs."""
    keys = ("clusters", "k", "n", "kk", "kn", "nn")
    return {key: int(sum(s[key] for s in sums)) for key in keys}


def cluster_variance(sums: dict) -> float:
    """Cluster-robust variance of ``p = Σk / Σn``: ``G/(G−1) · Σ_i (k_i − p·n_i)² / (Σn)²`` over ``G``
    inputs; nan when G < 2."""
    G, K, N = sums["clusters"], sums["k"], sums["n"]
    if G < 2 or N <= 0:
        return float("nan")
    p = K / N
    ss = sums["kk"] - 2 * p * sums["kn"] + p * p * sums["nn"]  # Σ (k_i − p n_i)²
    return max(0.0, ss) * G / (G - 1) / (N * N)


def effective_n(sums: dict) -> float:
    """``Σn / deff``, design effect ``deff`` = cluster-robust / binomial variance clipped to ``[1, Σn/G]``;
    ``G`` (one draw per input, the conservative end) when ``p`` is 0 or 1."""
    G, K, N = sums["clusters"], sums["k"], sums["n"]
    if N <= 0:
        return 0.0
    if G <= 1:
        return float(G)
    p = K / N
    if p <= 0 or p >= 1:
        return float(G)
    deff = cluster_variance(sums) / (p * (1 - p) / N)
    deff = min(max(deff, 1.0), N / G)
    return N / deff


def wilson_n(p: float, n: float, z: float = Z95) -> Tuple[float, float]:
    """Wilson score interval of a proportion ``p`` at a (possibly fractional) sample size ``n``."""
    if not n > 0:
        return 0.0, 1.0
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(max(0.0, p * (1 - p)) / n + z2 / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def clustered(sums: dict, z: float = Z95) -> Tuple[float, float, float]:
    """``(p, low, high)``: ``Σk/Σn`` and the Wilson interval at ``effective_n``; ``Σn = 0`` gives ``(nan, 0, 1)``."""
    K, N = sums["k"], sums["n"]
    if N <= 0:
        return float("nan"), 0.0, 1.0
    p = K / N
    lo, hi = wilson_n(p, effective_n(sums), z)
    return p, lo, hi


def pct(x, d: int = 1) -> str:
    """``0.123`` → ``"12.3%"`` (``d`` decimals); a missing value (None or NaN) → ``"—"``."""
    if x is None or not math.isfinite(float(x)):
        return "—"
    return f"{100 * float(x):.{d}f}%"
