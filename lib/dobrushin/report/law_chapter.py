"""The appendix on the law of the random baseline (``notebooks/baseline_law.ipynb``): ``LawChapter(params)`` computes
(or reads from the cache) every cell and writes ``law_small_n.csv``, ``law.csv`` and ``reference.csv`` (the baseline
at the models' token counts, which the summary reads); each method returns what its cell shows."""
from __future__ import annotations

import pandas as pd

from . import law_figures as LF
from . import page as F
from .baseline_chapter import RandomMatrixChapter


class LawChapter(RandomMatrixChapter):
    """The baseline-law appendix's sections; ``params`` are the notebook's resolved parameters."""

    def __init__(self, params):
        """Run (or read from the cache) every cell of the appendix and write its three tables."""
        from ..random import cells as C

        super().__init__(params)
        p = self.p
        check = lambda n: n <= p.check_max_n
        small = C.run_grid([(e, n, p.small_trials) for e in p.ensembles for n in (2, 3)], p.seed, check=True,
                           cache=self.cache)
        C.write_table(small, self.out_dir / "law_small_n.csv", self.params)

        plan = {(e, n): self.trials_at(n) for e in p.ensembles for n in p.ns}
        plan.update({(e, n): t for e in p.large_ensembles for n, t in p.large_ns.items()})  # large sizes override
        grid = C.run_grid([(e, n, t) for (e, n), t in plan.items()], p.seed, check=check, cache=self.cache)
        grid = pd.concat([small, grid], ignore_index=True)
        self.grid = grid = grid.sort_values(["ensemble", "n"]).reset_index(drop=True)
        C.write_table(grid, self.out_dir / "law.csv", self.params)

        ref_cells = [(e, n, self.ref_trials(n)) for e in p.reference_ensembles for n in p.reference_ns]
        self.ref = ref = C.run_grid(ref_cells, p.seed, check=check, cache=self.cache)
        C.write_table(pd.DataFrame({
            "n": ref["n"], "ensemble": ref["ensemble"], "p": ref["rb_p_holds"], "ci_low": ref["rb_ci_low"],
            "ci_high": ref["rb_ci_high"], "estimator": "column-averaged score, Student-t 95%", "matrices": ref["trials"],
            "p_direct": ref["p"], "direct_ci_low": ref["ci_low"], "direct_ci_high": ref["ci_high"],
        }), self.out_dir / "reference.csv", self.params)

    def trials_at(self, n: int) -> int:
        """Matrices at size ``n``: the value of the smallest key of ``trials`` that is at least ``n``."""
        trials = self.p.trials
        keys = sorted(trials)
        for k in keys:
            if n <= k:
                return trials[k]
        raise ValueError(f"no trial count for n={n}; extend the parameter 'trials' (has {keys})")

    def ref_trials(self, n: int) -> int:
        lo_n, hi_n = sorted(self.p.reference_trials)
        return self.p.reference_trials[lo_n] if n <= lo_n else self.p.reference_trials[hi_n]

    # ---------------------------------------------------------------- sections
    def exact(self):
        return F.table(LF.bounds_table(10), name="tab-law-bounds",
                       caption="The universal bounds of the corollary for small $n$ (exact fractions); at $n=2$ and $n=3$ they meet.")

    def curve(self):
        return F.figure(LF.curve_figure(self.grid, self.p.ensembles), notebook="baseline_law", name="curve", width="full",
                        results_dir=self.results,
                        caption="Left: $P(\\text{holds})$ by the mean column-averaged score (95% Student-$t$ bands) between the universal bounds (dashed), with the limit $\\tfrac14$ (dotted) and the exact $\\tfrac12$, $\\tfrac13$ (stars). Right: the direct fraction that hold minus that estimate, in binomial standard errors (about 95% should lie in the grey band).",
                        alt="Two panels: probability that the condition holds against matrix size for six ensembles, converging towards one quarter; and standardised differences between two estimators, scattered around zero.")

    def rate(self):
        return F.table(LF.rate_table(self.grid, self.p.ensembles), name="tab-law-rate", digits=4,
                       caption="The conjecture's scale at the largest simulated size of each ensemble with $c_W$ of order one: $\\tfrac14-c_n$ with its 95% interval, against the conjectured limit $\\tfrac14-c_W$.")

    # ---------------------------------------------------------------- end of the page
    def finish(self):
        """The how-this-was-run block: parameters, versions, device and timings."""
        cpu = float(self.grid["cpu_s"].sum() + self.ref["cpu_s"].sum())
        return self._how_run({"CPU of all cells (cached ones at the cost of the run that made them)": cpu})
