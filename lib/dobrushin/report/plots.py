"""Shared figures of the measurement notebooks, from the tidy result tables only: one panel per model, layers
1-based, ``content`` solid and ``with_special`` dashed; each returns the ``Figure``."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
from matplotlib.ticker import MaxNLocator, NullFormatter

from ..math.stats import wilson
from ..store.paths import results_dir as default_results
from ..store.results import atomic_write, slugify
from .names import VARIANT_LABELS, WEIGHTS_LABELS, display_name
from .style import COLORS, LINESTYLES, color_for

WEIGHT_STYLE = {w: {"color": color_for(w), "label": label} for w, label in WEIGHTS_LABELS.items()}
VARIANT_STYLE = {v: {"linestyle": LINESTYLES[v], "label": label} for v, label in VARIANT_LABELS.items()}


def zero_series(table: pd.DataFrame, value: str = "slack") -> list:
    """The weights whose ``value`` is 0 in every row of ``table`` (the slack figures label them "all zero")."""
    require_columns(table, ["weights", value], "the table")
    return [w for w in WEIGHT_STYLE if (table["weights"] == w).any()
            and bool((table.loc[table["weights"] == w, value] == 0).all())]


def panel_grid(n_panels: int, ncols: int, panel=(4.0, 3.0), sharey=True, sharex=False):
    """``(fig, axes)``: ``n_panels`` panels of ``panel`` inches in rows of ``ncols``, unused cells hidden."""
    import matplotlib.pyplot as plt

    if n_panels < 1:
        raise ValueError("nothing to plot: the table is empty")
    ncols = max(1, min(ncols, n_panels))
    nrows = math.ceil(n_panels / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(panel[0] * ncols, panel[1] * nrows), squeeze=False,
                             sharey=sharey, sharex=sharex, layout="constrained")
    flat = axes.ravel()
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


def _models(df: pd.DataFrame, models: Optional[Sequence[str]]):
    present = list(dict.fromkeys(df["model"].astype(str)))
    if models is None:
        return present
    missing = [m for m in models if m not in present]
    if missing:
        raise ValueError(f"models {missing} are not in the table (it has {present})")
    return list(models)


def require_columns(df: pd.DataFrame, cols: Sequence[str], what: str, *, nonempty: bool = False):
    """ValueError naming ``what`` when ``df`` lacks any of ``cols`` (or, with ``nonempty``, has no rows)."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise ValueError(f"{what} lacks columns {missing}")
    if nonempty and df.empty:
        raise ValueError(f"{what} is empty")


def log2_axis(ax, label: Optional[str] = None, grid: bool = False):
    """A base-2 logarithmic x axis with plain numbers as tick labels (matrix sizes n)."""
    import matplotlib.ticker as mt

    ax.set_xscale("log", base=2)
    ax.get_xaxis().set_major_formatter(mt.ScalarFormatter())
    if label is not None:
        ax.set_xlabel(label)
    if grid:
        ax.grid(alpha=0.3)


def layer_fractions(table: pd.DataFrame) -> pd.DataFrame:
    """Per model x weights x variant x layer: k, n, fraction holding and Wilson 95% bounds."""
    require_columns(table, ["model", "weights", "variant", "layer", "holds"], "the table")
    rows = []
    for key, g in table.groupby(["model", "weights", "variant", "layer"], sort=True, observed=True):
        k, n = int(g["holds"].sum()), len(g)
        rows.append((*key, k, n, *wilson(k, n)))
    return pd.DataFrame(rows, columns=["model", "weights", "variant", "layer", "k", "n", "fraction",
                                       "ci_low", "ci_high"])


def fraction_by_layer(table: pd.DataFrame, *, models: Optional[Sequence[str]] = None, ncols: int = 3,
                      baseline: Optional[dict] = None):
    """Fraction holding per layer, Wilson 95% bands; ``baseline``: model id → Dirichlet(1) probability (dotted)."""
    models = _models(table, models)  # panels in the order the models appear in the table
    fr = layer_fractions(table)
    fig, axes = panel_grid(len(models), ncols)
    for ax, m in zip(axes, models):
        sub = fr[fr["model"] == m]
        for (w, v), g in sub.groupby(["weights", "variant"], sort=True, observed=True):
            x = g["layer"].to_numpy() + 1
            ws, vs = WEIGHT_STYLE[w], VARIANT_STYLE[v]  # conform admits no other weights or variants
            ax.plot(x, g["fraction"], color=ws["color"], linestyle=vs["linestyle"], marker="o", ms=3,
                    label=f"{ws['label']}, {vs['label']}")
            ax.fill_between(x, g["ci_low"], g["ci_high"], color=ws["color"], alpha=0.15 if v == "content" else 0.07,
                            linewidth=0)
        p = (baseline or {}).get(m)
        if p is not None and np.isfinite(p):
            ax.axhline(p, color=COLORS["random"], linestyle=LINESTYLES["random"], lw=1.2,
                       label="random baseline at the token count")
        n_in = int(sub["n"].max()) if len(sub) else 0
        ax.set_title(f"{display_name(m)}\n≤{n_in} inputs per layer", fontsize=9)
        ax.set_xlabel("layer")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_ylim(-0.03, 1.03)
        ax.grid(alpha=0.3)
    return _finish_grid(fig, axes, ncols, "fraction where\nequality holds")


def _finish_grid(fig, axes, ncols: int, ylabel: str):
    """Label the first panel of each row and add the shared legend."""
    for ax in axes[::max(1, min(ncols, len(axes)))]:
        ax.set_ylabel(ylabel)
    legend_below(fig, axes)
    return fig


def legend_below(fig, axes, ncols=None, fontsize=9):
    """One legend under the panels: each label once, first handle kept; ``ncols`` defaults to 3 (2 for one panel)."""
    handles = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", frameon=False, fontsize=fontsize,
                   ncols=ncols or min(3 if len(axes) > 1 else 2, len(handles)))


