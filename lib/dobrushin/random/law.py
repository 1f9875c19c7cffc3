"""Statistics of the law of the random baseline (the baseline-law chapter), computed from the grid of
:func:`dobrushin.random.cells.run_grid` / :func:`~dobrushin.random.ensembles.summarise` and from
sampled matrices; tested in ``tests/test_law.py``."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fractions import Fraction

from .ensembles import holds_bounds, pair_split_constant, pair_statistics, parse_ensemble, sample_matrices


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
    (``c_lo`` from its upper end, ``c_hi`` from its lower end).  Equals ``E[(K₊ − n/2)²]/n`` of the
    attaining pair's sign count ``K₊ = #{k: u_k > 0}`` when no column ties."""
    n = grid["n"].astype(float)
    return pd.DataFrame({"c_n": n / 4 - (n - 1) * grid["rb_p_reversed"],
                         "c_lo": n / 4 - (n - 1) * grid["rb_reversed_ci_high"],
                         "c_hi": n / 4 - (n - 1) * grid["rb_reversed_ci_low"]}, index=grid.index)


def fixed_pair_counts(A: np.ndarray) -> np.ndarray:
    """``K₊ = #{k: A_rk > A_sk}`` for the fixed disjoint pairs of rows ``(0, 1), (2, 3), ...`` of every
    matrix of ``A`` (``(b, n, n)``), by :func:`~dobrushin.random.ensembles.pair_statistics`; shape
    ``(n // 2 · b,)``, pair by pair."""
    A = np.asarray(A)
    b, n = A.shape[0], A.shape[-1]
    pairs = np.arange(n - n % 2).reshape(-1, 2)
    return np.concatenate([pair_statistics(A, np.tile(p, (b, 1)))["pos"] for p in pairs]) if len(pairs) else \
        np.zeros(0, dtype=np.int64)


def fixed_pair_split(ensemble, n: int, matrices: int, seed: int) -> dict:
    """The split constant of *fixed* pairs of rows, ``E[(P − n/2)²]/n``, on ``matrices`` sampled matrices
    of size ``n`` (stream ``seed``): ``{"pairs", "c", "halfwidth"}`` (half-width of a normal 95% interval;
    the matrices are independent, the pairs of one matrix are disjoint rows)."""
    P = fixed_pair_counts(sample_matrices(ensemble, n, 0, matrices, seed))
    v = (P - n / 2) ** 2 / n
    half = 1.96 * v.std(ddof=1) / np.sqrt(v.size) if v.size > 1 else float("nan")
    return {"pairs": int(v.size), "c": float(v.mean()) if v.size else float("nan"), "halfwidth": float(half)}


def upper_bound_from(x) -> int:
    """The smallest ``m ≥ 2`` with ``⌊k²/4⌋/(k(k−1)) ≤ x`` for **every** ``k ≥ m``: from that size on no
    column-exchangeable continuous ensemble can give ``P(holds) > x``. The bound is non-increasing in
    ``k`` (``(m+1)/(4m+2)`` at both ``k = 2m+1`` and ``k = 2m+2``) and tends to ¼, so the answer is the
    first ``k`` where it is ``≤ x``; ``x ≤ ¼`` is never reached (ValueError)."""
    x = Fraction(repr(x)) if isinstance(x, float) else Fraction(x)  # 0.3 means 3/10
    if x <= Fraction(1, 4):
        raise ValueError(f"the upper bound stays above 1/4 for every n; {x} is never reached")
    k = 2
    while holds_bounds(k)[1] > x:
        k += 1
    return k


def approach(grid: pd.DataFrame, ensembles, min_n: int = 8) -> pd.DataFrame:
    """How each ensemble approaches ¼, from the column-averaged estimates (``rb_p_holds`` and its 95%
    interval) at ``n ≥ min_n``: the largest ``n`` and its estimate; the lowest estimate and its ``n``;
    the first ``n`` whose interval lies entirely below ¼ (``NaN`` if none); and ``side`` at the largest
    ``n``: ``"above"``/``"below"`` when the interval excludes ¼, else ``"at"``."""
    rows = []
    for e in ensembles:
        s = grid[(grid["ensemble"] == e) & (grid["n"] >= min_n)].sort_values("n")
        if s.empty:
            raise ValueError(f"no sizes n >= {min_n} for {e!r} in the grid")
        last, low = s.iloc[-1], s.loc[s["rb_p_holds"].idxmin()]
        under = s[s["rb_ci_high"] < 0.25]
        side = "above" if last["rb_ci_low"] > 0.25 else "below" if last["rb_ci_high"] < 0.25 else "at"
        rows.append({"ensemble": e, "n_max": int(last["n"]), "p_max_n": float(last["rb_p_holds"]),
                     "lo_max_n": float(last["rb_ci_low"]), "hi_max_n": float(last["rb_ci_high"]),
                     "p_min": float(low["rb_p_holds"]), "n_min": int(low["n"]),
                     "first_below": float(under["n"].iloc[0]) if len(under) else float("nan"), "side": side})
    return pd.DataFrame(rows)


def typical_pairs(grid: pd.DataFrame, ensembles, ns, matrices: int, seed: int) -> pd.DataFrame:
    """Fixed pairs of rows against the attaining pair at equal ``n``: per ensemble and ``n`` in ``ns``,
    ``c_W`` (first order, :func:`~dobrushin.random.ensembles.pair_split_constant`), the simulated
    fixed-pair constant ``c_fixed`` ± ``h_fixed`` (:func:`fixed_pair_split` on ``matrices`` matrices,
    stream ``seed``), the attaining pair's ``c_n`` with its interval from ``grid`` (NaN where the grid
    lacks the cell), and the gap ``c_n − c_fixed`` with a 95% half-width combining both intervals."""
    rows = []
    for e in ensembles:
        cw = pair_split_constant(e)
        for n in ns:
            fp = fixed_pair_split(e, int(n), matrices, seed)
            att = grid[(grid["ensemble"] == e) & (grid["n"] == n)]
            if len(att):
                sc = split_constant(att).iloc[0]
                c, lo, hi = float(sc["c_n"]), float(sc["c_lo"]), float(sc["c_hi"])
            else:
                c = lo = hi = float("nan")
            h_att = (hi - lo) / 2
            rows.append({"ensemble": e, "n": int(n), "c_W": cw, "fixed pairs": fp["pairs"], "c_fixed": fp["c"],
                         "h_fixed": fp["halfwidth"], "c_n": c, "c_n_lo": lo, "c_n_hi": hi,
                         "gap": c - fp["c"], "h_gap": float(np.hypot(h_att, fp["halfwidth"]))})
    return pd.DataFrame(rows)


def finite_first_order(ensembles, limit: float = 1.0) -> list:
    """The ensembles whose first-order fixed-pair constant ``c_W`` is below ``limit`` (of order one);
    for the others (softmax at low temperature, ``c_W`` in the hundreds) every simulated size is
    pre-asymptotic."""
    return [e for e in ensembles if pair_split_constant(e) < limit]


def temperature_scale(ensemble) -> float:
    """``e^{1/T²}``, the size of ``var W/μ² + 1`` for softmax weights ``W = e^{z/T}``: the row totals
    concentrate only once ``n`` is far above it."""
    ens = parse_ensemble(ensemble)
    if ens.kind != "softmax_gaussian":
        raise ValueError(f"{ens.name} is not a softmax ensemble")
    return float(np.exp(1 / ens.param ** 2))


__all__ = ["approach", "finite_first_order", "fixed_pair_counts", "fixed_pair_split", "split_constant", "swap_z",
           "temperature_scale", "typical_pairs", "upper_bound_from"]
