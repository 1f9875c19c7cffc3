"""Sections of the summary chapter that help a reader take the book apart (:class:`SummaryInsights`, a base of
:class:`dobrushin.report.summary_chapter.SummaryChapter`): where each scorecard row is computed and the command that
recomputes it, the all-models figure with the paper's values as bands (glued into the introduction), the MPNet
line of the introduction (from the language chapter's ablation file) and the download links."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pandas as pd

from . import page as F
from .claims import CLAIMS, SCORECARD
from .insight import download_links
from .names import display_name, pct

NOTEBOOK = "summary"

#: scorecard row key -> (chapters that compute it, the label of the section in each: see the notebooks)
ROW_SOURCES = {
    "baseline": (("baseline",), ("sec-baseline-uniform",)),
    "theorem": (("baseline",), ("sec-baseline-uniform",)),  # the exact check on every sampled matrix
    **{k: (("dinov2",), ("sec-dinov2-fractions",)) for k in ("dinov2_s", "dinov2_b", "dinov2_l", "special_dinov2_s",
                                                             "special_dinov2_b", "special_dinov2_l")},
    **{k: (("language",), ("sec-language-fractions",)) for k in ("special_roberta", "special_distilbert")},
    "roberta": (("language",), ("sec-language-fractions",)),
    "distilbert": (("language",), ("sec-language-fractions",)),
    "deit": (("supervised_vit",), ("sec-supervised-vit-controls",)),
    "vit": (("supervised_vit",), ("sec-supervised-vit-controls",)),
    "late": (("supervised_vit",), ("sec-supervised-vit-controls",)),
    "tabular_adult": (("tabular",), ("sec-tabular-results",)),
    "tabular_california": (("tabular",), ("sec-tabular-results",)),
    "special": (("dinov2", "language"), ("sec-dinov2-fractions", "sec-language-fractions")),
    "related_text": (("language",), ("sec-language-fractions",)),
}


def _md(text: str):
    from IPython.display import Markdown, display

    display(Markdown(text))


def _glue(key: str, value):
    from myst_nb import glue

    glue(key, value, display=False)


def row_sources(profile: str = "quick") -> pd.DataFrame:
    """Per scorecard row: the chapters (as MyST links to the section) and the command that recomputes it."""
    rows = []
    for r in SCORECARD:
        nbs, labels = ROW_SOURCES.get(r.key, ((), ()))
        links = ", ".join(f"{{ref}}`{nb.replace('_', ' ')} <{lab}>`" for nb, lab in zip(nbs, labels))
        cmd = f"make notebooks PROFILE={profile} NOTEBOOKS=\"{' '.join(nbs)} summary\"" if nbs else ""
        rows.append({"key": r.key, "row": r.short, "computed in": links, "command": cmd})
    return pd.DataFrame(rows)


def _variant_base(v: str) -> str:
    v = str(v)
    if v.startswith("untrained control ("):
        v = v[len("untrained control ("):-1]
    return v


def _interval(r) -> tuple:
    """The 95% interval a summary row's verdict uses: clustered by input (``cl_low``, ``cl_high``) where it has
    one, else the Wilson interval (independent matrices, whose clustered interval is Wilson's)."""
    lo, hi = getattr(r, "cl_low", np.nan), getattr(r, "cl_high", np.nan)
    if lo == lo and hi == hi:  # not NaN
        return float(lo), float(hi)
    return r.ci_low, r.ci_high


def models_rows(table: pd.DataFrame) -> pd.DataFrame:
    """One line per (model, variant) of ``summary.csv`` for :func:`models_figure`: the trained (or random-matrix)
    row — measured, or "not run" — and the untrained control's row of the same model and variant side by side,
    with the paper's range (``low``, ``high``) of the claim the trained row is evidence for.  The "late in depth"
    claim is not a fraction and is left out."""
    by_text = {c.text: c for c in CLAIMS.values()}
    t = table[(table["claim"] != CLAIMS["late"].text) & ~table["model"].astype(str).str.contains("@")]
    out = {}
    for r in t.itertuples():
        key = (r.model, _variant_base(r.variant))
        d = out.setdefault(key, {"model": r.model, "variant": key[1], "trained": np.nan, "t_lo": np.nan,
                                 "t_hi": np.nan, "status": "", "untrained": np.nan, "u_lo": np.nan, "u_hi": np.nan,
                                 "low": np.nan, "high": np.nan, "random": False})
        lo, hi = _interval(r)
        if r.weights_source == "untrained":
            d.update(untrained=r.measured, u_lo=lo, u_hi=hi)
        else:
            d.update(trained=r.measured, t_lo=lo, t_hi=hi, status=str(r.status),
                     random=r.weights_source == "random matrices")
            c = by_text.get(r.claim)
            if c is not None:
                d.update(low=c.low, high=c.high)
    # a variant with only its untrained control (summary.csv has no trained row for it: the model's trained
    # weights were unavailable, and its "not run" row names one variant only) is not run either
    not_run = {d["model"]: d["status"] for d in out.values() if d["status"].startswith("not run")}
    for d in out.values():
        if not d["status"] and np.isnan(d["trained"]) and not d["random"] and d["model"] in not_run:
            d["status"] = not_run[d["model"]]
    return pd.DataFrame(list(out.values()))


def models_figure(table: pd.DataFrame):
    """Every model and variant of ``summary.csv`` on one axis of fraction holding: trained weights (blue) or random
    matrices (grey) with the 95% interval the verdicts use (clustered by input; Wilson for random matrices), "not
    run" where the weights were unavailable, the untrained control of the same model (orange) just below, and the
    paper's range as a grey band where a measured line is compared with it (not on "not run" lines: an untrained
    control is never compared with the paper).  Returns ``(figure, rows)`` (:func:`models_rows`)."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    rows = models_rows(table)
    fig, ax = plt.subplots(figsize=(9.4, 0.28 * len(rows) + 1.2), layout="constrained")
    labels = []
    for y, r in enumerate(rows.itertuples()):
        if not np.isnan(r.low) and not np.isnan(r.trained):
            ax.fill_betweenx([y - 0.45, y + 0.45], r.low, max(r.high, r.low + 0.004), color="#BBBBBB", lw=0)
        col = F.COLORS["random" if r.random else "trained"]
        if not np.isnan(r.trained):
            ax.plot([r.t_lo, r.t_hi], [y - 0.14] * 2, color=col, lw=1.6)
            ax.plot([r.trained], [y - 0.14], marker="o", color=col, ms=4.5)
        elif r.status.startswith("not run"):
            ax.text(0.005, y - 0.05, "not run", fontsize=7.5, color="#333333", style="italic", va="center")
        if not np.isnan(r.untrained):
            ax.plot([r.u_lo, r.u_hi], [y + 0.18] * 2, color=F.COLORS["untrained"], lw=1.2)
            ax.plot([r.untrained], [y + 0.18], marker="s", color=F.COLORS["untrained"], ms=3.5)
        name = "random" + str(r.model).split("rows")[-1] if r.random else display_name(str(r.model))
        if str(r.model).startswith("FT-Transformer/") and not name.startswith("FT-Transformer"):
            name = "FT-Transformer, " + name
        labels.append(textwrap.shorten(f"{name} · {r.variant}", 64, placeholder="…"))
    ax.set_yticks(range(len(rows)), labels, fontsize=8.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlim(-0.015, 1.025)  # a dot at 0 or 1 drawn whole
    ax.set_xlabel("fraction of (input, layer) pairs where the condition holds\n(95% interval, clustered by input)")
    ax.grid(axis="x", alpha=0.3)
    fig.legend(handles=[Line2D([], [], color=F.COLORS["trained"], marker="o", label="trained"),
                        Line2D([], [], color=F.COLORS["untrained"], marker="s", label="untrained control"),
                        Line2D([], [], color=F.COLORS["random"], marker="o", label="random matrices"),
                        Patch(color="#BBBBBB", label="paper's range")],
               loc="outside upper center", ncols=4, frameon=False, fontsize=8)
    return fig, rows


class SummaryInsights:
    """Mixin for :class:`dobrushin.report.summary_chapter.SummaryChapter` (uses ``table``, ``results``, ``profile``)."""

    def sources(self):
        """Where each scorecard row is computed (a link to the chapter section) and the command that recomputes it."""
        rs = row_sources(self.profile)
        lines = [f"- **{r.row}**: {r['computed in']}; recompute with `{r.command}`" for _, r in rs.iterrows()
                 if r["computed in"]]
        _md("**Where each row is computed.** Every row of the scorecard comes from one chapter's section; the "
            "command re-runs that chapter and this summary (cached results are reused when the parameters are "
            "unchanged; `make html` then rebuilds the pages):\n\n" + "\n".join(lines))

    def models_figure(self):
        """The all-models figure (the introduction shows its PNG, ``results/figures/summary-models.png``, and pastes
        its computed caption, ``models_caption``)."""
        fig, t = models_figure(self.table)
        measured = int((t["trained"].notna() & ~t["random"].astype(bool)).sum())
        notrun = int(t["status"].str.startswith("not run").sum())
        caption = (f"Every model and variant of results/summary.csv ({len(t)} lines): the fraction of (input, layer) "
                   "pairs where the equality condition holds, point and the 95% interval the verdicts use (clustered "
                   "by input; for random matrices, independent draws, Wilson's); trained weights blue "
                   f"({measured} lines, random matrices dark grey), 'not run' where the weights were unavailable "
                   f"({notrun} lines), and the untrained control of the same model just below in orange. The grey band "
                   "is the paper's value for the claim a measured line is evidence for (none for models the paper "
                   "does not report, and none on 'not run' lines, whose untrained control is not evidence; the claim "
                   "that failures lie late in depth is not a fraction and is not drawn).")
        alt = ("Horizontal interval plot of the fraction holding per model and variant: trained in blue, untrained "
               "controls in orange, not-run lines marked, grey bands for the paper's values.")
        F.figure(fig, notebook=NOTEBOOK, name="models", width="full", caption=caption, alt=alt,
                 results_dir=self.results, close=False)
        # the introduction shows results/figures/summary-models.png itself (a {figure}: cross-document glue
        # pastes no figure) and pastes this computed sentence under it
        _glue("models_caption", _text(
            f"The figure has {len(t)} lines: {measured} measured with trained weights, {notrun} not run (their "
            f"untrained controls are drawn), {int(t['random'].astype(bool).sum())} of random matrices; its data are "
            "results/summary.csv."))
        import matplotlib.pyplot as plt

        plt.close(fig)

    def mpnet_for_introduction(self):
        """Glue ``mpnet_line``: the trained language model where the condition never holds, and why (computed
        from ``results/language/mpnet-ablation.json``)."""
        p = self.results / "language" / "mpnet-ablation.json"
        if not p.exists():
            line = "The MPNet ablation was not run in this build."
        else:
            d = json.loads(p.read_text())
            (k0, n0), (k1, n1) = d["content_original"], d["content_ablated"]
            t = self.table
            row = t[(t["model"] == d["model"]) & (t["variant"] == "content") & (t["weights_source"] != "untrained")]
            if len(row) and row["measured"].notna().all():
                n_all = int(row["n_pairs"].iloc[0])
                k_all = int(round(float(row["measured"].iloc[0]) * n_all))
            else:
                k_all, n_all = k0, n0
            how = "never holds" if k_all == 0 else f"holds on only {k_all} of {n_all} (sentence, layer) pairs"
            line = (f"One trained language model where the condition {how}"
                    + (f" ({n_all} sentence-layer pairs)" if k_all == 0 else "")
                    + f": {display_name(d['model'])}. Its learned relative position bias at distance 0 is "
                    f"{d['bias0']:.1f} (against {d['bias_minus1']:.2f} and {d['bias_plus1']:.2f} at distance ±1), so "
                    f"its tokens give themselves almost no attention; setting that one value to the mean of its "
                    f"neighbours makes the condition hold on {k1} of {n1} pairs of the first {d['sentences']} "
                    f"sentences ({pct(k1 / n1)}, against {k0} before), and the sentence embeddings move "
                    + ("little" if d.get("cosine_min", 1.0) >= 0.9 else "noticeably")
                    + f": cosine to the original median {d['cosine_median']:.3f}"
                    + (f", lowest {d['cosine_min']:.3f}." if "cosine_min" in d else "."))
        _glue("mpnet_line", _text(line))
        _md(line)

    def downloads(self):
        """Links to summary.csv and scorecard.csv."""
        links = download_links(self.results, "summary")
        _md("**Result files** (download): " + ", ".join(links) + ".")


def _text(s: str):
    from .display import plain_text

    return plain_text(s)


__all__ = ["ROW_SOURCES", "SummaryInsights", "models_figure", "models_rows", "row_sources"]
