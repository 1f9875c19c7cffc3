"""Sections showing *why* the condition holds or fails (``InsightSections``, mixed into ``FamilyChapter``): κ(A) per
layer, the failure atlas, the MPNet distance-0 bias ablation, the download links; also ``tabular_atlas``."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..models.configs import RESOLUTION_SEP
from ..store.paths import project_root
from ..store.results import atomic_write_csv
from . import page as F
from .names import VARIANT_LABELS, and_join, display_name, pct, weights_label
from .tables import kappa_caption, kappa_table
from .display import Section
from ..experiments.chapter_runs import trained_ok

MPNET = "sentence-transformers/all-mpnet-base-v2"


def near_ties(table: pd.DataFrame) -> dict:
    """Rows whose decision margin (least of the κ gap and the two self-margins) is below ``FLOAT_ERROR`` (float32
    rounding could turn them), for ``<chapter>-ties-*``; every value "—" when ``table`` has no margin columns."""
    from ..experiments.comparison import FLOAT_ERROR, MARGIN_COLUMNS, margin_of_rows

    keys = ("n", "rows", "share", "error", "top", "where")
    if not len(table) or not set(MARGIN_COLUMNS) <= set(table.columns):
        return dict.fromkeys(keys, "—")
    m = margin_of_rows(table).to_numpy(float)
    tie = np.isfinite(m) & (m < FLOAT_ERROR)
    share = table.assign(_tie=tie).groupby(["model", "weights", "variant"], observed=True, sort=False)["_tie"].mean()
    (mm, w, v), overall = share.idxmax(), tie.mean()
    return {"n": f"{int(tie.sum()):,}", "rows": f"{len(table):,}", "share": pct(overall, 2 if overall < 0.001 else 1),
            "error": f"{FLOAT_ERROR:g}", "top": f"{100 * float(share.max()):.1f}",
            "where": f"{display_name(mm)}, {weights_label(w)}, {VARIANT_LABELS.get(v, v)}" if tie.any() else "—"}


def ablation_verdict(k0: int, n0: int, k1: int, n1: int) -> str:
    """What the MPNet ablation shows from ``k0``/``n0`` pairs holding before and ``k1``/``n1`` after: "the cause"
    (≥ 90% of the failing share gone), "part of the cause", "not the cause", "nothing to explain" or "not run"."""
    if n0 <= 0 or n1 <= 0:
        return "not run"
    f0, f1 = 1 - k0 / n0, 1 - k1 / n1  # the shares failing before and after
    if f0 == 0:
        return "nothing to explain"
    return "the cause" if f1 <= 0.1 * f0 else "part of the cause" if f1 < f0 else "not the cause"


class InsightSections:
    """Mixin for ``FamilyChapter`` (uses its tables, runs, store, config and ``_fig``)."""

    # ------------------------------------------------------------------ §1 κ(A) per layer
    def _random_kappa(self, models, count: int = 32):
        from ..experiments.structure import random_kappa

        c = self.table[self.table["variant"] == "content"]
        out = {}
        for m in models:
            g = c[c["model"] == m]
            if len(g):
                out[m] = random_kappa(int(g["n_tokens"].median()), count=count, seed=self.config.seed)
        return out

    def kappa(self):
        """κ(A) per layer per model (trained, untrained, random of the same n) and its ``kappa_table``."""
        out = Section()
        if not len(self.table):
            return out
        models = [m for m in self.featured if (self.table["model"] == m).any()]
        rk = self._random_kappa(models)
        from .kappa_figures import kappa_by_layer

        fig = kappa_by_layer(self.table, models=models, random_kappa=rk)
        c = self.table[(self.table["variant"] == "content") & self.table["model"].isin(models)]
        ns = {m: int(c.loc[c["model"] == m, "n_tokens"].median()) for m in models}
        self._fig(out, fig, "kappa", f"{self.title}: κ(A) of the head-averaged attention per layer (content tokens; "
                  "median over inputs, band: interquartile range), trained and untrained, against Dirichlet(1) random "
                  "matrices of the model's median number of content tokens (dotted).",
                  f"Line plots of kappa of the attention against layer, one panel per model "
                  f"({', '.join(map(display_name, models))}), trained in blue, untrained in orange, random matrices "
                  "dotted grey.", len(models))
        out.append(F.table(kappa_table(c, rk, ns), name=f"tab-{self.notebook}-kappa",
                           caption=kappa_caption("Per model and weights")))
        return out

    # ------------------------------------------------------------------ §2 the failure atlas
    def atlas(self):
        """Failure atlas of the featured trained model failing most: per variant, the largest-slack failing case, a
        seeded random failing one and one holding case; glues ``<notebook>-atlas-*``.  Nothing when no trained model
        fails."""
        from ..experiments.atlas import cases_frame, choose_cases, measured_atlas
        from ..models.loading import load_model
        from .kappa_figures import atlas_figure

        out, failing = Section().glue(f"{self.notebook}-atlas", atlas_values()), {}  # featured trained model -> failures
        for m in [x for x in self.featured if RESOLUTION_SEP not in x] if self.input_set is not None else []:
            run = next(r for r in self.runs if r.model_id == m)
            t = self.table[(self.table["model"] == m) & (self.table["weights"] == "pretrained")]
            if trained_ok(run) and not t["holds"].all():
                failing[m] = int((~t["holds"]).sum())
        m = max(failing, key=failing.get) if failing else None  # the first of equals, in the featured order
        table_key = (self.store.entry(m) or {}).get("params_key") if m is not None else None
        for f in self.store.dir.glob("atlas-*.analysis.json"):  # another build's atlas (another model, or none)
            if not table_key or f.name != f"atlas-{_key(m)}.analysis.json":
                f.unlink()
        if not table_key:
            (self.store.dir / "atlas.csv").unlink(missing_ok=True)
            if m is not None:
                return out.md(f"No manifest entry of {display_name(m)}'s table: no atlas is drawn.")
            return out.md("No trained model in this chapter fails on any (input, layer) pair: there is no atlas to "
                          "draw.") if len(self.table) and self.input_set is not None else out
        chosen = pd.concat([choose_cases(self.table, model=m, weights="pretrained", variant=v, seed=self.config.seed)
                            for v in ("content", "with_special")], ignore_index=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cases = measured_atlas(
                self.store, f"atlas-{_key(m)}", chosen, table_key,
                lambda: load_model(m, pretrained=True, seed=self.config.seed, image_size=self.config.image_size,
                                   max_length=self.config.max_length), self.input_set, seed=self.config.seed)
        what = "photo as the model sees it (after its preprocessing), the two patches outlined" \
            if self.kind == "image" else ("sentence as the model's tokens (· starts a word piece that continues the previous "
                                       "token; special tokens in grey italics), the two tokens highlighted")
        others = [display_name(x) for x in failing if x != m]
        self._fig(out, atlas_figure(cases), f"atlas-{_key(m)}",
                  f"Failure atlas of {display_name(m)}, the trained model here that fails most often"
                  + (f" (also failing: {and_join(others)})" if others else "") + ". Per variant: "
                  + _atlas_caption("input", self.config.seed, what),
                  f"Panels of the {'photos' if self.kind == 'image' else 'sentences'} of {display_name(m)} with "
                  "two tokens marked in each.", 3)
        frame = cases_frame(cases)
        atomic_write_csv(self.store.dir / "atlas.csv", frame)
        return out.glue(f"{self.notebook}-atlas", atlas_values(frame))

    # ------------------------------------------------------------------ §3 MPNet ablation
    def mpnet_ablation(self, n_sentences: int = 16, subject: str = MPNET):
        """MPNet with its distance-0 position bias set to the mean of distance ±1, measured again; glues ``mpnet-*``."""
        from ..experiments.ablation import measured_ablation

        out = Section()
        keys = ("bias0", "bias_minus1", "bias_plus1", "bias_after", "heads", "k0", "k1", "n", "s0", "s1",
                "trace0", "trace1", "cos_median", "cos_min", "verdict", "sentences", "u_k0", "u_k1")
        glued = dict.fromkeys(keys, "—")
        glued["verdict"] = "not run"
        entry = self.store.entry(subject)
        res, why = None, f"{display_name(subject)} was not measured here"
        if self.input_set is not None and subject in self.params.models and entry and entry.get("file"):
            texts = self.input_set.items(0, int(n_sentences))
            try:
                res = measured_ablation(self.store, subject, texts, list(self.input_set.ids)[:len(texts)],
                                        provenance=entry.get("provenance"), seed=self.config.seed,
                                        max_length=self.config.max_length)
            except Exception as e:  # noqa: BLE001 — missing weights are stated, not hidden
                why = f"{type(e).__name__}: {e}"
        if res is None:
            (self.store.dir / "mpnet-ablation.analysis.json").unlink(missing_ok=True)  # no other build's numbers
            out.glue("mpnet", glued)
            return out.md(f"The ablation was not run in this build ({why}).")
        if "error" in res.get("untrained", {}):
            out.md(f"The untrained control of the ablation could not be built ({res['untrained']['error']}).")
        lay = {w: pd.DataFrame(r["layers"]) for w, r in res.items() if "layers" in r}
        c = lay["pretrained"][lay["pretrained"]["variant"] == "content"]
        o, a = c[c["condition"] == "original"], c[c["condition"] == "ablated"]
        ws = lay["pretrained"][lay["pretrained"]["variant"] == "with_special"]
        info, cos = res["pretrained"]["info"], np.asarray(res["pretrained"]["cosine"])
        glued.update(bias0=f"{np.mean(info['before']):.2f}", bias_minus1=f"{np.mean(info['minus1']):.2f}",
                     bias_plus1=f"{np.mean(info['plus1']):.2f}", bias_after=f"{np.mean(info['after']):.2f}",
                     heads=len(info["before"]), k0=int(o["k"].sum()), k1=int(a["k"].sum()), n=int(o["n"].sum()),
                     s0=int(ws.loc[ws["condition"] == "original", "k"].sum()),
                     s1=int(ws.loc[ws["condition"] == "ablated", "k"].sum()),
                     trace0=f"{o['trace'].mean():.3g}", trace1=f"{a['trace'].mean():.3g}",
                     cos_median=f"{np.median(cos):.3f}", cos_min=f"{cos.min():.3f}",
                     verdict=ablation_verdict(int(o["k"].sum()), int(o["n"].sum()), int(a["k"].sum()), int(a["n"].sum())),
                     sentences=len(cos))
        if "untrained" in lay:
            u = lay["untrained"][lay["untrained"]["variant"] == "content"]
            glued.update(u_k0=int(u.loc[u["condition"] == "original", "k"].sum()),
                         u_k1=int(u.loc[u["condition"] == "ablated", "k"].sum()))
        return out.glue("mpnet", glued)

    def overview(self):
        """Every section in turn or, when no trained weights were measured, the untrained controls' fractions and
        depth figure; the atlas's values are glued either way."""
        out = Section().glue(f"{self.notebook}-atlas", atlas_values())  # the atlas's own when it is drawn
        if not len(self.table):
            return out.md("No model could be measured in this build.")
        sections = (("How often the condition holds", self.fractions), ("Where in depth", self.depth))
        if any(trained_ok(r) for r in self.runs):
            sections += (("The slack of the layer bound", self.slack), ("The whole rollout", self.rollout),
                         ("κ(A) per layer", self.kappa), ("Failure atlas", self.atlas))
        for title, fn in sections:
            out.md(f"**{title}.**").include(fn())
        return out

    # ------------------------------------------------------------------ §4 downloads
    def downloads(self):
        """Links to the chapter's result files (tables and CSV files) and the summary's."""
        return show_downloads(self.notebook, self.results)


