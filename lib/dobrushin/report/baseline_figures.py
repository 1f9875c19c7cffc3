"""Figures and generated sentences of the random-matrix baseline chapter (``notebooks/baseline.ipynb``).

Drawn from the tidy grid of :func:`dobrushin.random.cells.run_grid` (columns ``ensemble``, ``n``,
``p``, ``ci_low``, ``ci_high``, ``trials``). The random baseline is drawn in the book's baseline colour
(:data:`dobrushin.report.style.COLORS` ``"random"``). Tested in ``tests/test_baseline_figures.py``.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from ..random import ensembles as E
from ..random import law
from .style import COLORS
from .names import and_join, pct
from .plots import log2_axis, require_columns




def uniform_figure(uni: pd.DataFrame, band: tuple, band_label: str, exact2: float):
    """P(holds) against n for rows uniform on the simplex, with Wilson 95% error bars, the paper's band
    shaded, the exact value at n = 2 and the limit ¼ dotted."""
    import matplotlib.pyplot as plt

    require_columns(uni, ["n", "p", "ci_low", "ci_high"], "the uniform-row table", nonempty=True)
    fig, ax = plt.subplots(figsize=(6.9, 4.0), layout="constrained")
    ax.axhspan(*band, color="0.6", alpha=0.18, label=band_label)
    err = np.vstack([uni["p"] - uni["ci_low"], uni["ci_high"] - uni["p"]])
    ax.errorbar(uni["n"], uni["p"], yerr=err, fmt="o-", ms=3.5, lw=1.2, capsize=2, color=COLORS["random"],
                label="Dirichlet(1) rows, Wilson 95%")
    ax.plot([2], [exact2], marker="*", ms=12, color=COLORS["special"], ls="none", label="exact value ½ at n = 2")
    ax.axhline(0.25, color="0.4", ls=":", lw=1, label="¼ (limit)")
    log2_axis(ax)
    ax.set_xlabel("matrix size n (tokens)")
    ax.set_ylabel("P(equality condition holds)")
    ax.set_ylim(0.15, 0.55)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def ensembles_facets(res: pd.DataFrame, order: Sequence[str], labels: dict, band: tuple, band_label: str,
                     reference: str = "dirichlet(1)", ncols: int = 3):
    """One panel per ensemble (in ``order``): its P(holds) with Wilson 95% error bars, the paper's band
    shaded, ¼ dotted, and the ``reference`` ensemble as a thin line in every other panel for comparison."""
    import matplotlib.pyplot as plt

    require_columns(res, ["ensemble", "n", "p", "ci_low", "ci_high"], "the ensemble table", nonempty=True)
    missing = [e for e in order if e not in set(res["ensemble"])]
    if missing:
        raise ValueError(f"ensembles {missing} are not in the table")
    k = len(order)
    ncols = max(1, min(ncols, k))
    nrows = -(-k // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 2.6 * nrows), sharex=True, sharey=True,
                             layout="constrained", squeeze=False)
    ref = res[res["ensemble"] == reference].sort_values("n")
    for ax in axes.ravel()[k:]:
        ax.set_visible(False)
    for ax, e in zip(axes.ravel(), order):
        g = res[res["ensemble"] == e].sort_values("n")
        ax.axhspan(*band, color="0.6", alpha=0.18, label=band_label)
        ax.axhline(0.25, color="0.4", ls=":", lw=1, label="¼")
        if e != reference and len(ref):
            ax.plot(ref["n"], ref["p"], "-", color="0.55", lw=0.8, label=labels.get(reference, reference))
        err = np.vstack([g["p"] - g["ci_low"], g["ci_high"] - g["p"]])
        ax.errorbar(g["n"], g["p"], yerr=err, fmt="o-", ms=2.5, lw=1.1, capsize=1.5, color=COLORS["random"],
                    label="this ensemble, Wilson 95%")
        ax.set_title(labels.get(e, e), fontsize=10)
        log2_axis(ax)
        ax.grid(alpha=0.3)
        ax.set_ylim(0.1, 0.6)
    for ax in axes[-1]:
        ax.set_xlabel("matrix size n")
    for ax in axes[:, 0]:
        ax.set_ylabel("P(holds)")
    handles, lab = axes.ravel()[1 if k > 1 else 0].get_legend_handles_labels()
    fig.legend(handles, lab, loc="outside lower center", ncol=len(lab), fontsize=8, frameon=False)
    return fig


def size_ranges(values: Sequence[int], grid: Sequence[int]) -> str:
    """Sizes ``values`` (a subset of the ordered ``grid``) as readable runs of consecutive grid points:
    ``"n = 5 to 256 and n = 512"``, ``"n = 8"``, ``"no n"``."""
    grid = [int(g) for g in grid]
    vals = sorted({int(v) for v in values}, key=grid.index)
    if not vals:
        return "no n"
    runs, start, prev = [], vals[0], vals[0]
    for v in vals[1:]:
        if grid.index(v) == grid.index(prev) + 1:
            prev = v
            continue
        runs.append((start, prev))
        start = prev = v
    runs.append((start, prev))
    parts = [f"n = {a}" if a == b else f"n = {a} to {b}" for a, b in runs]
    return and_join(parts)


def _row(df, n, ens="dirichlet(1)"):
    r = df[(df["n"] == n) & (df["ensemble"] == ens)]
    if r.empty:
        raise ValueError(f"n={n} is not in the grid {sorted(df['n'].unique())}")
    return r.iloc[0]


def uniform_text(uni: pd.DataFrame, band: tuple) -> str:
    """The paragraph under the uniform-row figure: n = 2 against ½, n = 8, where the estimates lie
    relative to the paper's band, the largest size."""
    lo, hi = band
    grid = list(uni["n"])
    r2, r8 = _row(uni, 2), _row(uni, 8)
    nmax = int(uni["n"].max())
    inside = uni[(uni["p"] >= lo) & (uni["p"] <= hi)]["n"].tolist()
    overlap = uni[(uni["ci_high"] >= lo) & (uni["ci_low"] <= hi)]["n"].tolist()
    below = uni[uni["ci_high"] < lo]["n"].tolist()
    above = uni[uni["ci_low"] > hi]["n"].tolist()
    in8 = "inside" if lo <= r8["p"] <= hi else "outside"
    return (
        f"At $n=2$ the estimate is {r2['p']:.4f} (95% interval {r2['ci_low']:.4f}–{r2['ci_high']:.4f}, "
        f"{int(r2['trials'])} matrices) against the exact value $\\tfrac12$. "
        f"At $n=8$ it is {pct(r8['p'])} ({pct(r8['ci_low'])}–{pct(r8['ci_high'])}), {in8} the paper's band "
        f"{pct(lo, 0)}–{pct(hi, 0)}. Over the grid, the point estimate lies inside the band at "
        f"{size_ranges(inside, grid)}; the 95% interval overlaps the band at {size_ranges(overlap, grid)}"
        + (f", lies entirely below it at {size_ranges(below, grid)}" if below else "")
        + (f", and lies entirely above it at {size_ranges(above, grid)}" if above else "")
        + f". The largest size, $n={nmax}$, gives {pct(_row(uni, nmax)['p'])}. The band describes moderate $n$: "
        "at the smallest sizes the baseline is higher (it starts at $\\tfrac12$) and at large $n$ it approaches "
        "$\\tfrac14$, near the lower end of the band."
    )


