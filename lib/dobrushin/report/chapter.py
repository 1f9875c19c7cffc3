"""The family chapters (DINOv2, language models, supervised ViTs): ``FamilyChapter`` presents what
``measure_family`` measured, one section per method: the fractions table for every measured model, the other
sections for the *featured* models (trained weights measured) and their untrained controls.  ``extra_size_models``
are measured again at ``extra_image_size``, stored as ``<model>@<size>px``."""
from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Optional

import pandas as pd

from ..models.provenance import is_proxy, original_from_package
from ..store import paths
from ..store.results import ResultStore, atomic_write_csv
from . import page as F
from . import plots
from .names import WEIGHTS_LABELS, display_name, weights_label
from .tables import fraction_grid, fractions, fractions_caption, rollout_summary
from .insight import InsightSections, near_ties
from ..experiments.results_loading import baseline_for
from .display import Section
from ..experiments.chapter_runs import extra_models, measure_family, trained_ok


def _provenance(run) -> dict:
    """The provenance of a run's trained weights (its ``runs`` record, else its manifest entry's)."""
    return (run.runs.get("pretrained", {}).get("provenance")
            or (run.entry.get("provenance") or {}).get("pretrained") or {})


def weights_kind(provenance: Optional[dict]) -> str:
    """``"proxy"`` (packaged stand-in), ``"original"`` (hub checkpoint, or a package with it bit for bit) or ``""``."""
    prov = dict(provenance or {})
    if is_proxy(prov):
        return "proxy"
    if prov.get("source") in ("hub", "cache", "timm") or original_from_package(prov):
        return "original"
    return ""


def _alt_panels(models) -> str:
    return ", ".join(display_name(m) for m in models)


def rollout_check(rs: pd.DataFrame, name: str) -> Section:
    """The whole-rollout bound on content tokens from ``rollout_summary`` output ``rs`` (empty if no such rows)."""
    c = rs[rs["variant"] == "content"]
    if not len(c):
        return Section()
    shown = c.assign(model=c["model"].map(display_name), weights=c["weights"].map(WEIGHTS_LABELS))
    return Section(F.table(shown[["model", "weights", "inputs", "violations", "median_ratio", "median_submult",
                                  "median_layers", "median_bound"]],
                           columns={"inputs": "rollouts", "median_ratio": "median κ(R) / bound",
                                    "median_submult": "κ(R) / ∏κ(F)", "median_layers": "∏κ(F) / bound",
                                    "median_bound": "median bound"},
                           caption="The whole-rollout bound on content tokens: violations (0 by the theorem), the "
                                   "median of κ(R) / bound and of its two factors, submultiplicativity κ(R)/∏κ(F) "
                                   "and the layer bounds ∏κ(F)/bound, and the median bound.", name=name))


