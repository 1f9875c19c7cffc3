"""Figures, tables and generated sentences of the chapter *The law of the random baseline*
(``notebooks/baseline_law.ipynb``).

Everything is drawn or written from the tidy grid of :func:`dobrushin.random.ensembles.run_grid`
and the statistics of :mod:`dobrushin.random.law`; no number is typed. The ensembles are told apart by
a fixed palette (:data:`ENSEMBLE_COLORS`, none of which is the book's trained/untrained colour).
Tested in ``tests/test_law_figures.py``.
"""
from __future__ import annotations

from fractions import Fraction
from typing import Sequence

import numpy as np
import pandas as pd

from ..random import ensembles as E
from ..random import law
from .names import pct
from .plots import log2_axis

#: One colour per ensemble (Okabe–Ito without the trained blue and untrained orange of the book).
ENSEMBLE_PALETTE = ["#4D4D4D", "#009E73", "#56B4E9", "#D55E00", "#CC79A7", "#F0E442"]


def ensemble_colors(ensembles: Sequence[str]) -> dict:
    if len(ensembles) > len(ENSEMBLE_PALETTE):
        raise ValueError(f"at most {len(ENSEMBLE_PALETTE)} ensembles can be told apart, got {len(ensembles)}")
    return {e: ENSEMBLE_PALETTE[k] for k, e in enumerate(ensembles)}


def labels(ensembles: Sequence[str]) -> dict:
    return {e: E.parse_ensemble(e).label for e in ensembles}




# ------------------------------------------------------------------ exact values and the bound

def bounds_table(n_max: int = 10) -> pd.DataFrame:
    """The universal bounds 1/n ≤ P(holds) ≤ ⌊n²/4⌋/(n(n−1)) for n = 2 … n_max, as fractions and decimals."""
    rows = []
    for n in range(2, n_max + 1):
        lo, hi = E.holds_bounds(n)
        rows.append({"n": n, "lower 1/n": str(lo), "upper ⌊n²/4⌋/(n(n−1))": str(hi), "upper (decimal)": float(hi)})
    return pd.DataFrame(rows)


def bound_text(paper_band: tuple, n_ref: int = 8) -> str:
    """What the universal upper bound says about the paper's band: its value at ``n_ref`` and the sizes
    from which values above it, and above the band's top, are impossible."""
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


def small_n_text(small: pd.DataFrame, small_trials: int) -> str:
    """The cross-check at n = 2 and 3: Wilson coverage of ½ and ⅓, the largest deviation, and the
    column-averaged score, which is the exact value matrix by matrix whenever ``u`` has no zero entry."""
    z = small["z"].abs()
    inside = int(((small["ci_low"] <= small["exact"]) & (small["exact"] <= small["ci_high"])).sum())
    exact_sum = small["rb_holds_num"] == small["trials"] * small["n"].map({2: 1, 3: 2})
    off = small[~exact_sum]
    ties = int(small["ties"].sum())
    s = (f"With {int(small_trials):,} matrices per ensemble and size ({int(small['trials'].sum()):,} in all), the "
         f"exact value lies inside the Wilson 95% interval in {inside} of {len(small)} cases and the largest "
         f"deviation is {z.max():.2f} standard errors. The column-averaged score is not an estimate here but the "
         f"exact value itself, matrix by matrix, whenever $u$ has no zero entry (then $K_+K_-$ is 1 at $n=2$ and "
         f"2 at $n=3$, whatever the entries): its integer sum equals trials × exact value in "
         f"{int(exact_sum.sum())} of {len(small)} cells")
    if len(off):
        s += (" (the exception" + ("s" if len(off) > 1 else "") + ": "
              + ", ".join(f"{r['ensemble']} at $n={int(r['n'])}$, {int(r['ties'])} matrices with a float64 tie"
                          for _, r in off.iterrows())
              + "; a zero entry of $u$ counts as both signs in the score).")
    else:
        s += "."
    s += (f" Disagreements with the theorem: {int(small['disagreements'].sum())}. Matrices with an exact float64 "
          f"tie on the attaining pair: {ties}")
    if ties:
        s += (" (all in " + ", ".join(sorted(set(small.loc[small["ties"] > 0, "ensemble"])))
              + ", whose rows are so peaked that entries round to exactly 0 or 1).")
    else:
        s += "."
    return s


