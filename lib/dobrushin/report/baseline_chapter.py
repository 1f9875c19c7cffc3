"""The random-matrix baseline chapter (``notebooks/baseline.ipynb``): ``BaselineChapter(params)`` computes (or reads
from ``<results>/baseline/cells``) the uniform-row curve and the ensembles; each method returns what its cell shows."""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from ..random import ensembles as E
from . import baseline_figures as BF
from . import page as F
from .display import Section
from .claims import band, band_label

UNI_COLS = ["n", "trials", "holds", "p", "ci_low", "ci_high", "checked", "disagreements"]


def trials_for(n: int, small: int, large: dict) -> int:
    """Matrices per size: ``small`` up to n = 64, ``large[n]`` above."""
    if n <= 64:
        return small
    if n not in large:
        raise ValueError(f"no trial count for n={n}; add it to the parameters")
    return large[n]


class RandomMatrixChapter:
    """Shared by the two random-matrix chapters: results folder, cell cache, kernel backend, recorded parameters."""

    def __init__(self, params):
        import numpy as np

        from ..math import kernel
        from ..random import cells as C
        from ..store.paths import results_dir

        self._t0, self._c0 = time.perf_counter(), time.process_time()
        self.p = params
        self.results = Path(params.results_dir or results_dir())
        self.out_dir = C.baseline_dir(self.results)
        self.cache = self.out_dir / "cells"
        self.backend = kernel.backend(np.zeros((1, 2, 2)))
        self.params = params.as_dict(exclude=("results_dir",))  # what the result files record

    def downloads(self):
        """The download links of ``results/baseline/``, which both chapters write, and of the summary's files."""
        from .insight import show_downloads

        return show_downloads("baseline", self.results)

    def _how_run(self, timings: dict):
        return F.how_run(self.params, device=f"CPU (kernel backend {self.backend})",
                         timings={"wall": time.perf_counter() - self._t0,
                                  "CPU of this process": time.process_time() - self._c0, **timings})


class BaselineChapter(RandomMatrixChapter):
    """The baseline chapter's sections; ``params`` are the notebook's resolved parameters."""

    def __init__(self, params):
        """Compute the Dirichlet(1) curve and the extra ensembles and write ``baseline.csv`` with every row."""
        from ..random import cells as C

        super().__init__(params)
        p = self.p
        cells = [("dirichlet(1)", n, trials_for(n, p.trials_small, p.trials_large)) for n in p.ns]
        self.uni = C.run_grid(cells, p.seed, check=p.check_theorem, cache=self.cache)
        extra = [f"dirichlet({a:g})" for a in p.alphas] + [f"softmax_gaussian({t:g})" for t in p.temperatures]
        cells = [(e, n, trials_for(n, p.ensemble_trials_small, p.ensemble_trials_large))
                 for e in extra for n in p.ensemble_ns]
        ens_df = C.run_grid(cells, p.seed, check=p.check_theorem, cache=self.cache)
        self.allres = pd.concat([self.uni, ens_df], ignore_index=True)
        C.write_table(self.allres, self.out_dir / "baseline.csv", self.params)
        self.order = ["dirichlet(1)"] + extra  # the ensemble names run_grid writes (Ensemble.name)
        self.labels = {e: E.parse_ensemble(e).label for e in self.order}

    # ---------------------------------------------------------------- uniform rows
    def uniform_figure(self):
        p, uni = self.p, self.uni
        return F.figure(BF.uniform_figure(uni, band("baseline"), band_label("baseline"), float(E.exact_probability(2))),
                        notebook="baseline", name="dirichlet1", results_dir=self.results,
                        caption=f"Fraction of random matrices with rows uniform on the simplex for which the equality condition holds, against the matrix size $n$ ({len(p.ns)} sizes, {int(uni['trials'].min()):,}–{int(uni['trials'].max()):,} matrices per size; Wilson 95% error bars). Shaded: the paper's range. The curve starts at the exact value $\\tfrac12$ (star) and approaches $\\tfrac14$ (dotted).",
                        alt="Line plot with error bars of the probability that the condition holds against matrix size on a log axis, falling from one half at n equal 2 towards one quarter, with the paper's band shaded.")

    def uniform_numbers(self) -> Section:
        return Section(F.details("The numbers behind the figure", F.table(
            self.uni[UNI_COLS], name="tab-baseline-uniform", caption="Rows uniform on the simplex: matrices, how many "
            "hold, the fraction with its Wilson 95% interval, and the direct check of the theorem."))).glue(
            "uni", BF.uniform_values(self.uni, band("baseline")))

    # ---------------------------------------------------------------- other ensembles
    def ensembles_figure(self):
        fig = BF.ensembles_facets(self.allres, self.order, self.labels, band("baseline"), band_label("baseline"))
        return F.figure(fig, notebook="baseline", name="ensembles", width="full", results_dir=self.results,
                        caption="The baseline for six ensembles of random row-stochastic matrices, one panel per ensemble: the fraction for which the equality condition holds against $n$, with Wilson 95% error bars. The thin grey line repeats Dirichlet(1) in every other panel; shaded: the paper's range; dotted: $\\tfrac14$.",
                        alt="Six small line plots, one per ensemble (Dirichlet with alpha 1, 0.1 and 10, softmax of Gaussian logits at temperatures 0.3, 1 and 3), each showing the fraction that holds against matrix size with error bars.")

    def ensembles_numbers(self) -> Section:
        return Section().glue("ens", BF.ensembles_values(self.allres, self.labels))

    # ---------------------------------------------------------------- the law and the theorem on every matrix
    def law_bound(self) -> Section:
        """What the appendix's universal upper bound says about the paper's band (glued)."""
        return Section().glue("bound", BF.bound_values(band("baseline")))

    def theorem_check(self):
        """Glue the check's counts; with ``check_theorem``, fail unless every matrix was checked and agreed."""
        tot = self.allres[["trials", "checked", "disagreements"]].sum()
        if self.p.check_theorem:
            if int(tot["checked"]) != int(tot["trials"]):
                raise AssertionError(f"{int(tot['checked'])} of {int(tot['trials'])} matrices were checked")
            if int(tot["disagreements"]) != 0:
                raise AssertionError("the theorem disagrees with the direct computation")
        return Section().glue("thm", BF.theorem_check_values(self.allres))

    # ---------------------------------------------------------------- end of the chapter
    def finish(self):
        """The how-this-was-run block: parameters, versions, device and timings."""
        allres = self.allres
        return self._how_run({"cells computed now (CPU)": float(allres.loc[~allres["cached"], "cpu_s"].sum())})
