"""Sections of the summary chapter that help a reader take the book apart (:class:`SummaryInsights`, a base of
:class:`dobrushin.report.summary_chapter.SummaryChapter`): where each scorecard row is computed and the command that
recomputes it, the all-models figure with the paper's values as bands (glued into the introduction), the MPNet
line of the introduction (from the language chapter's ablation file) and the download links."""
from __future__ import annotations

import json
import textwrap

import numpy as np
import pandas as pd

from . import figures as F
from .claims import CLAIMS, SCORECARD
from .insight import download_links
from .names import pct

NOTEBOOK = "summary"

#: scorecard row key -> (chapters that compute it, the section's anchor)
ROW_SOURCES = {
    "baseline": (("baseline",), "uniform-rows-dirichlet-1"),
    "dinov2": (("dinov2",), "how-often-the-condition-holds"),
    "roberta": (("language",), "how-often-the-condition-holds"),
    "distilbert": (("language",), "how-often-the-condition-holds"),
    "deit": (("supervised_vit",), "untrained-controls-until-trained-weights-exist"),
    "vit": (("supervised_vit",), "untrained-controls-until-trained-weights-exist"),
    "late": (("supervised_vit",), "untrained-controls-until-trained-weights-exist"),
    "tabular": (("tabular",), "results"),
    "special": (("dinov2", "language"), "how-often-the-condition-holds"),
    "related_text": (("language",), "how-often-the-condition-holds"),
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
        nbs, anchor = ROW_SOURCES.get(r.key, ((), ""))
        links = ", ".join(f"[{nb.replace('_', ' ')}](../executed/{nb}.ipynb#{anchor})" for nb in nbs)
        cmd = f"make notebooks PROFILE={profile} NOTEBOOKS=\"{' '.join(nbs)} summary\"" if nbs else ""
        rows.append({"key": r.key, "row": r.short, "computed in": links, "command": cmd})
    return pd.DataFrame(rows)


def models_figure(table: pd.DataFrame):
    """Every measured model and variant of ``summary.csv`` (trained blue, untrained control orange) as a point
    with its Wilson 95% interval, on one axis of fraction holding; the paper's range of the claim each row is
    evidence for is drawn as a grey band on that row."""
    import matplotlib.pyplot as plt

    t = table[table["measured"].notna() & (table["weights_source"] != "random matrices")].copy()
    t = t[~t["model"].astype(str).str.contains("@")].reset_index(drop=True)
    by_text = {c.text: c for c in CLAIMS.values()}
    fig, ax = plt.subplots(figsize=(9.4, 0.26 * len(t) + 1.4), layout="constrained")
    labels = []
    for y, r in enumerate(t.itertuples()):
        c = by_text.get(r.claim)
        if c is not None and r.weights_source != "untrained":
            ax.fill_betweenx([y - 0.42, y + 0.42], c.low, c.high, color="#BBBBBB", lw=0)
        col = F.COLORS["untrained" if r.weights_source == "untrained" else "trained"]
        mk = "s" if "special" in str(r.variant) else "o"
        ax.plot([r.ci_low, r.ci_high], [y, y], color=col, lw=1.5)
        ax.plot([r.measured], [y], marker=mk, color=col, ms=5)
        name = str(r.model).split("/")[-1]
        labels.append(textwrap.shorten(f"{name} · {r.variant}", 62, placeholder="…"))
    ax.set_yticks(range(len(t)), labels, fontsize=7.5)
    ax.invert_yaxis()
    ax.set_xlim(-0.02, 1.02)
    ax.set_xlabel("fraction of (input, layer) pairs where the condition holds (95% interval)")
    ax.grid(axis="x", alpha=0.3)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig.legend(handles=[Line2D([], [], color=F.COLORS["trained"], marker="o", label="trained"),
                       Line2D([], [], color=F.COLORS["untrained"], marker="o", label="untrained control"),
                       Line2D([], [], color="grey", marker="s", ls="", label="with special tokens"),
                       Patch(color="#BBBBBB", label="paper's range")],
              loc="outside upper center", ncols=4, frameon=False, fontsize=8)
    return fig, t


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
        banded = int(sum(1 for r in t.itertuples() if r.weights_source != "untrained"
                         and r.claim in {c.text for c in CLAIMS.values()}))
        caption = (f"Every model and variant measured in this build ({len(t)} rows of results/summary.csv, random "
                   "matrices aside): the fraction of (input, layer) pairs where the equality condition holds, point "
                   "and Wilson 95% interval; trained weights blue, untrained controls orange, squares with special "
                   f"tokens. The grey band on a row is the paper's value for the claim it is evidence for "
                   f"({banded} rows; untrained controls and models the paper does not report have none).")
        alt = "Horizontal interval plot of the fraction holding per model and variant, with grey bands for the paper's values."
        F.figure(fig, notebook=NOTEBOOK, name="models", width="full", caption=caption, alt=alt,
                 results_dir=self.results, close=False)
        # the introduction shows results/figures/summary-models.png itself (a {figure}: cross-document glue
        # pastes no figure) and pastes this computed sentence under it
        _glue("models_caption", _text(caption))
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
            line = (f"One trained language model fails the condition almost everywhere: all-mpnet-base-v2 (packaged "
                    f"proxy) holds on {k0} of {n0} (sentence, layer) pairs. Its learned relative position bias at "
                    f"distance 0 is {d['bias0']:.1f} (against {d['bias_minus1']:.2f} and {d['bias_plus1']:.2f} at "
                    f"distance ±1), so no token attends to itself; setting that one value to the mean of its "
                    f"neighbours makes the condition hold on {k1} of {n1} ({pct(k1 / n1)}) while the sentence "
                    f"embeddings keep a median cosine of {d['cosine_median']:.3f} to the original.")
        _glue("mpnet_line", _text(line))
        _md(line)

    def downloads(self):
        """Links to summary.csv and scorecard.csv."""
        links = download_links(self.results, "summary")
        _md("**Result files** (download): " + ", ".join(links) + ".")


def _text(s: str):
    from .summary import Text

    return Text(s)


__all__ = ["ROW_SOURCES", "SummaryInsights", "models_figure", "row_sources"]
