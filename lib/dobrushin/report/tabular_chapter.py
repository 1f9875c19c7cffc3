"""The FT-Transformer chapter (``notebooks/tabular.ipynb``): ``TabularChapter(params)`` trains (or loads) every
(data set, seed), measures each trained model and its untrained initialisation (reusing cached results); each
section method returns a ``Section``."""
from __future__ import annotations

import time

import pandas as pd

from . import page as F
from . import plots
from .chapter import rollout_check
from ..experiments.results_loading import baseline_for
from .claims import CLAIMS, PUBLISHED_FT_TRANSFORMER
from .training import epochs_figure, epochs_values
from .insight import near_ties
from .names import benchmark, ft_model_name
from .tables import fraction_grid, fractions, fractions_caption, rollout_summary
from .display import Section
from ..experiments.chapter_runs import epoch_trajectories, train_and_measure, train_overrides


def protocol_table(p):
    """The rows of the protocol table for the tabular parameters ``p``: ``setting``, ``value``, ``from``."""
    import rtdl_revisiting_models as rtdl

    from ..models import ft_transformer as ft_model

    kw = rtdl.FTTransformer.get_default_kwargs()
    settings = ft_model.train_settings(**train_overrides(p))
    pkg = f"rtdl_revisiting_models {rtdl.__version__} default"
    rows = [("blocks", kw["n_blocks"], pkg), ("width (d_block)", kw["d_block"], pkg),
            ("attention heads", kw["attention_n_heads"], pkg), ("attention dropout", kw["attention_dropout"], pkg),
            ("FFN dropout", kw["ffn_dropout"], pkg), ("residual dropout", kw["residual_dropout"], pkg),
            ("optimiser", "AdamW, the package's parameter groups", "dobrushin.models.ft_transformer"),
            ("learning rate", settings["lr"], "dobrushin.models.ft_transformer.TRAIN_DEFAULTS"),
            ("weight decay", settings["weight_decay"], "dobrushin.models.ft_transformer.TRAIN_DEFAULTS"),
            ("batch size", settings["batch_size"], "parameter batch_size"),
            ("early-stopping patience (epochs)", settings["patience"], "parameter patience"),
            ("epoch cap", "none" if settings["max_epochs"] is None else settings["max_epochs"], "parameter max_epochs"),
            ("training rows", "all" if p.train_rows is None else f"at most {p.train_rows}", "parameter train_rows")]
    return pd.DataFrame([(a, str(b), c) for a, b, c in rows], columns=["setting", "value", "from"])


