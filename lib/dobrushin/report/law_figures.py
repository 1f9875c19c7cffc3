"""Figures and tables of the baseline-law appendix, from the ``run_grid`` grid and ``dobrushin.random.law``."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..random import ensembles as E
from ..random import law
from .plots import log2_axis

#: One colour per ensemble (Okabe–Ito without the trained blue and untrained orange of the book).
ENSEMBLE_PALETTE = ["#4D4D4D", "#009E73", "#56B4E9", "#D55E00", "#CC79A7", "#F0E442"]


# ------------------------------------------------------------------ exact values and the bound

def bounds_table(n_max: int = 10) -> pd.DataFrame:
    """The universal bounds 1/n ≤ P(holds) ≤ ⌊n²/4⌋/(n(n−1)) for n = 2 … n_max, as fractions and decimals."""
    bounds = {n: E.holds_bounds(n) for n in range(2, n_max + 1)}
    return pd.DataFrame([{"n": n, "lower 1/n": str(lo), "upper ⌊n²/4⌋/(n(n−1))": str(hi), "upper (decimal)": float(hi)}
                         for n, (lo, hi) in bounds.items()])


# ------------------------------------------------------------------ the curve

def curve_figure(grid: pd.DataFrame, ensembles: Sequence[str]):
    """Left: column-averaged P(holds), 95% t-bands, per ensemble; right: its standardised gap to the direct fraction."""
    import matplotlib.pyplot as plt

    if len(ensembles) > len(ENSEMBLE_PALETTE):
        raise ValueError(f"at most {len(ENSEMBLE_PALETTE)} ensembles can be told apart, got {len(ensembles)}")
    col, lab = dict(zip(ensembles, ENSEMBLE_PALETTE)), {e: E.parse_ensemble(e).label for e in ensembles}
    fig, axes = plt.subplots(1, 2, figsize=(9.4, 4.2), layout="constrained", gridspec_kw={"width_ratios": [1.25, 1]})
    ax = axes[0]
    nn = np.unique(np.round(np.geomspace(2, int(grid["n"].max()), 200)).astype(int))
    ax.plot(nn, [float(E.holds_bounds(int(k))[1]) for k in nn], color="0.3", lw=0.8, ls="--",
            label="universal bounds")
    ax.plot(nn, [float(E.holds_bounds(int(k))[0]) for k in nn], color="0.3", lw=0.8, ls="--")
    ax.axhline(0.25, color="0.3", lw=0.8, ls=":", label="limit ¼")
    for e in ensembles:
        s = grid[grid["ensemble"] == e].sort_values("n")
        ax.plot(s["n"], s["rb_p_holds"], "-o", ms=2.5, lw=1.3, color=col[e], label=lab[e])
        ax.fill_between(s["n"], s["rb_ci_low"], s["rb_ci_high"], color=col[e], alpha=0.25, lw=0)
    ax.plot([2, 3], [0.5, 1 / 3], "k*", ms=9, label="exact: ½ and ⅓")
    ax.set_ylim(0.2, 0.52)
    ax.set_ylabel("P(equality condition holds)")
    ax.set_title("Column-averaged estimate, 95% t-bands", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax = axes[1]
    for k, e in enumerate(ensembles):
        s = grid[(grid["ensemble"] == e) & (grid["n"] >= 3)].sort_values("n")
        z = (s["p"] - s["rb_p_holds"]) / np.sqrt(s["rb_p_holds"] * (1 - s["rb_p_holds"]) / s["trials"])
        ax.plot(s["n"] * (1 + 0.03 * (k - 2.5)), z, "o", ms=3.5, color=col[e], label=lab[e])
    ax.axhspan(-1.96, 1.96, color="0.5", alpha=0.15, label="±1.96")
    ax.axhline(0, color="0.3", lw=0.8)
    ax.set_ylabel("(fraction that hold − score) / s.e.")
    ax.set_title("Direct fraction vs column-averaged estimate", fontsize=10)
    for a in axes:
        log2_axis(a, "matrix size n", grid=True)
    return fig


def rate_table(grid: pd.DataFrame, ensembles: Sequence[str], min_n: int = 64) -> pd.DataFrame:
    """Per ensemble with a finite first-order constant c_W: ¼ − c_n (95% interval) at its largest size ≥ ``min_n``,
    and the conjectured limit ¼ − c_W."""
    g = grid.copy()
    g[["c_n", "c_lo", "c_hi"]] = law.split_constant(g)
    rows = []
    for e in law.finite_first_order(ensembles):
        s = g[(g["ensemble"] == e) & (g["n"] >= min_n)].sort_values("n")
        if len(s):
            r = s.iloc[-1]
            rows.append({"ensemble": E.parse_ensemble(e).label, "largest n": int(r["n"]), "matrices": int(r["trials"]),
                         "¼ − c_n": 0.25 - r["c_n"], "95% low": 0.25 - r["c_hi"], "95% high": 0.25 - r["c_lo"],
                         "limit ¼ − c_W": 0.25 - E.pair_split_constant(e)})
    return pd.DataFrame(rows)