class FamilyChapter(InsightSections):
    """One family chapter from ``FamilyParameters``: loads the inputs and measures every model (reusing cached
    results); each section method returns a ``Section``."""

    def __init__(self, params, title: str):
        from ..experiments.params import FamilyParameters
        from ..experiments.environment import resolve_device

        if not isinstance(params, FamilyParameters):
            raise TypeError("params must be a family chapter's parameters (dobrushin.experiments.params.resolve), "
                            f"got {type(params).__name__}")
        if params.kind not in ("image", "text"):
            raise ValueError(f"kind must be 'image' or 'text', got {params.kind!r}")
        unknown = [m for m in extra_models(params) if m not in params.models]
        if unknown:
            raise ValueError(f"extra_size_models {unknown} are not in models {list(params.models)}")
        warnings.filterwarnings("ignore", message="IProgress not found")
        self.t_start = time.perf_counter()
        self.params, self.title = params, title
        self.notebook, self.kind = params.notebook, params.kind
        self.results = Path(params.results_dir) if params.results_dir else paths.results_dir()
        self.store = ResultStore(self.results, self.notebook)
        self.device = resolve_device(params.device)
        # progress goes to the kernel's original stderr (make book's terminal) and progress.log, never the notebook
        self.config = params.measure_config(progress=True)
        m = measure_family(params, self.store, self.config, self.device)
        self.input_set, self.data_status, self.runs = m.input_set, m.data_status, m.runs
        self.table, self.roll = m.table, m.roll
        self.summ = fractions(self.table, ("model", "weights", "variant")) if len(self.table) else pd.DataFrame()
        if len(self.summ):
            atomic_write_csv(self.results / self.notebook / "fractions.csv", self.summ)
        self.timings = {"measure (all models, incl. cache reads)": m.wall_s}

    # -- which models each section shows ----------------------------------------------------------
    @property
    def featured(self) -> list:
        """Ids of the models whose trained weights were measured; all measured models when none was."""
        ok = [r.model_id for r in self.runs if trained_ok(r)]
        return ok or [r.model_id for r in self.runs if len(r.table)]

    def _sub(self, df: pd.DataFrame) -> pd.DataFrame:
        return df[df["model"].isin(self.featured)] if len(df) else df

    def _fig(self, out: Section, fig, name: str, caption: str, alt: str, n_panels: int = 2) -> None:
        """Add ``fig`` to ``out`` as the chapter's figure ``name``."""
        if n_panels == 1:  # one panel in the text column: not taller than 0.62 of its width
            w, h = fig.get_size_inches()
            fig.set_size_inches(w, min(h, 0.62 * w))
        out.append(F.figure(fig, notebook=self.notebook, name=name, caption=caption, alt=alt,
                            width="full" if n_panels > 1 else "column", results_dir=self.results))

    # -- sections -------------------------------------------------------------------------------
    def inputs(self) -> Section:
        """What the inputs are; when the data is unavailable, one banner."""
        if self.input_set is None:
            return Section(F.banner("Not reproduced in this build", self.data_status))
        out = Section().md(f"Inputs: {F.scrub_paths(self.input_set.describe())}.")
        if self.params.n_inputs is not None and self.input_set.available < self.params.n_inputs:
            what = "images" if self.kind == "image" else "sentences"
            out.md(f"The source holds only {self.input_set.available} {what}, fewer than the {self.params.n_inputs} "
                   "asked for: all of them are used.")
        return out

    def status(self):
        """A banner naming the models without trained weights (and why), then what was measured and the provenance."""
        out = Section()
        missing = [r for r in self.runs if r.status != "ok"]
        if missing:
            why = "; ".join(f"{r.model_id}: " + r.status.removeprefix("weights unavailable: ").replace(
                r.model_id, "the checkpoint") for r in missing)
            title = ("Not reproduced in this build" if len(missing) == len(self.runs)
                     else f"{len(missing)} of {len(self.runs)} models not reproduced in this build")
            out.append(F.banner(title, f"Trained weights unavailable for {why}. Untrained controls (same architecture, "
                                "seeded random initialisation) say nothing about the trained networks."))
        def cell(info):
            return ("not requested" if info is None else f"{int(info.get('n_inputs', 0))} inputs"
                    if info.get("status") == "ok" else str(info.get("status")).split(":")[0])
        if self.runs:
            shown = pd.DataFrame([{"model": display_name(r.model_id), "trained weights": cell(r.runs.get("pretrained")),
                                   "untrained control": cell(r.runs.get("untrained"))} for r in self.runs])
            out.append(F.table(shown, caption="What this build measured, per model: its trained weights and its "
                                            "untrained control (same architecture, seeded random initialisation).",
                             name=f"tab-{self.notebook}-status"))
        rows = []
        for r in self.runs:
            prov = _provenance(r)
            if trained_ok(r) and prov:
                rows.append({"model": display_name(r.model_id), "weights": weights_kind(prov) or "?",
                             "source": prov.get("source", ""), "package": prov.get("package", "–"),
                             "version": prov.get("version", "–"), "file": prov.get("file", "–"),
                             "sha256": prov.get("sha256") or "–",
                             "checkpoint": original_from_package(prov) or prov.get("proxy_for") or "–"})
        if rows:
            prov_t = pd.DataFrame(rows).set_index("model").T.rename_axis(None).reset_index()
            prov_t.columns = ["", *prov_t.columns[1:]]
            out.append(F.table(prov_t, caption="Provenance of the trained weights (from the results manifest): the "
                             "package, its version and the SHA-256 of the weights file.",
                             name=f"tab-{self.notebook}-provenance"))
        return out

    def fractions(self):
        """The fraction of (input, layer) pairs where the condition holds, every measured model (a column per weights
        setting and variant, "—" where that weights setting was not measured), and the near-ties."""
        out = Section().glue(f"{self.notebook}-ties", near_ties(self.table))
        if not len(self.table):
            return out.md("No model could be measured in this build.")
        out.append(F.table(fraction_grid(self.summ), name=f"tab-{self.notebook}-fractions", caption=fractions_caption()))
        return out

    def depth(self):
        """Fraction holding per layer (random baseline drawn), and where in depth the content failures lie."""
        out = Section()
        if not len(self.table):
            return out
        t, models = self._sub(self.table), self.featured
        fig = plots.fraction_by_layer(t, models=models, baseline=baseline_for(t, self.results))
        self._fig(out, fig, "layers", f"{self.title}: fraction of inputs for which the equality condition holds, per "
                  "layer, with Wilson 95% bands (the legend names the lines). The grey dotted line, where the baseline "
                  "was computed, is the probability for a random row-stochastic matrix (Dirichlet(1) rows) of the "
                  "model's median number of content tokens. Layer 1 acts first.",
                  f"Line plots of the fraction of inputs where the equality condition holds against layer, one "
                  f"panel per model ({_alt_panels(models)}), with a horizontal random-baseline line.", len(models))
        rows = []
        for (m, w), g in t[t["variant"] == "content"].groupby(["model", "weights"], sort=False):
            fails = g[~g["holds"]]
            rows.append({"model": display_name(m), "weights": weights_label(w), "pairs": len(g), "failing": len(fails),
                         "in the second half": int((fails["layer"] >= (int(g["layer"].max()) + 1) / 2).sum())})
        out.append(F.table(pd.DataFrame(rows), name=f"tab-{self.notebook}-failures",
                           caption="Where the failures lie (content tokens): failing (input, layer) pairs, and how "
                                   "many of them lie in the second half of the network's layers."))
        return out

    def slack(self):
        """The slack of the layer bound per layer (symlog axis), and its quantiles."""
        out = Section()
        if not len(self.table):
            return out
        t = self._sub(self.table)
        fig = plots.slack_by_layer(t, variant="content", models=self.featured)
        self._fig(out, fig, "slack", f"{self.title}: distribution over inputs of the slack ½(1+κ(A)) − κ(½(I+A)) of the "
                                "layer bound per layer (content tokens; the legend names the boxes). The axis is "
                                f"symmetric-logarithmic, linear below {plots.SLACK_LINTHRESH:g}: slack 0 is the "
                                "equality case (a panel whose slack is 0 everywhere says “all zero”).",
                  "Box plots of the slack of the layer bound per layer on a symmetric log axis, one panel per "
                  f"model ({_alt_panels(self.featured)}).", len(self.featured))
        return out

    def rollout(self):
        """κ of the whole rollout against the product bound, per input."""
        out = Section()
        roll = self._sub(self.roll)
        if not len(roll):
            return out
        rs = rollout_summary(roll)
        models = [m for m in self.featured if (roll["model"] == m).any()]
        fig = plots.rollout_scatter(roll, variant="content", models=models)
        self._fig(out, fig, "rollout", f"{self.title}: per input, κ of the rollout of the restricted layers (y) against "
                                  "the product of the layer bounds (x), log–log, content tokens; the dotted diagonal "
                                  "is κ(R) = bound, and every point lies on or below it.",
                  f"Log-log scatter plots of kappa of the rollout against its bound, one panel per model "
                  f"({_alt_panels(models)}).", len(models))
        return out.include(rollout_check(rs, f"tab-{self.notebook}-rollout"))

    def finish(self):
        """The collapsed "How this chapter was run" block: parameters, versions, device, timings."""
        from ..experiments.environment import describe_device

        out = Section()
        wall = time.perf_counter() - self.t_start
        # keep the wall time of the last pass that measured: an all-cached pass (a rebuild) leaves it in place
        if not (self.runs and all(r.cached for r in self.runs) and "notebook_wall_s" in self.store.manifest()):
            self.store.update_manifest(notebook_wall_s=round(wall, 1))
        timings = dict(self.timings)
        for r in self.runs:
            for w, info in r.runs.items():
                if info.get("status") == "ok" and info.get("wall_s") is not None:
                    timings[f"{display_name(r.model_id)}, {weights_label(w)}: measure"
                            + (" (cached run)" if r.cached else "")] = info["wall_s"]
        timings["notebook wall time"] = round(wall, 1)
        out.append(F.how_run(self.params.recorded(), device=describe_device(self.device), timings=timings,
                             packages=("transformers", "timm", "dobrushin", "pandas", "matplotlib")))
        return out