# ------------------------------------------------------------------ the curve

def curve_figure(grid: pd.DataFrame, ensembles: Sequence[str]):
    """Left: the column-averaged P(holds) with 95% t-bands per ensemble, the universal bounds and ¼.
    Right: the standardised difference between the direct fraction and the column-averaged estimate."""
    import matplotlib.pyplot as plt

    col, lab = ensemble_colors(ensembles), labels(ensembles)
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


def approach_table(grid: pd.DataFrame, ensembles: Sequence[str]) -> pd.DataFrame:
    """Per ensemble: the estimate at its largest n with its interval and side of ¼, and where it dips below ¼."""
    ap = law.approach(grid, ensembles)
    side = {"above": "above ¼", "below": "below ¼", "at": "consistent with ¼"}
    return pd.DataFrame({
        "ensemble": [E.parse_ensemble(e).label for e in ap["ensemble"]],
        # six decimals: at the largest sizes the estimates differ from ¼ in the fifth
        "largest n": ap["n_max"], **{c: [f"{v:.6f}" for v in ap[k]] for c, k in
                                     (("P(holds)", "p_max_n"), ("95% low", "lo_max_n"), ("95% high", "hi_max_n"))},
        "at the largest n": ap["side"].map(side),
        "first simulated n with interval below ¼": ap["first_below"],
        "lowest estimate (n)": [f"{p:.3f} ({n})" for p, n in zip(ap["p_min"], ap["n_min"])],
    })


def approach_text(grid: pd.DataFrame, ensembles: Sequence[str]) -> str:
    """From which side each ensemble approaches ¼ (from :func:`dobrushin.random.law.approach`)."""
    ap = law.approach(grid, ensembles)
    lab = labels(ensembles)

    def names(mask):
        return ", ".join(lab[e] for e in ap.loc[mask, "ensemble"])

    above, at = ap["side"] == "above", ap["side"] == "at"
    dips = ap["first_below"].notna()
    out = []
    if above.any():
        out.append(f"At its largest simulated size the estimate is still above ¼ for {names(above)}: a slow descent "
                   "towards ¼ from above.")
    if at.any():
        out.append(f"It is consistent with ¼ for {names(at)}.")
    if dips.any():
        parts = [f"{lab[r['ensemble']]} (first simulated size with its interval entirely below ¼: $n={int(r['first_below'])}$; "
                 "the sizes simulated are those of the figure, so it may cross earlier; lowest estimate "
                 f"{r['p_min']:.3f} at $n={r['n_min']}$)" for r in ap[dips].to_dict("records")]
        out.append("Falling below ¼: " + "; ".join(parts) + ". A descent towards ¼ from above is not the shape of "
                   "every ensemble.")
    return " ".join(out)


def curve_text(grid: pd.DataFrame, target_halfwidth: float) -> str:
    top = grid[grid["n"] == grid["n"].max()]
    half_rb = ((top["rb_ci_high"] - top["rb_ci_low"]) / 2).max()
    half_direct = ((top["ci_high"] - top["ci_low"]) / 2).max()
    tt = top.iloc[0]
    lab = E.parse_ensemble(tt["ensemble"]).label
    both = grid[grid["n"] >= 4]
    agree = int(((both["rb_p_holds"] >= both["ci_low"]) & (both["rb_p_holds"] <= both["ci_high"])).sum())
    return (
        f"At the largest size, $n={int(tt['n'])}$ ({lab}, {int(tt['trials'])} matrices), the column-averaged "
        f"estimate is {tt['rb_p_holds']:.5f} with 95% interval {tt['rb_ci_low']:.5f}–{tt['rb_ci_high']:.5f} "
        f"(half-width {half_rb:.5f}, {'within' if half_rb <= target_halfwidth else 'NOT within'} the chapter's "
        f"target ±{target_halfwidth}); the fraction of those matrices that hold is {tt['p']:.3f} "
        f"({tt['ci_low']:.3f}–{tt['ci_high']:.3f}, half-width {half_direct:.3f}). In {agree} of the {len(both)} cells "
        f"with $n\\ge4$ the column-averaged estimate lies inside the Wilson interval of the direct fraction (about 95% "
        f"are expected to)."
    )