class TabularChapter:
    """The FT-Transformer chapter's sections; ``params`` are the notebook's resolved parameters."""

    notebook = "tabular"

    def __init__(self, params):
        from pathlib import Path

        import torch

        from ..store import paths
        from ..store.results import ResultStore

        self.t_start = time.perf_counter()
        self.p = params
        torch.set_num_threads(int(params.torch_threads))
        self.results_dir = Path(params.results_dir) if params.results_dir else paths.results_dir()
        self.store = ResultStore(self.results_dir, "tabular")
        self.params = params.as_dict(exclude=("results_dir",))  # what the result files record
        self.timings = {}
        self.data_sets, self.unavailable = {}, {}
        self._load_data()
        m = train_and_measure(params, self.data_sets, self.unavailable, self.store, published=PUBLISHED_FT_TRANSFORMER,
                              model_name=ft_model_name)
        self.trained, self.metric_rows, self.runs, self.table = m.trained, m.metric_rows, m.runs, m.table
        self.timings.update(m.timings)
        self.summ = fractions(self.table, ("model", "weights", "variant")) if len(self.table) else pd.DataFrame()

    # ---------------------------------------------------------------- data and training
    def _load_data(self):
        """Load every data set (those unavailable recorded with why) and the table that describes them."""
        from ..data import tabular_data
        from ..store import paths

        rows = []
        for name in self.p.datasets:
            try:
                d = tabular_data.load(name, self.p.split_seed)
            except tabular_data.DataUnavailable as e:
                self.unavailable[name] = e.status
                rows.append({"data set": tabular_data.TITLES[name], "status": e.status})
                continue
            self.data_sets[name] = d
            prov = d.provenance
            src = prov["source"] if isinstance(prov["source"], str) else "; ".join(prov["source"].values())
            src = F.scrub_paths(src.replace(str(paths.data_dir()), "$DOBRUSHIN_DATA") if paths.data_dir() else src)
            rows.append({"data set": tabular_data.TITLES[name], "status": "ok", "task": d.task, "train": d.size("train"),
                         "val": d.size("val"), "test": d.size("test"), "numeric": len(d.num_names),
                         "categorical": len(d.cat_names), "tokens": d.n_tokens, "source": src,
                         "checksum": d.checksum[:12]})
        self.data_table = pd.DataFrame(rows)

    def data(self) -> Section:
        """The data sets: a banner names those unavailable, then one table."""
        from ..data import tabular_data

        why = "; ".join(f"{tabular_data.TITLES[k]}: {v}" for k, v in self.unavailable.items())
        return Section(F.banner("Not reproduced in this build", why) if why else None,
                       F.table(self.data_table, drop_constant=True, name="tab-tabular-data",
                               caption="The data sets: splits, features, tokens per row ([CLS] + one per feature) and "
                                       "source."))

    def protocol(self):
        """The model configuration and training settings, read from the code that builds and trains the models."""
        return F.table(protocol_table(self.p), name="tab-tabular-protocol",
                       caption="The FT-Transformer configuration and training settings of this build, with where each comes from.")

    def metrics(self):
        """The test metrics beside the published FT-Transformer values."""
        import numpy as np

        from ..data import tabular_data

        p = self.p
        show = pd.DataFrame([{
            "data set": tabular_data.TITLES[m["dataset"]], "seed": m["seed"], "metric": m["metric"], "value": m["value"],
            "published FT-Transformer": PUBLISHED_FT_TRANSFORMER.get(m["dataset"], np.nan), "epochs": m["epochs"],
            "stopped by": "epoch cap" if (p.max_epochs is not None and m["epochs"] >= p.max_epochs) else "early stopping",
            "training rows": self.trained[(m["dataset"], m["seed"])][0].size("train"),
        } for m in self.metric_rows])
        if not len(show):
            return Section().md("No model was trained.")
        return F.table(show, drop_constant=True, name="tab-tabular-metrics", caption="Test metrics of the trained "
                       "FT-Transformers next to the published FT-Transformer values.")

    # ---------------------------------------------------------------- results
    def results(self):
        """The fractions table, one line per model; glues ``tabular-ties-*`` and ``tabular-paper-range``."""
        out = Section().glue("tabular-ties", near_ties(self.table))
        out.glue("tabular-paper", {"range": CLAIMS["tabular"].paper_value})
        if not len(self.summ):
            return out.md("**No tabular model could be measured in this build.**")
        out.append(F.table(fraction_grid(self.summ), name="tab-tabular-fractions", caption=fractions_caption("test row")))
        return out

    def layers(self):
        if not len(self.table):
            return Section()
        fig = plots.fraction_by_layer(self.table, baseline=baseline_for(self.table, self.results_dir))
        return Section(F.figure(fig, notebook="tabular", name="layers", width="full", results_dir=self.results_dir,
                 caption="FT-Transformer: fraction of test rows for which the equality condition holds, per layer (Wilson 95% "
                         "bands; the legend names the lines). The grey dotted line is the random Dirichlet(1) baseline "
                         "at the model's number of content tokens.",
                 alt="Line plots of the fraction holding against layer for each FT-Transformer, with the random baseline."))

    def slack(self):
        if not len(self.table):
            return Section()
        fig = plots.slack_by_layer(self.table, variant="content")
        return Section(F.figure(fig, notebook="tabular", name="slack", width="full", results_dir=self.results_dir,
                 caption="FT-Transformer: slack of the layer bound per layer over test rows (content tokens), "
                         f"symmetric-log axis linear below {plots.SLACK_LINTHRESH:g}; 0 is the equality case.",
                 alt="Box plots of the slack of the layer bound per layer, one panel per FT-Transformer, symmetric log axis."))

    def uniformity(self, count: int = 64):
        """``kappa_table`` per benchmark (seeds pooled) and weights, against ``count`` Dirichlet(1) matrices."""
        from ..experiments.structure import random_kappa
        from .tables import kappa_caption, kappa_table

        out = Section()
        table = self.table
        if not len(table):
            return out
        c = table[table["variant"] == "content"]
        c = c.assign(model=c["model"].map(benchmark))
        ns = {b: int(g["n_tokens"].median()) for b, g in c.groupby("model", sort=False)}
        rk = {b: random_kappa(n, count=count, seed=0) for b, n in ns.items()}
        out.append(F.table(kappa_table(c, rk, ns), name="tab-tabular-kappa",
                         caption=kappa_caption("Per benchmark (seeds pooled) and weights")))
        return out

    def rollout(self):
        """κ of the whole rollout against the product of the layer bounds, per test row (content tokens)."""
        roll = pd.concat([v.rollout for v in self.runs.values()], ignore_index=True) if self.runs else pd.DataFrame()
        return rollout_check(rollout_summary(roll), "tab-tabular-rollout")

    def epochs(self):
        """The condition along training for ``epoch_datasets`` (reused by key); writes ``epochs.csv``, the figure and
        its paragraph's values."""
        from ..experiments import epochs as E
        from ..store.results import atomic_write_csv, sha256_file

        out = Section()
        p = self.p
        t, records, sizes = epoch_trajectories(p, self.data_sets, self.store)
        claim = CLAIMS["tabular"]
        same = [self.trained[k][1].sha256 == records[f"{k[0]}-seed{k[1]}"]["early_stopping_sha256"]
                for k in self.trained if f"{k[0]}-seed{k[1]}" in records]
        for name, values in epochs_values(t, claim).items():  # the notebook's sentences (placeholders: not measured)
            out.glue(f"epochs-{name}", values)
        out.values["epochs-same"] = f"{sum(same)} of the {len(same)}" if same else "—"
        if not records:
            return out.md("No benchmark was measured along training in this build.")
        atomic_write_csv(self.store.dir / "epochs.csv", t)
        self.store.update_manifest(epochs={"file": "epochs.csv", "sha256": sha256_file(self.store.dir / "epochs.csv"),
                                           "epoch_rows": p.epoch_rows, "split_seed": p.split_seed,
                                           "train_rows": p.train_rows, "torch_threads": p.torch_threads,
                                           "trajectories": records})
        out.append(F.figure(epochs_figure(t, claim), notebook="tabular", name="epochs", width="full", results_dir=self.results_dir,
                 caption=f"Along training, content tokens of {' or '.join(sorted(sizes))} test rows: the fraction "
                         f"where the condition holds (top; seeds as lines, the paper's {claim.paper_value} shaded, each "
                         "seed's early-stopping epoch as a dot), the validation metric (middle) and the fraction per layer, "
                         "seeds pooled (bottom). Epoch 0 is the initialisation; training goes on to "
                         f"{E.EXTEND:g} times the early-stopping epoch, or to the protocol's stop if that is later.",
                 alt="Line plots against the training epoch, one column per benchmark: the fraction holding per seed, "
                     "the validation metric, and the fraction per layer."))
        return out

    def atlas(self):
        from .insight import tabular_atlas

        return tabular_atlas(self.runs, self.trained, attention_rows=self.p.attention_rows, split_seed=self.p.split_seed,
                      store=self.store)

    # ---------------------------------------------------------------- the end of the chapter
    def downloads(self):
        from .insight import show_downloads

        return show_downloads("tabular", self.p.results_dir)

    def finish(self):
        import torch

        self.timings["notebook wall time"] = round(time.perf_counter() - self.t_start, 1)
        return F.how_run(self.params, packages=("rtdl_revisiting_models", "scikit-learn", "pandas", "dobrushin"),
                         device=f"cpu ({torch.get_num_threads()} threads)", timings=self.timings)