def ensembles_text(res: pd.DataFrame, labels: dict) -> str:
    """The paragraph under the ensemble panels: spread at n = 8, agreement with ½ and ⅓ at n = 2, 3,
    and the range at the largest common size."""
    common = sorted(set.intersection(*(set(g["n"]) for _, g in res.groupby("ensemble"))))
    if not common:
        raise ValueError("the ensembles share no size")
    out = []
    if 8 in common:
        at8 = res[res["n"] == 8].set_index("ensemble")["p"]
        out.append(f"At $n=8$ the estimates range from {pct(at8.min())} ({labels.get(at8.idxmin(), at8.idxmin())}) "
                   f"to {pct(at8.max())} ({labels.get(at8.idxmax(), at8.idxmax())}).")
    sm = res[res["n"].isin([2, 3])]
    if len(sm):
        ex = sm["n"].map({2: 0.5, 3: 1 / 3})
        z = float(((sm["p"] - ex).abs() / np.sqrt(ex * (1 - ex) / sm["trials"])).max())
        out.append(f"At $n=2$ and $n=3$ the {sm['ensemble'].nunique()} ensembles' estimates differ from "
                   f"$\\tfrac12$ and $\\tfrac13$ by at most {z:.1f} standard errors.")
    big = max(common)
    atbig = res[res["n"] == big]
    out.append(f"At $n={big}$ all estimates lie between {pct(atbig['ci_low'].min())} and "
               f"{pct(atbig['ci_high'].max())} (lowest and highest ends of the 95% intervals).")
    return " ".join(out)