def mixed_figure(grid: pd.DataFrame, ensembles: Sequence[str]):
    """P(mixed) → ½, corr(X, Y) against 4P − 1, and the split constant c_n (log axis) with the fixed-pair
    values c_W dashed, per ensemble."""
    import matplotlib.pyplot as plt

    col, lab = ensemble_colors(ensembles), labels(ensembles)
    g = grid.copy()
    g[["c_n", "c_lo", "c_hi"]] = law.split_constant(g)
    fig, axes = plt.subplots(1, 3, figsize=(9.4, 3.6), layout="constrained")
    for e in ensembles:
        s = g[(g["ensemble"] == e) & (g["n"] >= 3)].sort_values("n")
        kw = dict(color=col[e], label=lab[e])
        axes[0].plot(s["n"], s["rb_p_mixed"], "-", **kw)
        axes[0].errorbar(s["n"], s["p_mixed"], yerr=np.vstack([s["p_mixed"] - s["mixed_ci_low"],
                                                               s["mixed_ci_high"] - s["p_mixed"]]),
                         fmt="o", ms=2.5, lw=0.6, color=col[e], alpha=0.6)
        axes[1].plot(s["n"], s["corr_predicted"], "-", **kw)
        axes[1].errorbar(s["n"], s["corr"], yerr=1.96 / np.sqrt(s["trials"]), fmt="o", ms=2.5, lw=0.6, color=col[e],
                         alpha=0.6)
        axes[2].errorbar(s["n"], s["c_n"], yerr=np.vstack([s["c_n"] - s["c_lo"], s["c_hi"] - s["c_n"]]), fmt="-o",
                         ms=2.5, lw=1, **kw)
        cw = E.pair_split_constant(e)
        if cw < 1:
            axes[2].axhline(cw, color=col[e], ls="--", lw=0.8)
    axes[0].axhline(0.5, color="0.3", ls=":", lw=0.8)
    axes[1].axhline(0, color="0.3", ls=":", lw=0.8)
    axes[2].axhline(0.25, color="0.3", ls=":", lw=0.8)
    axes[2].set_yscale("log")
    for ax, t, yl in zip(axes, ["P(mixed) → ½", "corr(X, Y) = 4 P(holds) − 1 → 0", "split constant c_n"],
                         ["P(mixed)", "corr(X, Y)", "E[(K₊ − n/2)²] / n"]):
        log2_axis(ax, "matrix size n", grid=True)
        ax.set_ylabel(yl)
        ax.set_title(t, fontsize=10)
    axes[0].legend(fontsize=6.5)
    return fig


def mixed_text(grid: pd.DataFrame, ensembles: Sequence[str]) -> str:
    lab = labels(ensembles)
    g = grid.copy()
    g[["c_n", "c_lo", "c_hi"]] = law.split_constant(g)
    last = g[g["n"] == g.groupby("ensemble")["n"].transform("max")]
    gap = (g["corr"] - g["corr_predicted"]) * np.sqrt(g["trials"])
    return (
        f"At the largest size of each ensemble, $P(\\text{{mixed}})$ is between {last['rb_p_mixed'].min():.4f} and "
        f"{last['rb_p_mixed'].max():.4f} and the correlation $4P(\\text{{holds}})-1$ between "
        f"{last['corr_predicted'].min():.4f} and {last['corr_predicted'].max():.4f}; the measured phi coefficients "
        f"differ from $4P(\\text{{holds}})-1$ by at most {gap.abs().max():.2f}/√trials. The split constant behaves very "
        f"differently across ensembles: at the largest $n$ of each, $c_n$ = "
        + ", ".join(f"{r['c_n']:.3f} ({lab[r['ensemble']]}, $n={int(r['n'])}$)" for _, r in last.iterrows()) + "."
    )


# ------------------------------------------------------------------ fixed pairs against the attaining pair

