"""``SummaryInsights``, mixed into ``SummaryChapter``: the claims' forest plot, the "Why" figure and download links."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pandas as pd

from . import page as F
from .claims import CLAIMS, SCORECARD
from .insight import show_downloads
from .names import and_join, display_name, pct
from .display import Section

NOTEBOOK = "summary"

def _interval(r) -> tuple:
    """The 95% interval a row's verdict uses: clustered by input where present, else Wilson's (random matrices)."""
    lo, hi = getattr(r, "cl_low", np.nan), getattr(r, "cl_high", np.nan)
    if lo == lo and hi == hi:  # not NaN
        return float(lo), float(hi)
    return float(r.ci_low), float(r.ci_high)


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
            dots = [(f"n = {str(e.model).split('=')[-1].strip()}", e.measured, *_interval(e)) for e in ev.itertuples()]
        elif row.kind in ("fraction", "pooled"):
            # a pooled range: each of its models' best evidence, as the verdict pools them
            ev = (pd.concat([evidence(table, ch)[2] for ch in SCORECARD if ch.parent == row.key])
                  if row.kind == "pooled" else evidence(table, row)[2])
            if len(ev) > 1:
                # an FT-Transformer benchmark's seeds by their seed ("seed 0"), a pooled range's models by name
                dots = [("seed " + str(e.model).rsplit(" seed ", 1)[1] if " seed " in str(e.model) else display_name(str(e.model)),
                         e.measured, *_interval(e)) for e in ev.itertuples()]
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
    """The forest plot of the claims, coloured by verdict; returns ``(figure, claim_rows(...))``."""
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
    return fig, rows


class SummaryInsights:
    """Mixin for ``SummaryChapter`` (uses ``table``, ``results``, ``profile``)."""

    def claims_figure(self):
        """The claims' forest plot; the introduction shows ``results/figures/summary-claims.png``."""
        out = Section()
        fig, rows = claims_figure(self.card, self.table)
        n_dots = int(rows["dots"].map(len).sum())
        out.append(F.figure(fig, notebook=NOTEBOOK, name="claims", width="full", results_dir=self.results,
                 caption=f"The paper's {len(rows)} claims against this build: the paper's range (grey), the measured "
                         "fraction of (input, layer) pairs where the condition holds with the 95% interval the verdict "
                         "uses (clustered by input), coloured by the verdict, and small circles for the parts a claim "
                         f"pools ({n_dots} in all: each size of the random baseline, each seed of an FT-Transformer "
                         "benchmark, each model of a pooled range). Untrained controls are shown in their chapters.",
                 alt="Forest plot, one line per claim of the paper: grey bands for the paper's ranges, coloured "
                     "intervals for this build's measurements, verdicts written at the right."))
        return out

    def why(self):
        """The "Why" figure with the random baseline and the MPNet ablation arrow; glues ``why_*``."""
        from .summary_figures import plot_why, why_points

        out = Section()
        pts = why_points(self.family_table) if len(self.family_table) else why_points(pd.DataFrame(columns=["variant"]))
        abl = _ablation(self.results)
        arrow = None
        if abl is not None:
            (k0, n0, t0), (k1, n1, t1) = abl["original"], abl["ablated"]
            arrow = ((t0, k0 / n0), (t1, k1 / n1), f"MPNet, distance-0 bias ablated ({abl['sentences']} sentences)")
        band = None
        if self.baseline is not None and len(self.baseline):
            band = (float(self.baseline["p"].min()), float(self.baseline["p"].max()))
        trained = pts[pts["weights"] == "pretrained"]
        rho = trained[["trace", "fraction"]].corr("spearman").iloc[0, 1] if len(trained) > 2 else float("nan")
        glued = {"why_trained": len(trained),
                 "why_rho": f"{rho:+.2f}".replace("-", "−") if np.isfinite(rho) else "—",
                 "why_random": (f"{pct(band[0])}–{pct(band[1])}" if band else "—"),
                 "why_below": and_join(list(dict.fromkeys(trained.loc[trained["trace"] < 1, "label"]))) or "none"}
        for name, part in (("before", "original"), ("after", "ablated")):
            k, n, t = abl[part] if abl is not None else ("—", "—", float("nan"))
            glued.update({f"why_mpnet_{name}_k": k, "why_mpnet_n": n,
                          f"why_mpnet_{name}_trace": f"{t:.3g}" if np.isfinite(t) else "—"})
        glued["why_mpnet_bias"] = f"{abl['bias0']:.1f}".replace("-", "−") if abl is not None else "—"
        out.values.update(glued)
        if not len(pts):
            return out.md("No measured table records the trace of its attention (made before it was recorded): no "
                          "figure.")
        fig = plot_why(pts, arrow, band)
        out.append(F.figure(fig, notebook=NOTEBOOK, name="why", width="full", results_dir=self.results,
                 caption="Self-attention and the condition: for every model measured in this build (filled: trained weights; "
                         "open: untrained controls), the fraction of (input, layer) pairs where it holds on content "
                         "tokens against the model's self-attention, the mean trace of its head-averaged attention "
                         "(n times the mean diagonal entry; 1 for uniform rows). Grey bar: the random baseline's range "
                         "over its sizes, at tr A = 1, the exact expectation for Dirichlet(1) rows. Arrow: MPNet on "
                         "the ablation's sentences, before and after its distance-0 position bias is set to its "
                         "neighbours' mean.",
                 alt="Scatter plot of fraction holding against self-attention on a log axis, trained models filled, "
                     "untrained controls open, an arrow for the MPNet ablation."))
        return out

    def downloads(self):
        """Links to summary.csv and scorecard.csv."""
        return show_downloads("summary", self.results)


def _ablation(results) -> "dict | None":
    """The MPNet ablation, trained, content tokens: ``{"original": (k, n, mean trace), "ablated": ..., "sentences",
    "bias0"}``; None when it was not run."""
    p = results / "language" / "mpnet-ablation.analysis.json"
    if not p.is_file():
        return None
    v = json.loads(p.read_text())["value"]["pretrained"]
    lay = pd.DataFrame(v["layers"])
    c = lay[lay["variant"] == "content"]
    out = {cond: (int(g["k"].sum()), int(g["n"].sum()), float(g["trace"].mean())) for cond, g in c.groupby("condition")}
    return {**out, "sentences": len(v["cosine"]), "bias0": float(np.mean(v["info"]["before"]))}
