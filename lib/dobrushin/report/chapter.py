"""The family chapters (DINOv2, language models, supervised ViTs) as calls: one :class:`FamilyChapter`
per notebook, one method per section, each displaying its tables, figures and sentences.

The notebooks keep their own prose and parameters; every number they show comes from here: the inputs
(:func:`dobrushin.data.inputs.load_inputs`), the one measurement loop
(:func:`dobrushin.experiments.pipeline.measure_models`), the tables (:mod:`.tables`) and the figures
(:mod:`.plots`).  Figures are written to ``results/figures/<notebook>-<what>.{png,svg}`` and the
fractions to ``results/<notebook>/fractions.csv``.
"""
from __future__ import annotations

import html
import json
import platform
import time
import warnings
from pathlib import Path
from typing import Optional, Sequence

import pandas as pd

from ..data.availability import DataUnavailable
from ..store import paths
from ..store.results import ResultStore, atomic_write_csv, slugify
from . import plots
from .names import VARIANT_LABELS, display_name, weights_label
from .tables import fractions, head_summary, rollout_summary, status_table


def _display(*objs):
    from IPython.display import display

    display(*objs)


def _md(text: str):
    from IPython.display import Markdown

    _display(Markdown(text))


def _show(fig, notebook: str, what: str, results_dir):
    import matplotlib.pyplot as plt

    plots.save_figure(fig, notebook, what, results_dir)
    plt.show()


def pct(x) -> str:
    """``0.123`` → ``"12.3%"``; a missing value → ``"—"``."""
    return "—" if pd.isna(x) else f"{100 * x:.1f}%"