def typical_table(typ: pd.DataFrame) -> pd.DataFrame:
    """The fixed-pair / attaining-pair table for display: one row per ensemble and n, each constant with
    its 95% half-width or interval as text (so the table fits the column)."""
    def pm(c, h):
        return "–" if np.isnan(c) else f"{c:.3g} ± {h:.2g}"

    return pd.DataFrame({
        "ensemble": typ["ensemble"].map(lambda e: E.parse_ensemble(e).label),
        "n": typ["n"],
        "c_W (first order)": typ["c_W"],
        "fixed pairs": [pm(c, h) for c, h in zip(typ["c_fixed"], typ["h_fixed"])],
        "attaining pair c_n": ["–" if np.isnan(c) else f"{c:.3g} ({lo:.3g}–{hi:.3g})"
                               for c, lo, hi in zip(typ["c_n"], typ["c_n_lo"], typ["c_n_hi"])],
        "gap c_n − fixed": [pm(g, h) for g, h in zip(typ["gap"], typ["h_gap"])],
    })


def typical_text(typ: pd.DataFrame, ensembles: Sequence[str]) -> str:
    """Fixed pairs against c_W, and the crux: the attaining pair's excess over fixed pairs at equal n."""
    lab = labels(ensembles)
    tame_e = law.finite_first_order(ensembles)
    wild = [e for e in ensembles if e not in tame_e]
    tame = typ[typ["ensemble"].isin(tame_e)]
    ok = int((np.abs(tame["c_fixed"] - tame["c_W"]) <= 0.1 * tame["c_W"]).sum())
    verdict = ("the first-order formula describes fixed pairs" if ok >= 0.8 * len(tame) else
               "the first-order formula describes fixed pairs only roughly at these sizes")
    out = [f"Where $c_W$ is of order one, simulated fixed pairs are within 10% of it in {ok} of {len(tame)} cases: "
           f"{verdict}."]
    cells = typ[typ["ensemble"].isin(tame_e) & typ["c_n"].notna() & (typ["n"] > typ["n"].min())]
    if len(cells):
        n_sig = int((np.abs(cells["gap"]) > cells["h_gap"]).sum())
        top = cells.loc[(cells["gap"] / cells["h_gap"]).abs().idxmax()]
        out.append(
            "The crux is the last column, the attaining pair against fixed pairs at equal $n$: for "
            f"$n\\ge{int(cells['n'].min())}$ the gap exceeds its 95% half-width in {n_sig} of {len(cells)} cells "
            f"(the largest relative to its uncertainty: {top['gap']:+.3f} ± {top['h_gap']:.3f}, "
            f"{lab[top['ensemble']]} at $n={int(top['n'])}$)"
            + ("; at these sample sizes the two constants cannot be told apart, which neither confirms the "
               "conjecture nor rules it out." if n_sig == 0 else
               ": there the attaining pair does not (yet) behave like a fixed pair."))
    if wild:
        out.append("For " + ", ".join(lab[e] for e in wild) + " the first-order value is "
                   + ", ".join(f"$c_W\\approx{E.pair_split_constant(e):.0f}$" for e in wild)
                   + ": the weights $e^{z/T}$ are so heavy-tailed that the row totals only concentrate once $n$ is far "
                   "above " + ", ".join(f"$e^{{1/T^2}}\\approx{law.temperature_scale(e):,.0f}$" for e in wild)
                   + ", and every size simulated here is pre-asymptotic for them.")
    return " ".join(out)


def rate_figure(grid: pd.DataFrame, ensembles: Sequence[str]):
    """(n − 1)(P(holds) − ¼) = ¼ − c_n per ensemble with c_W of order one, with ¼ − c_W dashed."""
    import matplotlib.pyplot as plt

    col, lab = ensemble_colors(ensembles), labels(ensembles)
    fig, ax = plt.subplots(figsize=(6.9, 4.0), layout="constrained")
    for e in law.finite_first_order(ensembles):
        s = grid[(grid["ensemble"] == e) & (grid["n"] >= 4)].sort_values("n")
        y = (s["n"] - 1) * (s["rb_p_holds"] - 0.25)
        ylo = (s["n"] - 1) * (s["rb_ci_low"] - 0.25)
        yhi = (s["n"] - 1) * (s["rb_ci_high"] - 0.25)
        ax.errorbar(s["n"], y, yerr=np.vstack([y - ylo, yhi - y]), fmt="-o", ms=2.5, lw=1, color=col[e], label=lab[e])
        ax.axhline(0.25 - E.pair_split_constant(e), color=col[e], ls="--", lw=0.8)
    ax.axhline(0, color="0.3", lw=0.8)
    log2_axis(ax, "matrix size n", grid=True)
    ax.set_ylabel("(n − 1)(P(holds) − ¼) = ¼ − c_n")
    ax.legend(fontsize=7, loc="lower left")
    return fig