def bound_text(paper_band: tuple, n_ref: int = 8) -> str:
    """What the universal upper bound of the appendix says about the paper's band: its value at ``n_ref`` and
    the sizes from which values above it, and above the band's top, are impossible."""
    lo_b, hi_b = paper_band
    ub = E.holds_bounds(n_ref)[1]
    n_ub = law.upper_bound_from(ub)
    top = Fraction(repr(float(hi_b)))
    n_top = law.upper_bound_from(top) if top > Fraction(1, 4) else None
    s = (f"The universal upper bound is ${ub.numerator}/{ub.denominator}\\approx {float(ub):.4f}$ at $n={n_ref}$, and "
         f"since it does not increase with $n$, no normalised-weight ensemble can have $P(\\text{{holds}})$ above "
         f"${ub.numerator}/{ub.denominator}$ at any $n\\ge{n_ub}$.")
    if n_top:
        eq = [n for n in range(2, n_ub + 1) if E.holds_bounds(n)[1] == top]
        s += (f" Values above the top of the paper's {pct(lo_b, 0)}–{pct(hi_b, 0)} band are impossible for every "
              f"$n\\ge{n_top}$" + (f" (the bound is exactly {pct(hi_b, 0)} at $n=" + "$ and $n=".join(map(str, eq)) + "$)"
                                   if eq else "")
              + f", so the upper part of the band, {pct(float(ub))}–{pct(hi_b, 0)}, can only be reached at $n<{n_ub}$.")
    return s


def theorem_check_text(allres: pd.DataFrame) -> str:
    """The paragraph on the direct check of the theorem over every sampled matrix."""
    tot = allres[["trials", "checked", "float_mismatches", "disagreements", "ties"]].sum()
    ties = int(tot["ties"])
    return (
        f"{int(tot['trials']):,} matrices were sampled in this chapter and {int(tot['checked']):,} of them were "
        f"checked directly. The float64 comparison of $\\kappa(\\tfrac12(I+A))$ with $\\tfrac12(1+\\kappa(A))$ "
        f"disagreed with the condition on {int(tot['float_mismatches'])} matrices; each was recomputed in exact "
        f"integer arithmetic, and the number of disagreements with the theorem that remain is "
        f"**{int(tot['disagreements'])}**. (Float64 mismatches happen when a comparison on the attaining pair is "
        "decided by entries too small for $\\tfrac12(I+A)$ to resolve, as in the sparse Dirichlet(0.1) rows. "
        f"{ties} {'matrix' if ties == 1 else 'matrices'} had an exact float64 tie in a comparison or a column of "
        "the attaining pair, from entries that round to exactly 0 or 1.)"
    )


__all__ = ["bound_text", "ensembles_facets", "ensembles_text", "pct", "size_ranges", "theorem_check_text", "uniform_figure",
           "uniform_text"]