class FamilyChapter:
    """One family chapter: ``FamilyChapter(notebook, title, kind, **parameters)`` with the notebook's
    papermill parameters (``image_source``/``image_size`` for images, ``text_source``/``max_length`` for
    text), then one call per section (:meth:`inputs`, :meth:`measure`, :meth:`status`, :meth:`fractions`,
    :meth:`depth`, :meth:`slack`, :meth:`heads`, :meth:`rollout`, :meth:`timing`, :meth:`finish`)."""

    def __init__(self, notebook: str, title: str, kind: str, *, profile: str, results_dir, models: Sequence[str],
                 weights: Sequence[str], n_inputs: Optional[int], n_untrained: Optional[int], head_inputs: int,
                 batch_size: int, seed: int, device: str, force: bool, image_source=None, image_size: int = 224,
                 text_source=None, max_length: int = 128, ncols: int = 3):
        from ..experiments.pipeline import MeasureConfig, describe_device, resolve_device

        if kind not in ("image", "text"):
            raise ValueError(f"kind must be 'image' or 'text', got {kind!r}")
        warnings.filterwarnings("ignore", message="IProgress not found")  # tqdm without ipywidgets: text bars
        self.t_start = time.perf_counter()
        self.notebook, self.title, self.kind, self.ncols = notebook, title, kind, ncols
        self.models, self.n_inputs = list(models), n_inputs
        self.source = image_source if kind == "image" else text_source
        self.results = Path(results_dir) if results_dir else paths.results_dir()
        self.store = ResultStore(self.results, notebook)
        self.device = resolve_device(device)
        size = {"image_source": image_source, "image_size": image_size} if kind == "image" else \
            {"text_source": text_source, "max_length": max_length}
        self.params = dict(profile=profile, models=list(models), weights=list(weights), n_inputs=n_inputs,
                           n_untrained=n_untrained, head_inputs=head_inputs, **size, batch_size=batch_size,
                           seed=seed, device=device, force=force)
        self.profile, self.seed = profile, seed
        self.config = MeasureConfig(weights=tuple(weights), n_untrained=n_untrained, batch_size=batch_size, seed=seed,
                                    image_size=image_size, max_length=max_length, head_inputs=head_inputs,
                                    device=device, force=force)
        self.input_set, self.runs = None, []
        self.table = self.heads_table = self.roll = pd.DataFrame()
        self.st = pd.DataFrame()
        print(json.dumps(self.params, indent=None))
        print(", ".join(f"{k} {v}" for k, v in self._versions().items()))
        print(f"device: {describe_device(self.device)}; results: {self.results / notebook}; "
              f"data: {paths.data_dir() or 'DOBRUSHIN_DATA unset'}")

    @staticmethod
    def _versions() -> dict:
        import matplotlib
        import numpy as np
        import timm
        import torch
        import transformers

        from .. import __version__

        return {"python": platform.python_version(), "torch": torch.__version__,
                "transformers": transformers.__version__, "timm": timm.__version__, "numpy": np.__version__,
                "pandas": pd.__version__, "matplotlib": matplotlib.__version__, "dobrushin": __version__}

    # -- sections -------------------------------------------------------------------------------
    def inputs(self):
        """Load the inputs and say what they are; when the data is unavailable, say so and record it."""
        from ..data.inputs import load_inputs

        what = "images" if self.kind == "image" else "sentences"
        try:
            self.input_set = load_inputs(self.kind, self.source, self.n_inputs, seed=self.seed)
        except DataUnavailable as e:
            _display(plots.admonition("Not reproduced in this build", e.status))
            for m in self.models:
                self.store.record(slugify(m), self.params, status=e.status, model=m, display=display_name(m),
                                  family="")
            return
        _md(f"Inputs: {self.input_set.describe()}.")
        if self.n_inputs is not None and self.input_set.available < self.n_inputs:
            _md(f"The source holds only {self.input_set.available} {what}, fewer than the {self.n_inputs} asked "
                f"for: all of them are used.")

    def measure(self):
        """Every model through the measurement loop (cached results are reused), then the manifest."""
        from ..experiments.pipeline import describe_device, measure_models

        if self.input_set is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # e.g. "switched to eager attention"
                self.runs = measure_models(self.models, self.input_set, store=self.store, config=self.config)
        if self.runs:
            self.table = pd.concat([r.table for r in self.runs], ignore_index=True)
            self.heads_table = pd.concat([r.heads for r in self.runs], ignore_index=True)
            self.roll = pd.concat([r.rollout for r in self.runs], ignore_index=True)
        self.st = status_table(self.runs)
        v = self._versions()
        self.store.update_manifest(parameters=self.params, profile=self.profile, device=describe_device(self.device),
                                   seed=self.seed, versions={k: v[k] for k in ("python", "torch", "transformers",
                                                                               "timm", "dobrushin")})

    def status(self):
        """Which trained weights could not be obtained, the status of every run and how each model was obtained."""
        missing = [r for r in self.runs if r.status != "ok"]
        for r in missing:
            u = r.runs.get("untrained", {}).get("status")
            tail = (f"Only the untrained control of {r.model_id} is measured below." if u == "ok"
                    else f"The untrained control was not measured either ({u or 'not requested'}).")
            _display(plots.admonition(f"{r.name}: not reproduced in this build", f"{r.status}. {tail}"))
        for r in self.runs:
            u = r.runs.get("untrained", {}).get("status")
            if r.status == "ok" and u not in (None, "ok"):
                _display(plots.admonition(f"{r.name}: no untrained control", u))
        st = self.st
        if len(st):
            _display(st[["model", "weights", "status", "inputs"]].style.hide(axis="index"))
            notes = st[st["notes"].fillna("").astype(bool)]
            if len(notes):
                _md("How each measured model was obtained:\n\n" + "\n".join(
                    f"- `{display_name(m)}`, {weights_label(w)}: {html.escape(n, quote=False)}"
                    for m, w, n in zip(notes["model"], notes["weights"], notes["notes"])))
        n_ok = sum(r.runs.get("pretrained", {}).get("status") == "ok" for r in self.runs)
        _md(f"Trained weights were measured for **{n_ok} of {len(self.runs)}** models"
            + (f"; for {len(missing)} only the untrained control was run." if missing else "."))

    def fractions(self):
        """The fraction of (input, layer) pairs where the condition holds, with Wilson 95% intervals."""
        if not len(self.table):
            _md("No model could be measured in this build.")
            return
        summ = fractions(self.table, ("model", "weights", "variant"))
        atomic_write_csv(self.results / self.notebook / "fractions.csv", summ)
        shown = summ.assign(model=summ["model"].map(display_name), weights=summ["weights"].map(weights_label),
                            fraction=summ["fraction"].map(pct), ci_low=summ["ci_low"].map(pct),
                            ci_high=summ["ci_high"].map(pct))
        _display(shown.rename(columns={"k": "holds", "n": "pairs", "ci_low": "95% CI low", "ci_high": "95% CI high"})
                 .style.hide(axis="index"))
        lines = []
        for (m, w), g in summ.groupby(["model", "weights"], sort=False):
            parts = [f"{VARIANT_LABELS.get(r['variant'], r['variant'])} **{pct(r['fraction'])}** of {r['n']} pairs "
                     f"(95% CI {pct(r['ci_low'])}–{pct(r['ci_high'])})" for _, r in g.iterrows()]
            lines.append(f"- `{display_name(m)}`, {weights_label(w)}: " + "; ".join(parts) + ".")
        _md("\n".join(lines))

    def depth(self):
        """Fraction holding per layer, and where in depth the failures of content tokens lie."""
        if not len(self.table):
            return
        fig = plots.layer_profile(self.table, ncols=self.ncols,
                                  title=f"{self.title}: fraction of inputs where the equality condition holds")
        _show(fig, self.notebook, "layers", self.results)
        rows = []
        for (m, w), g in self.table[self.table["variant"] == "content"].groupby(["model", "weights"], sort=False):
            L = int(g["layer"].max()) + 1
            fails = g[~g["holds"]]
            late = int((fails["layer"] >= L / 2).sum())
            rows.append(f"- `{display_name(m)}`, {weights_label(w)}: {len(fails)} failing pairs out of {len(g)}"
                        + (f"; {late} of them ({pct(late / len(fails))}) in the second half of the {L} layers"
                           if len(fails) else "") + ".")
        _md("Content tokens:\n\n" + "\n".join(rows))

    def slack(self):
        """The slack of the layer bound per layer, and its quantiles."""
        if not len(self.table):
            return
        fig = plots.slack_by_layer(self.table, variant="content", ncols=self.ncols,
                                   title=f"{self.title}: slack of the layer bound (content tokens)")
        _show(fig, self.notebook, "slack", self.results)
        q = (self.table[self.table["variant"] == "content"].groupby(["model", "weights"], sort=False)["slack"]
             .describe(percentiles=[0.5, 0.9])[["count", "50%", "90%", "max"]])
        _display(q.rename(columns={"count": "pairs", "50%": "median slack", "90%": "90th percentile", "max": "largest"})
                 .reset_index().assign(model=lambda d: d["model"].map(display_name),
                                       weights=lambda d: d["weights"].map(weights_label))
                 .style.format({"median slack": "{:.2e}", "90th percentile": "{:.2e}", "largest": "{:.2e}",
                                "pairs": "{:.0f}"})
                 .hide(axis="index"))

    def heads(self):
        """The test on each head's own attention: summary table and per-layer/head heatmap."""
        h = self.heads_table
        if not len(h):
            _md("No per-head measurements (`head_inputs = 0` or nothing measured).")
            return
        hs = head_summary(h)
        _display(hs.assign(model=hs["model"].map(display_name), weights=hs["weights"].map(weights_label),
                           fraction=hs["fraction"].map(pct), ci_low=hs["ci_low"].map(pct),
                           ci_high=hs["ci_high"].map(pct), head_min=hs["head_min"].map(pct),
                           head_median=hs["head_median"].map(pct), head_max=hs["head_max"].map(pct))
                 .rename(columns={"k": "holds", "n": "(input, layer, head)", "ci_low": "95% CI low",
                                  "ci_high": "95% CI high", "head_min": "worst head", "head_median": "median head",
                                  "head_max": "best head"})
                 .style.hide(axis="index"))
        fig = plots.head_heatmap(h, variant="content", ncols=self.ncols,
                                 title=f"{self.title}: fraction holding per layer and head")
        _show(fig, self.notebook, "heads", self.results)

    def rollout(self):
        """κ of the whole rollout against the product bound, per input."""
        if not len(self.roll):
            return
        rs = rollout_summary(self.roll)
        _display(rs.assign(model=rs["model"].map(display_name), weights=rs["weights"].map(weights_label))
                 .style.format({"median_kappa_rollout": "{:.3g}", "median_bound": "{:.3g}", "median_ratio": "{:.3g}"})
                 .hide(axis="index"))
        fig = plots.rollout_scatter(self.roll, variant="content", ncols=self.ncols,
                                    title=f"{self.title}: κ of the rollout vs the bound (content tokens)")
        _show(fig, self.notebook, "rollout", self.results)
        c = rs[rs["variant"] == "content"]
        _md(f"Over {int(c['inputs'].sum())} (model, weights, input) rollouts on content tokens, the bound is violated "
            f"**{int(c['violations'].sum())}** times (it cannot be, by the theorem); the median ratio "
            f"κ(R) / bound ranges from {c['median_ratio'].min():.3g} to {c['median_ratio'].max():.3g} across models "
            f"and weights, and the median bound itself from {c['median_bound'].min():.3g} to "
            f"{c['median_bound'].max():.3g}.")

    def timing(self):
        """Load and measurement time, throughput and device of every run."""
        st = self.st
        if not len(st):
            return
        _display(st[["model", "weights", "inputs", "load_s", "wall_s", "inputs_per_s", "device", "reused from cache"]]
                 .assign(model=st["model"].map(display_name))
                 .rename(columns={"load_s": "load (s)", "wall_s": "measure (s)", "inputs_per_s": "inputs/s"})
                 .style.format({"load (s)": "{:.1f}", "measure (s)": "{:.1f}", "inputs/s": "{:.2f}"}, na_rep="—")
                 .hide(axis="index"))
        _md("Times are those of the run that produced the result files (a reused file keeps its "
            "original timing). `measure` covers preprocessing, the forward passes and the tests.")

    def finish(self):
        """Record the notebook's wall time in the manifest and print it."""
        wall = time.perf_counter() - self.t_start
        self.store.update_manifest(notebook_wall_s=round(wall, 1))
        print(f"{self.notebook} notebook wall time: {wall:.1f} s")


__all__ = ["FamilyChapter", "pct"]