def rate_table(grid: pd.DataFrame, ensembles: Sequence[str], min_n: int = 64) -> pd.DataFrame:
    g = grid.copy()
    g[["c_n", "c_lo", "c_hi"]] = law.split_constant(g)
    rows = []
    for e in ensembles:
        s = g[(g["ensemble"] == e) & (g["n"] >= min_n)].sort_values("n")
        if len(s):
            r = s.iloc[-1]
            rows.append({"ensemble": E.parse_ensemble(e).label, "largest n": int(r["n"]), "matrices": int(r["trials"]),
                         "¼ − c_n": 0.25 - r["c_n"], "95% low": 0.25 - r["c_hi"], "95% high": 0.25 - r["c_lo"],
                         "limit ¼ − c_W": 0.25 - E.pair_split_constant(e)})
    return pd.DataFrame(rows)


def rate_text(grid: pd.DataFrame, ensembles: Sequence[str]) -> str:
    rate = rate_table(grid, ensembles)
    cover = rate[(rate["95% low"] <= rate["limit ¼ − c_W"]) & (rate["limit ¼ − c_W"] <= rate["95% high"])]
    g = grid.copy()
    g[["c_n", "c_lo", "c_hi"]] = law.split_constant(g)
    gaps = []
    for e in law.finite_first_order(ensembles):
        s = g[(g["ensemble"] == e) & (g["n"] >= 8)].sort_values("n")
        if len(s) > 1:
            cw = E.pair_split_constant(e)
            gaps.append((e, abs(s["c_n"].iloc[0] - cw), abs(s["c_n"].iloc[-1] - cw)))
    shrunk = [e for e, g0, g1 in gaps if g1 < g0]
    lab = labels(ensembles)
    return (
        f"From $n=8$ to the largest simulated $n$ the distance $|c_n-c_W|$ shrinks for {len(shrunk)} of the "
        f"{len(gaps)} ensembles with $c_W$ of order one"
        + (f" (not for {', '.join(lab[e] for e, _, _ in gaps if e not in shrunk)})" if len(shrunk) < len(gaps) else "")
        + ". At the largest simulated $n$ the conjectured limit lies inside the 95% interval of $\\tfrac14-c_n$ for "
        f"{len(cover)} of {len(rate)} ensembles ({', '.join(cover['ensemble']) or 'none'}). These intervals are wide at "
        "the largest sizes, so covering the limit there is weak evidence; agreement at finite $n$ is not proof, and "
        "where the attaining pair's excess over fixed pairs persists, either $n$ is not yet large enough or the "
        "conjecture is wrong, and this chapter cannot tell which."
    )


#: the token counts the claims are judged on (content tokens), as the reference sentence names them: (who, the
#: sizes, whether they are a range of sizes (every size of the table between the two) or the sizes themselves);
#: the sentences' range is not fixed: it is what the language chapter measured (``sentence_tokens`` of
#: :func:`reference_sizes_text`), and without it the sentences are not named
REFERENCE_CONTENT = (("the tabular benchmarks ($n=8$ and $14$ features)", (8, 14), False),
                     ("Breast cancer ($n=30$)", (30,), False),
                     ("sentences", None, True),
                     ("ViT-B/16 and DeiT-B (196 patches)", (196,), False),
                     ("DINOv2 (256 patches)", (256,), False))
#: and with the special tokens kept
REFERENCE_SPECIAL = (("ViT-B/16 and DeiT-B", 197), ("DINOv2", 257), ("DINOv2 with registers", 261))


def reference_picks(sentence_tokens=None) -> list:
    """The token counts the reference sentence compares (:func:`reference_sizes_text`): those of
    :data:`REFERENCE_CONTENT` and :data:`REFERENCE_SPECIAL` and, given ``(fewest, most)`` content tokens of the
    measured sentences, those two; sorted."""
    ns = {n for _, counts, rng in REFERENCE_CONTENT if not rng for n in counts}
    ns |= {n for _, n in REFERENCE_SPECIAL}
    if sentence_tokens is not None:
        ns |= {int(sentence_tokens[0]), int(sentence_tokens[1])}
    return sorted(ns)


