"""Figures and glued numbers of the baseline chapter, from the grid of ``dobrushin.random.cells.run_grid``."""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from ..random import ensembles as E
from ..random import law
from .style import COLORS
from .names import and_join, pct, runs
from .plots import log2_axis, panel_grid, require_columns


def uniform_figure(uni: pd.DataFrame, band: tuple, band_label: str, exact2: float):
    """P(holds) against n for rows uniform on the simplex (Wilson 95% bars), paper's band, exact n = 2 and limit ¼."""
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
                     ncols: int = 3):
    """One panel per ensemble in ``order``: P(holds) with Wilson 95% bars, Dirichlet(1) as reference elsewhere."""
    reference = "dirichlet(1)"
    require_columns(res, ["ensemble", "n", "p", "ci_low", "ci_high"], "the ensemble table", nonempty=True)
    missing = [e for e in order if e not in set(res["ensemble"])]
    if missing:
        raise ValueError(f"ensembles {missing} are not in the table")
    fig, axes = panel_grid(len(order), ncols, panel=(3.2, 2.6), sharex=True)
    ref = res[res["ensemble"] == reference].sort_values("n")
    for ax, e in zip(axes, order):
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
    cols = min(ncols, len(axes))
    for i, ax in enumerate(axes):
        ax.set_xlabel("matrix size n" if i + cols >= len(axes) else "")  # the lowest panel of each column
        ax.set_ylabel("P(holds)" if i % cols == 0 else "")
    handles, lab = axes[1 if len(axes) > 1 else 0].get_legend_handles_labels()
    fig.legend(handles, lab, loc="outside lower center", ncol=len(lab), fontsize=8, frameon=False)
    return fig


def size_ranges(values: Sequence[int], grid: Sequence[int]) -> str:
    """``values`` (a subset of ``grid``) as runs of grid points: ``"n = 5 to 256 and n = 512"``, ``"no n"``."""
    return and_join(f"n = {a}" if a == b else f"n = {a} to {b}" for a, b in runs(values, grid)) or "no n"


def _row(df, n, ens="dirichlet(1)"):
    r = df[(df["n"] == n) & (df["ensemble"] == ens)]
    if r.empty:
        raise ValueError(f"n={n} is not in the grid {sorted(df['n'].unique())}")
    return r.iloc[0]


def uniform_values(uni: pd.DataFrame, band: tuple) -> dict:
    """The numbers under the uniform-row figure (glued as ``uni-*``), judged against ``band``."""
    lo, hi = band
    grid = list(uni["n"])
    r2, r8 = _row(uni, 2), _row(uni, 8)
    nmax = int(uni["n"].max())
    where = lambda mask: size_ranges(uni[mask]["n"].tolist(), grid)  # noqa: E731
    return {"p2": f"{r2['p']:.4f}", "p2-ci": f"{r2['ci_low']:.4f}–{r2['ci_high']:.4f}", "p2-trials": f"{int(r2['trials']):,}",
            "p8": pct(r8["p"]), "p8-ci": f"{pct(r8['ci_low'])}–{pct(r8['ci_high'])}",
            "p8-where": "inside" if lo <= r8["p"] <= hi else "outside", "band": f"{pct(lo, 0)}–{pct(hi, 0)}",
            "inside": where((uni["p"] >= lo) & (uni["p"] <= hi)),
            "overlap": where((uni["ci_high"] >= lo) & (uni["ci_low"] <= hi)),
            "below": where(uni["ci_high"] < lo), "above": where(uni["ci_low"] > hi),
            "nmax": str(nmax), "pmax": pct(_row(uni, nmax)["p"])}


def ensembles_values(res: pd.DataFrame, labels: dict) -> dict:
    """The numbers under the ensemble panels (glued as ``ens-*``); raises if the ensembles share no size."""
    common = sorted(set.intersection(*(set(g["n"]) for _, g in res.groupby("ensemble"))))
    if not common:
        raise ValueError("the ensembles share no size")
    out = dict.fromkeys(("at8-min", "at8-min-label", "at8-max", "at8-max-label", "z", "small"), "—")
    if 8 in common:
        at8 = res[res["n"] == 8].set_index("ensemble")["p"]
        out.update({"at8-min": pct(at8.min()), "at8-min-label": labels.get(at8.idxmin(), at8.idxmin()),
                    "at8-max": pct(at8.max()), "at8-max-label": labels.get(at8.idxmax(), at8.idxmax())})
    sm = res[res["n"].isin([2, 3])]
    if len(sm):
        ex = sm["n"].map({2: 0.5, 3: 1 / 3})
        out.update({"z": f"{float(((sm['p'] - ex).abs() / np.sqrt(ex * (1 - ex) / sm['trials'])).max()):.1f}",
                    "small": str(sm["ensemble"].nunique())})
    big = res[res["n"] == max(common)]
    return {**out, "big": str(max(common)), "big-lo": pct(big["ci_low"].min()), "big-hi": pct(big["ci_high"].max())}


def bound_values(paper_band: tuple, n_ref: int = 8) -> dict:
    """What the universal upper bound (at ``n_ref`` and beyond) says about the paper's band (glued as ``bound-*``)."""
    lo_b, hi_b = paper_band
    ub = E.holds_bounds(n_ref)[1]
    n_ub = law.upper_bound_from(ub)
    top = Fraction(repr(float(hi_b)))
    eq = [n for n in range(2, n_ub + 1) if E.holds_bounds(n)[1] == top]
    top_from = str(law.upper_bound_from(top)) if top > Fraction(1, 4) else "no n"  # the bound stays above ¼
    return {"ref": f"{ub.numerator}/{ub.denominator}", "ref-decimal": f"{float(ub):.4f}", "n-ref": str(n_ref),
            "from": str(n_ub), "top": pct(hi_b, 0), "top-from": top_from,
            "top-at": and_join([f"n = {n}" for n in eq]) or "no n", "upper-part": f"{pct(float(ub))}–{pct(hi_b, 0)}"}


def theorem_check_values(allres: pd.DataFrame) -> dict:
    """The counts of the direct check of the theorem over every sampled matrix (glued as ``thm-*``)."""
    tot = allres[["trials", "checked", "float_mismatches", "disagreements", "ties"]].sum()
    return {k: f"{int(v):,}" for k, v in tot.rename({"float_mismatches": "mismatches"}).items()}