def tabular_atlas(runs, trained, *, attention_rows, split_seed: int, store):
    """The tabular failure atlas, one row of panels per data set (first trained seed; ``runs``, ``trained`` keyed by
    (data set, seed)): content-token cases recomputed on the test rows, kept as ``atlas-<data set>.analysis.json``;
    glues ``tabular-atlas-*``."""
    from ..experiments.atlas import cases_frame, choose_cases, measured_atlas
    from ..experiments.tabular import TabularInputs, TabularModel
    from ..models import ft_transformer as tb
    from .kappa_figures import atlas_figure

    drawn, names, seen = [], [], []
    for key, run in runs.items():
        if key not in trained or not len(run.table) or key[0] in seen:
            continue
        d, r = trained[key]
        inputs = TabularInputs(d, "test", tb.select_rows(d.size("test"), attention_rows, seed=split_seed))
        chosen = choose_cases(run.table, model=run.model_id, weights="pretrained", variant="content", seed=split_seed)
        table_key = (store.entry(f"{key[0]}-seed{key[1]}") or {}).get("params_key")
        if not len(chosen) or not table_key:
            continue
        seen.append(key[0])
        drawn += measured_atlas(store, f"atlas-{key[0]}", chosen, table_key, lambda: TabularModel(
            r.model, inputs.preprocess, run.model_id, "pretrained", {}), inputs, seed=split_seed)  # built on a miss only
        names.append(display_name(run.model_id))
    for f in store.dir.glob("atlas-*.analysis.json"):  # another build's data sets
        if f.name not in {f"atlas-{d}.analysis.json" for d in seen}:
            f.unlink()
    if not drawn:
        return Section().glue("tabular-atlas", atlas_values())
    return Section(F.figure(
        atlas_figure(drawn), notebook="tabular", name="atlas", width="full", results_dir=store.dir.parent,
        caption=f"Failure atlas, one row per model ({', '.join(names)}), content tokens: " + _atlas_caption(
            "test row", split_seed, "row as the model's tokens ([CLS], then name=value per feature, as the model sees "
            "them), the two features highlighted"),
        alt="Panels of test rows as lists of features, two features highlighted in each, one row per model.")
    ).glue("tabular-atlas", atlas_values(cases_frame(drawn)))


