"""κ(A) per layer (``kappa_by_layer``), and the failure atlas's panels (``atlas_figure``): the
κ-attaining pair on the photo, sentence or row, with its two self-dominance margins."""
from __future__ import annotations

import textwrap
from typing import Dict, Sequence

import numpy as np
import pandas as pd

from .names import WEIGHTS_SHORT, display_name
from .plots import WEIGHT_STYLE, legend_below, panel_grid
from .style import COLORS

#: colours of the two tokens of an attaining pair in the atlas (Okabe–Ito vermillion and bluish green)
PAIR_COLORS = ("#D55E00", "#009E73")
SPECIAL_NAMES = {"cls": "the CLS token", "register": "a register token", "distillation": "the distillation token",
                 "sep": "a separator token"}


def kappa_by_layer(table: pd.DataFrame, *, models: Sequence[str], random_kappa: Dict[str, np.ndarray], ncols: int = 3):
    """One panel per model: median κ(A) per layer (IQR band) of the content tokens, trained and untrained, against
    Dirichlet(1) matrices of the model's median n."""
    t = table[(table["variant"] == "content") & table["model"].isin(models)]
    fig, axes = panel_grid(len(models), ncols, panel=(3.6, 2.7))
    for ax, m in zip(axes, models):
        for w, gw in t[t["model"] == m].groupby("weights", sort=False):
            q = gw.groupby("layer")["kappa"].quantile([0.25, 0.5, 0.75]).unstack()
            x = q.index.to_numpy() + 1
            st = WEIGHT_STYLE[w]
            ax.plot(x, q[0.5], color=st["color"], marker="o", ms=3, label=st["label"])
            ax.fill_between(x, q[0.25], q[0.75], color=st["color"], alpha=0.2, lw=0)
        rk = random_kappa.get(m)
        if rk is not None and len(rk):
            lo, mid, hi = np.quantile(rk, [0.25, 0.5, 0.75])
            ax.axhline(mid, color=COLORS["random"], ls=":", lw=1.5, label="random, same n")
            ax.axhspan(lo, hi, color=COLORS["random"], alpha=0.12, lw=0)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("layer")
        ax.set_title(textwrap.fill(display_name(m), 34), fontsize=9)
    axes[0].set_ylabel("κ(A), median and IQR")
    legend_below(fig, axes, ncols=3, fontsize=None)  # one row: trained, untrained, random at most
    return fig


# ------------------------------------------------------------------------------------------- atlas

def case_title(c) -> str:
    v = "content" if c.variant == "content" else "with special"
    w = WEIGHTS_SHORT[c.weights]
    state = "holds" if c.holds else "fails"
    rule = {"largest": "failing, largest slack", "random": "failing, random draw", "holding": "holding, random draw"}[c.rule]
    return (f"{w}, {v}: {rule}\nlayer {c.layer + 1}: {state}, slack {c.slack:.2g}\n"
            f"margins: i {margin(c.margin_i)}, j {margin(c.margin_j)}")


def margin(x: float) -> str:
    """A self-dominance margin with its sign, three decimals, or two significant digits when smaller than 0.001."""
    return f"{x:+.3f}" if x == 0 or abs(x) >= 1e-3 else f"{x:+.1e}"


def _draw_image(ax, c):
    from matplotlib.patches import Rectangle

    img = c.image
    ax.imshow(img)
    n_content = sum(r == "content" for r in c.roles)
    g = int(round(np.sqrt(n_content)))
    first = c.roles.index("content")
    H, W = img.shape[:2]
    ph, pw = H / g, W / g
    notes = []
    for who, t, role, col in (("i", c.ti, c.role_i, PAIR_COLORS[0]), ("j", c.tj, c.role_j, PAIR_COLORS[1])):
        if role == "content" and g * g == n_content:
            p = t - first
            r_, q_ = divmod(p, g)
            ax.add_patch(Rectangle((q_ * pw, r_ * ph), pw, ph, fill=False, ec=col, lw=2.5))
            ax.add_patch(Rectangle((q_ * pw - 1.5, r_ * ph - 1.5), pw + 3, ph + 3, fill=False, ec="white", lw=0.8))
        else:
            notes.append(f"{who} = {SPECIAL_NAMES.get(role, role)}")
    if notes:
        ax.text(0.02, 0.02, "; ".join(notes), transform=ax.transAxes, fontsize=8, color="black",
                bbox=dict(fc="white", ec="none", alpha=0.85, pad=1.5), va="bottom")
    ax.set(xticks=[], yticks=[])


def _clean(tok: str) -> str:
    return tok.replace("Ġ", "").replace("▁", "").replace("##", "·") or "␣"


def _draw_text(ax, c, width: int = 40, max_lines: int = 7):
    """The sentence as its tokens, wrapped; the two tokens of the pair on coloured backgrounds."""
    toks = [(k, _clean(t)) for k, (t, r) in enumerate(zip(c.tokens, c.roles)) if r != "pad"]
    lines, cur, n = [], [], 0
    for k, t in toks:
        if n + len(t) + 1 > width and cur:
            lines.append(cur)
            cur, n = [], 0
        cur.append((k, t))
        n += len(t) + 1
    if cur:
        lines.append(cur)
    # keep the lines holding the pair, and context around them, when the sentence is long
    want = [li for li, line in enumerate(lines) if any(k in (c.ti, c.tj) for k, _ in line)]
    if len(lines) > max_lines:
        keep = sorted(set(li2 for li in want for li2 in range(li - 1, li + 2) if 0 <= li2 < len(lines)))[:max_lines]
    else:
        keep = list(range(len(lines)))
    ax.set_xlim(0, width)
    ax.set_ylim(-max_lines - 0.5, 0.5)
    ax.axis("off")
    y = 0
    prev = None
    for li in keep:
        if prev is not None and li != prev + 1:
            ax.text(0, y, "…", fontsize=8, family="monospace", va="center")
            y -= 1
        x = 0
        for k, t in lines[li]:
            style = {}
            if k in (c.ti, c.tj):  # i vermillion, j green
                colour = PAIR_COLORS[0] if k == c.ti else PAIR_COLORS[1]
                style = dict(bbox=dict(fc=colour, ec="none", pad=1.2), color="white", weight="bold")
            elif c.roles[k] != "content":
                style = dict(color="#555555", style="italic")
            ax.text(x, y, t, fontsize=8, family="monospace", va="center", **style)
            x += len(t) + 1
        y -= 1
        prev = li
    notes = [f"{who} = {SPECIAL_NAMES.get(r, r)}" for who, r in (("i", c.role_i), ("j", c.role_j)) if r != "content"]
    if notes:
        ax.text(0, -max_lines, "; ".join(notes), fontsize=8, va="center")


def atlas_figure(cases: Sequence):
    """One panel per case (three to a row), the pair drawn on the photo, sentence or row; titles give the margins
    A_ii − A_ji (i) and A_jj − A_ij (j)."""
    if not cases:
        raise ValueError("no case to draw")
    image = cases[0].image is not None
    fig, axes = panel_grid(len(cases), 3, panel=(3.1, 3.9 if image else 2.4), sharey=False)
    for ax, c in zip(axes, cases):
        (_draw_image if image else _draw_text)(ax, c)
        ax.set_title(case_title(c), fontsize=8.5, loc="left")
    return fig
