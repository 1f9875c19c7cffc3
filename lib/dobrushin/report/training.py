"""The condition along training (tabular chapter): the figure and glued values from the rows of ``epochs.csv``."""
from __future__ import annotations

from .names import pct, range_text


def epochs_figure(t, claim):
    """The figure of ``TabularChapter.epochs`` from the ``epochs.csv`` rows ``t``."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    from ..data.tabular_data import DATASETS, TITLES
    from .style import color_for

    c = t[t.variant == "content"]
    sets = sorted(c.dataset.unique(), key=lambda n: DATASETS.index(n) if n in DATASETS else len(DATASETS))  # registry's order
    fig, axes = plt.subplots(3, len(sets), figsize=(4.6 * len(sets), 8.2), sharex="col", squeeze=False)
    shades = (1.0, 0.65, 0.4)
    for j, name in enumerate(sets):
        g = c[c.dataset == name]
        top, mid, low = axes[:, j]
        top.axhspan(claim.low, claim.high, color="0.88", label=f"paper {claim.paper_value}")
        for k, (seed, s) in enumerate(g.groupby("seed")):
            pooled = s[s.layer.isna()]
            kw = dict(color=color_for("trained"), alpha=shades[k % 3], lw=1.2)
            top.plot(pooled.epoch, pooled.fraction, label=f"seed {seed}", **kw)
            es = pooled[pooled.epoch == pooled.early_stopping_epoch]
            top.plot(es.epoch, es.fraction, "o", ms=5, mec="black", **kw)
            mid.plot(pooled.epoch, pooled.val_value, **kw)
        top.legend(handles=[*top.get_legend_handles_labels()[0], Line2D([], [], ls="", marker="o", mec="black",
                                                                          color=color_for("trained"), label="early stopping")],
                   fontsize=8, loc="upper right")
        layers = g[g.layer.notna()].groupby(["layer", "epoch"])[["holds", "pairs"]].sum().reset_index()
        for k, (layer, s) in enumerate(layers.groupby("layer")):
            low.plot(s.epoch, s.holds / s.pairs, color=plt.cm.viridis(k / max(1, layers.layer.nunique() - 1)),
                     label=f"layer {layer + 1}")
        top.set_title(TITLES.get(name, name))
        top.set_ylim(0, 1)
        low.set_ylim(0, 1)
        mid.set_ylabel(f"validation {g.val_metric.iloc[0]}")
        low.set_xlabel("epoch")
        low.legend(fontsize=8, loc="upper right")
    axes[0, 0].set_ylabel("fraction holding")
    axes[2, 0].set_ylabel("fraction holding, per layer")
    fig.tight_layout()
    return fig


#: the benchmarks whose trajectories the chapter's text names (its sentences are written for these two)
EPOCH_BENCHMARKS = ("california", "adult")


def epochs_values(t, claim) -> dict:
    """Per ``EPOCH_BENCHMARKS`` entry, the values the training sentences glue (``"—"`` if not measured); ``rho``: per
    seed, the Spearman correlation of the fraction with the validation score over the trained epochs."""
    c = t[(t.variant == "content") & t.layer.isna()]
    out = {}
    for name in EPOCH_BENCHMARKS:
        g = c[c.dataset == name]
        if not len(g):
            out[name] = dict.fromkeys(("seeds", "init", "one", "es", "es_epochs", "end", "end_epochs", "inside",
                                       "last_inside", "rho"), "—")
            continue

        def at(sel):
            v = g[sel].fraction
            return pct(v.min()) if v.min() == v.max() else range_text(v.min(), v.max())

        last = g.groupby("seed").epoch.transform("max")
        better = g.val_value if g.val_metric.iloc[0] == "accuracy" else -g.val_value
        rho = [g.fraction[m].corr(better[m], method="spearman") for m in ((g.epoch > 0) & (g.seed == s) for s in g.seed.unique())]
        trained = g[g.epoch > 0]
        inside = trained[trained.fraction.between(claim.low, claim.high)]
        last_inside = [str(inside[inside.seed == s].epoch.max()) if (inside.seed == s).any() else "none"
                       for s in g.seed.unique()]
        seeds = g.seed.nunique()
        out[name] = {"seeds": f"{seeds} seed{'s' * (seeds > 1)}", "init": at(g.epoch == 0), "one": at(g.epoch == 1),
                     "es": at(g.epoch == g.early_stopping_epoch),
                     "es_epochs": ", ".join(map(str, sorted(g.early_stopping_epoch.unique()))),
                     "end": at(g.epoch == last), "end_epochs": ", ".join(map(str, sorted(last.unique()))),
                     "inside": f"{len(inside)} of {len(trained)}", "last_inside": ", ".join(last_inside),
                     "rho": ", ".join(f"{r:+.2f}" for r in rho)}
    return out