def chapter_image_sizes(profile: str, root=None) -> dict:
    """The image sizes the vision chapters measure at in ``profile``: ``{"vit": supervised_vit's image_size,
    "dinov2": dinov2's image_size, "dinov2_extra": its extra_image_size or None}``, each the profile's value
    (``params/<profile>/<notebook>.yml``, any profile) or else the notebook's default (its parameters cell)."""
    import ast

    from ..store.paths import project_root
    from .reproducing_tables import notebook_defaults, profile_params

    root = project_root() if root is None else root
    if root is None:
        raise FileNotFoundError("cannot find the project root (a folder with _config.yml and lib/dobrushin)")

    def values(nb, names):
        given, defaults = profile_params(root / "params", profile, nb), notebook_defaults(root / "notebooks" / f"{nb}.ipynb")
        out = [given[n] if n in given else ast.literal_eval(defaults[n][0]) for n in names]
        return [None if v is None else int(v) for v in out]

    (vit,) = values("supervised_vit", ("image_size",))
    dino, extra = values("dinov2", ("image_size", "extra_image_size"))
    return {"vit": vit, "dinov2": dino, "dinov2_extra": extra}


def model_tokens(image_sizes: "dict | None" = None) -> dict:
    """The token counts of the book's models, read from what builds them rather than typed: the patch grid of
    each vision model from its patch size (:data:`dobrushin.models.configs.EMBEDDED_CONFIGS`) and the image
    size it is given (``image_sizes``, as :func:`chapter_image_sizes` returns them; the preprocessing makes
    every image that size square; None: each processor's own crop), its special tokens (a class token, DeiT's
    distillation token, the register tokens), and one token per feature of each tabular benchmark (the
    feature lists of :mod:`dobrushin.data.tabular_data`; breast cancer's from scikit-learn's bundled copy).
    Keys: ``vit_patches``, ``vit_special`` (ViT-B/16 and DeiT-B), ``deit_distilled_special``,
    ``dinov2_patches``, ``dinov2_special``, ``dinov2_registers``, ``dinov2_extra_size`` and
    ``dinov2_extra_patches`` (None without an extra size), ``california``, ``adult``, ``breast_cancer``."""
    from ..data import tabular_data as T
    from ..models.configs import EMBEDDED_CONFIGS

    sizes = dict(image_sizes or {})

    def patches(model_id, size=None):
        e = EMBEDDED_CONFIGS[model_id]
        side = size or e["processor"]["crop_size"] or e["processor"]["size"]
        return (int(side) // int(e["config"]["patch_size"])) ** 2

    def special(model_id):  # the class token, DeiT's distillation token, the register tokens
        cfg = EMBEDDED_CONFIGS[model_id]["config"]
        return 1 + (cfg["model_type"] == "deit") + int(cfg.get("num_register_tokens", 0))

    vit, deit, dino = "google/vit-base-patch16-224", "facebook/deit-base-patch16-224", "facebook/dinov2-small"
    if patches(vit, sizes.get("vit")) != patches(deit, sizes.get("vit")) or special(vit) != special(deit):
        raise ValueError("ViT-B/16 and DeiT-B no longer share their token layout; name them apart")
    extra = sizes.get("dinov2_extra")
    bc, _ = T.load_breast_cancer_frame()
    return {"vit_patches": patches(vit, sizes.get("vit")), "vit_special": special(vit),
            "deit_distilled_special": special("facebook/deit-base-distilled-patch16-224"),
            "dinov2_patches": patches(dino, sizes.get("dinov2")), "dinov2_special": special(dino),
            "dinov2_registers": special("facebook/dinov2-with-registers-small") - special(dino),
            "dinov2_extra_size": extra, "dinov2_extra_patches": patches(dino, extra) if extra else None,
            "california": len(T.CALIFORNIA_FEATURES), "adult": len(T.ADULT_NUMERIC) + len(T.ADULT_CATEGORICAL),
            "breast_cancer": int(sum(c != "target" for c in bc.columns))}


def token_counts_text(t: dict) -> str:
    """The law chapter's sentence on the token counts of the measured models, from :func:`model_tokens`."""
    vp, dp = t["vit_patches"], t["dinov2_patches"]
    vit, dino = vp + t["vit_special"], dp + t["dinov2_special"]
    ep = t.get("dinov2_extra_patches")
    extra = (f", {ep + t['dinov2_special']} for the DINOv2-S measured again at {t['dinov2_extra_size']} px ({ep} "
             f"patches and a class token)") if ep else ""
    return (f"The measured models see different numbers of tokens: {vit} for the supervised ViT-B/16 and DeiT-B "
            f"({vp} patches and a class token; {vp + t['deit_distilled_special']} with the distillation token of the "
            f"distilled DeiT), {dino} for DINOv2 ({dp} patches and a class token), {dino + t['dinov2_registers']} "
            f"with its {t['dinov2_registers']} register tokens{extra}, from a few to a few dozen for the sentences "
            f"of the language models (it varies with the sentence), and one token per feature (plus the class "
            f"token) for the tabular FT-Transformer: {t['california']} features for California Housing, "
            f"{t['adult']} for Adult, {t['breast_cancer']} for breast cancer.")


def reference_sizes_text(p: pd.Series, sentence_tokens: "tuple | None" = None) -> str:
    """The reference sentence of the law chapter: the Dirichlet(1) baseline ``p`` (indexed by n) at the token
    counts of :data:`REFERENCE_CONTENT` and :data:`REFERENCE_SPECIAL`, each named only when ``p`` has a value
    at every one of its sizes (a range: at some size inside it); a custom ``reference_ns`` may leave some out.
    ``sentence_tokens``: the fewest and most content tokens of the language chapter's sentences as measured
    (:func:`dobrushin.report.results_loading.token_range`); None (no language results yet): the sentences are
    not named.  "" when it has none of them."""
    def values(ns, is_range):
        if ns is None:
            return None
        if is_range:
            v = p[(p.index >= ns[0]) & (p.index <= ns[-1])]
        else:
            if not all(n in p.index for n in ns):
                return None
            v = p.loc[list(ns)]
        if not len(v):
            return None
        lo, hi = float(v.min()), float(v.max())
        return pct(lo, 2) if len(v) == 1 or pct(lo, 1) == pct(hi, 1) else f"{pct(lo, 1)}–{pct(hi, 1)}"

    def entry(who, ns):
        if who == "sentences":
            if sentence_tokens is None:
                return who, None
            lo, hi = (int(x) for x in sentence_tokens)
            return f"the sentences ($n={lo}$–${hi}$ content tokens, as the language chapter measured them)", (lo, hi)
        return who, ns

    def below(ns, rng) -> str:
        """What a range reaching below the smallest tabulated n misses: the exact ½ and ⅓ of n = 2 and 3."""
        if not rng or ns is None or not len(p) or int(ns[0]) >= int(p.index.min()):
            return ""
        lo, first = int(ns[0]), int(p.index.min())
        exact = [t for n, t in ((2, "exactly ½ at $n=2$"), (3, "⅓ at $n=3$")) if lo <= n < first]
        return (f" for $n\\ge {first}$ (the table starts there; shorter sentences have a higher baseline"
                + (f": {' and '.join(exact)}, for every normalised-weight ensemble" if exact else "") + ")")

    content = [f"{who} with {v}{below(ns, rng)}" for who, ns, rng in (entry(w, ns) + (r,) for w, ns, r in REFERENCE_CONTENT)
               if (v := values(ns, rng)) is not None]
    special = [f"{who} ({n} tokens) with {v}" for who, n in REFERENCE_SPECIAL if (v := values((n,), False)) is not None]
    if not content and not special:
        return ""
    parts = []
    if content:
        parts.append("at the content-token counts the claims are judged on, compare " + "; ".join(content))
    if special:
        parts.append(("with" if content else "compare, with") + " their special tokens kept, " + "; ".join(special))
    return "For uniform rows, " + "; ".join(parts) + ". "


__all__ = ["ENSEMBLE_PALETTE", "REFERENCE_CONTENT", "REFERENCE_SPECIAL", "approach_table", "approach_text",
           "bound_text", "bounds_table", "chapter_image_sizes", "curve_figure", "curve_text", "ensemble_colors",
           "labels", "mixed_figure", "mixed_text", "model_tokens", "pct", "reference_picks", "rate_figure", "rate_table", "rate_text",
           "reference_sizes_text", "small_n_text", "token_counts_text", "typical_table", "typical_text"]