def atlas_values(cases: "pd.DataFrame | None" = None) -> dict:
    """The atlas's counts (``cases_frame`` rows): cases recomputed, those whose verdict agrees with the table's, the
    failing ones, and of these those failing on both margins or on one only; "—" each when none was drawn."""
    if cases is None:
        return dict.fromkeys(("cases", "agree", "failing", "both", "one"), "—")
    f = cases[~cases["holds"]]
    both = int(((f["margin_i"] < 0) & (f["margin_j"] < 0)).sum())
    return {"cases": len(cases), "agree": int((cases["holds"] == cases["table_holds"]).sum()), "failing": len(f),
            "both": both, "one": len(f) - both}


def _atlas_caption(unit: str, seed: int, shows: str) -> str:
    """The caption's shared part: which cases are drawn and what a panel shows (``shows``)."""
    return (f"the failing ({unit}, layer) pair of largest slack, one failing pair drawn with numpy's default_rng({seed}) "
            f"and one holding pair. Each panel shows the {shows}: the κ-attaining pair i (vermillion) and j (green), "
            "with margins $A_{ii}-A_{ji}$ and $A_{jj}-A_{ij}$, both ≥ 0 exactly when the pair is mutually self-dominant.")


def show_downloads(notebook: str, results_dir=None):
    """The download links of ``notebook``'s result files (for chapters other than ``FamilyChapter``)."""
    from ..store.paths import results_dir as default

    out = Section()
    links = download_links(Path(results_dir) if results_dir else default(), notebook)
    if links:
        out.md("**Result files of this chapter** (download): " + ", ".join(links) + ".")
    return out


def _key(model_id: str) -> str:
    """A figure-name fragment for ``model_id``: lower-case letters, digits and single hyphens."""
    import re

    return re.sub(r"[^a-z0-9]+", "-", str(model_id).lower()).strip("-") or "model"


def download_links(results_dir, notebook: str) -> list:
    """MyST ``{download}`` roles for ``results/<notebook>/*`` (parquet, csv) and the summary's CSVs, relative to the
    executed notebooks' folder so that Sphinx copies them; ``[]`` outside a checkout."""
    root, project = Path(results_dir), project_root()
    try:  # no links outside a checkout of the book, or for results outside it
        rel = Path("..") / root.resolve().relative_to(project.resolve())
    except (ValueError, TypeError, AttributeError):
        return []
    files = sorted(p for p in (root / notebook).glob("*") if p.suffix in (".parquet", ".csv") and not p.name.startswith("."))
    # the summary notebook writes these after the family chapters run; the book is built after it
    files += [root / f for f in ("summary.csv", "scorecard.csv")]
    out = []
    for p in files:
        r = (rel / p.relative_to(root)).as_posix()
        out.append(f"{{download}}`{p.name} <{r}>`")
    return out