#: below this the slack axis is linear (symlog): the slack is 0 in the equality case and spans many decades
SLACK_LINTHRESH = 1e-9
#: the slack axis label, on two lines so that it fits beside a short panel
SLACK_LABEL = "slack ½(1+κ(A))\n− κ(½(I+A))"


def slack_by_layer(table: pd.DataFrame, *, variant: str = "content", models: Optional[Sequence[str]] = None,
                   ncols: int = 3):
    """Box plots over inputs of the slack ½(1+κ(A)) − κ(½(I+A)) per layer, trained and untrained, on a symlog axis
    (linear below ``SLACK_LINTHRESH``).  Slack 0 is the equality case."""
    require_columns(table, ["model", "weights", "variant", "layer", "slack"], "the table")
    df = table[table["variant"] == variant]
    models = _models(df, models)
    fig, axes = panel_grid(len(models), ncols)
    top = float(np.nanmax(df.loc[df["model"].isin(models), "slack"].to_numpy(float)))  # panel_grid: not empty
    for ax, m in zip(axes, models):
        sub = df[df["model"] == m]
        ws = [w for w in WEIGHT_STYLE if (sub["weights"] == w).any()]
        layers = np.sort(sub["layer"].unique())
        width = 0.8 / max(1, len(ws))
        for i, w in enumerate(ws):
            g = sub[sub["weights"] == w]
            data = [g.loc[g["layer"] == layer, "slack"].to_numpy() for layer in layers]
            pos = layers + 1 + (i - (len(ws) - 1) / 2) * width
            bp = ax.boxplot(data, positions=pos, widths=width * 0.9, patch_artist=True, showfliers=True,
                            flierprops={"markersize": 2, "alpha": 0.5, "markeredgecolor": WEIGHT_STYLE[w]["color"]},
                            medianprops={"color": "k", "linewidth": 1}, manage_ticks=False)
            for box in bp["boxes"]:
                box.set_facecolor(WEIGHT_STYLE[w]["color"])
                box.set_alpha(0.6)
            ax.plot([], [], color=WEIGHT_STYLE[w]["color"], lw=6, alpha=0.6, label=WEIGHT_STYLE[w]["label"])
        step = max(1, len(layers) // 12)
        ax.set_xticks(layers[::step] + 1)
        ax.set_yscale("symlog", linthresh=SLACK_LINTHRESH, linscale=0.5)
        ax.axhline(0, color="k", lw=0.6)
        # shared y axis: the limit covers every panel's largest slack (a per-panel limit clipped the others)
        ax.set_ylim(-SLACK_LINTHRESH / 2, max(top, SLACK_LINTHRESH * 10) * 3)  # the slack is never negative
        # a box of zeros is a flat line on the axis: the title says what it means
        ax.set_title(display_name(m) + "".join(f"\n{WEIGHT_STYLE[w]['label']}: all zero (on the axis)"
                                               for w in zero_series(sub)), fontsize=10)
        ax.set_xlabel("layer")
        ax.grid(alpha=0.3, axis="y")
    return _finish_grid(fig, axes, ncols, SLACK_LABEL)


def rollout_scatter(roll: pd.DataFrame, *, variant: str = "content", models: Optional[Sequence[str]] = None,
                    ncols: int = 3):
    """Per input, log-log: κ(R) against the bound ∏½(1+κ(Ã_l)), with y = x (points must lie on or below it)."""
    require_columns(roll, ["model", "weights", "variant", "kappa_rollout", "bound"], "the rollout table")
    df = roll[roll["variant"] == variant]
    models = _models(df, models)
    fig, axes = panel_grid(len(models), ncols, sharey=False)
    for ax, m in zip(axes, models):
        sub = df[df["model"] == m]
        for w, g in sub.groupby("weights", sort=True, observed=True):
            st = WEIGHT_STYLE[w]
            ax.scatter(g["bound"], g["kappa_rollout"].clip(lower=1e-300), s=10, alpha=0.7,
                       color=st["color"], label=st["label"])
        vals = np.concatenate([sub["bound"].to_numpy(float), sub["kappa_rollout"].to_numpy(float)])
        vals = vals[vals > 0]
        lo, hi = (vals.min() / 1.5, vals.max() * 1.5) if vals.size else (1e-3, 1.0)
        span = 1.5  # at least 1.5 decades, so the log axes carry labelled powers of ten
        if np.log10(hi / lo) < span:
            mid = np.sqrt(lo * hi)
            lo, hi = mid / 10 ** (span / 2), mid * 10 ** (span / 2)
        ax.plot([lo, hi], [lo, hi], color="k", lw=0.8, ls=":", label="κ(R) = bound")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # powers of ten only (the span is >= 1.5 decades)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_title(display_name(m), fontsize=10)
        ax.set_xlabel("bound ∏ ½(1+κ(Ã_l))")
        ax.set_ylabel("κ(rollout)")
        ax.grid(alpha=0.3, which="both")
    legend_below(fig, axes)
    return fig


def save_figure(fig, notebook: str, what: str, results_dir=None) -> list:
    """Write ``fig`` atomically to ``<results_dir>/figures/<notebook>-<what>.{png,svg}``; returns the two paths."""
    root = Path(results_dir) if results_dir is not None else default_results()
    out = []
    for ext in ("png", "svg"):
        p = root / "figures" / f"{slugify(notebook)}-{slugify(what)}.{ext}"
        atomic_write(p, lambda tmp, ext=ext: fig.savefig(tmp, format=ext, dpi=150 if ext == "png" else None,
                                                    metadata={"Date": None} if ext == "svg" else None))
        out.append(p)
    return out
