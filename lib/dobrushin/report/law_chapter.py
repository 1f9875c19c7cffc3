"""The chapter on the law of the random baseline (``notebooks/baseline_law.ipynb``), one method per section.

``LawChapter(_params)`` takes the notebook's resolved parameters; the methods run in the chapter's
order: :meth:`exact` (the bounds and the exact values at n = 2, 3), :meth:`small_n` (their simulation),
:meth:`symmetry` (the grid over every ensemble and size, ``law.csv``), :meth:`curve`, :meth:`approach`,
:meth:`mixed`, :meth:`mixed_text`, :meth:`typical`, :meth:`rate`, :meth:`token_counts` (the token counts of
the measured models, read from their configurations), :meth:`reference` (the baseline at those token counts,
``reference.csv``), :meth:`downloads` and :meth:`finish`.
"""
from __future__ import annotations

from . import law_figures as LF
from . import page as F
from .baseline_chapter import RandomMatrixChapter
from .claims import band


def _display(*objs):
    from IPython.display import display

    display(*objs)


def _markdown(text: str):
    from IPython.display import Markdown

    _display(Markdown(text))


class LawChapter(RandomMatrixChapter):
    """The baseline-law chapter's sections; ``params`` are the notebook's resolved parameters."""

    notebook = "baseline_law"

    def __init__(self, params):
        super().__init__(params)
        self.exact_values = self.small = self.grid = self.ref = self.reference_df = None

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

    # ---------------------------------------------------------------- exact values
    def exact(self):
        import sympy as sp

        from ..random import ensembles as E

        p_, q_ = sp.symbols("p q", real=True)
        integral = sp.integrate(sp.Piecewise((1, p_ >= q_), (0, True)), (q_, 0, 1), (p_, 0, 1))
        self.exact_values = exact = {n: E.exact_probability(n) for n in (2, 3)}
        _display(F.table(LF.bounds_table(10), caption="The universal bounds of the corollary for small $n$ (exact fractions).", name="tab-law-bounds"))
        _markdown(
            f"Symbolic integration of $[p\\ge q]$ over the unit square (rows $(p,1-p)$, $(q,1-q)$ uniform) gives "
            f"${sp.latex(integral)}$; the column-averaging formula evaluated exactly with sympy gives "
            f"${sp.latex(exact[2])}$ at $n=2$ and ${sp.latex(exact[3])}$ at $n=3$. " + LF.bound_text(band("baseline"))
        )

    def small_n(self):
        import numpy as np

        from ..random import ensembles as E

        p = self.p
        small = E.run_grid([(e, n, p.small_trials) for e in p.ensembles for n in (2, 3)], p.seed, check=True, cache=self.cache)
        small["exact"] = small["n"].map({n: float(v) for n, v in self.exact_values.items()})
        small["z"] = (small["p"] - small["exact"]) / np.sqrt(small["exact"] * (1 - small["exact"]) / small["trials"])
        self.small = small
        _markdown(LF.small_n_text(small, p.small_trials))
        _display(F.details(f"The {len(small)} cells at n = 2 and 3", F.table(
            small[["ensemble", "n", "trials", "holds", "p", "ci_low", "ci_high", "exact", "z", "rb_p_holds", "ties", "disagreements"]],
            caption="Simulation at $n=2$ and $n=3$ against the exact values (Wilson 95% intervals; z in standard errors).",
            name="tab-law-small", drop_constant=True)))
        E.write_table(small.drop(columns=["exact", "z"]), self.out_dir / "law_small_n.csv", self.params)

    # ---------------------------------------------------------------- the symmetry
    def symmetry(self):
        import pandas as pd

        from ..random import ensembles as E
        from ..random import law

        p = self.p
        plan = {(e, n): self.trials_at(n) for e in p.ensembles for n in p.ns}
        plan.update({(e, n): t for e in p.large_ensembles for n, t in p.large_ns.items()})  # large sizes override
        cells = [(e, n, t) for (e, n), t in plan.items()]
        grid = E.run_grid(cells, p.seed, check=lambda n: n <= p.check_max_n, cache=self.cache)
        grid = pd.concat([self.small, grid], ignore_index=True).drop(columns=["exact", "z"])
        self.grid = grid = grid.sort_values(["ensemble", "n"]).reset_index(drop=True)
        E.write_table(grid, self.out_dir / "law.csv", self.params)
        g = grid.copy()
        g["half_mixed"] = (1 - g["p_mixed"]) / 2
        g["z_swap"] = law.swap_z(g)  # standardised difference holds − both reversed
        ok = g[g["n"] > 2]
        _markdown(
            f"Across {len(ok)} (ensemble, $n$) cells with $n\\ge3$ the standardised difference between the fractions "
            f"that hold and that are both reversed has mean {ok['z_swap'].mean():.2f} and standard deviation "
            f"{ok['z_swap'].std():.2f} (a fair test gives about 0 and 1); the largest absolute value is "
            f"{ok['z_swap'].abs().max():.2f}. All {len(ok)} cells are in the collapsed table below."
        )
        _display(F.details(f"All {len(ok)} cells with n ≥ 3", F.table(
            ok[["ensemble", "n", "trials", "p_holds", "p_both_reversed", "half_mixed", "z_swap"]],
            columns={"p_holds": "holds", "p_both_reversed": "both reversed", "half_mixed": "½(1 − mixed)", "z_swap": "z"},
            caption="Fractions of matrices that hold, that are both reversed, and half the complement of mixed; z is the standardised difference of the first two.",
            name="tab-law-swap")))

    # ---------------------------------------------------------------- large n
    def curve(self):
        return F.figure(LF.curve_figure(self.grid, self.p.ensembles), notebook="baseline_law", name="curve", width="full",
                        caption="Left: $P(\\text{holds})$ estimated by the mean column-averaged score, with 95% Student-$t$ bands, for each ensemble, between the universal bounds (dashed) and with the limit $\\tfrac14$ (dotted); stars: the exact values $\\tfrac12$ and $\\tfrac13$. Right: the direct fraction that hold minus the column-averaged estimate, in binomial standard errors; the two estimate the same number, so about 95% of the points should lie in the grey band.",
                        alt="Two panels: probability that the condition holds against matrix size for six ensembles, converging towards one quarter; and standardised differences between two estimators, scattered around zero.")

    def approach(self):
        grid, ens = self.grid, self.p.ensembles
        _markdown(LF.curve_text(grid, self.p.target_halfwidth))
        _display(F.table(LF.approach_table(grid, ens), name="tab-law-approach", digits=4,
                         caption="How each ensemble approaches ¼: the column-averaged estimate at its largest simulated size (95% Student-$t$ interval), and the first simulated size where its interval lies entirely below ¼ (– if none)."))
        _markdown(LF.approach_text(grid, ens))

    def mixed(self):
        return F.figure(LF.mixed_figure(self.grid, self.p.ensembles), notebook="baseline_law", name="mixed-correlation-split", width="full",
                        caption="Left: $P(\\text{mixed})$, tending to $\\tfrac12$. Middle: the correlation of the two comparisons $X$ and $Y$ against its prediction $4P(\\text{holds})-1$, tending to 0. Right: the split constant $c_n$ of the attaining pair (log axis) with the first-order fixed-pair values $c_W$ dashed and $\\tfrac14$ dotted. Lines are column-averaged estimates, dots direct fractions with 95% intervals (for the correlation: the phi coefficient of $X$ and $Y$, ±1.96/√trials).",
                        alt="Three panels against matrix size for six ensembles: the probability of a mixed pair approaching one half, the correlation approaching zero, and the split constant on a log axis.")

    def mixed_text(self):
        _markdown(LF.mixed_text(self.grid, self.p.ensembles))

    def typical(self):
        from ..random import law

        p = self.p
        typ = law.typical_pairs(self.grid, p.ensembles, p.typical_ns, p.typical_matrices, p.seed + 7)
        _display(F.table(LF.typical_table(typ), name="tab-law-typical",
                         caption=f"Fixed pairs of rows (rows 0–1, 2–3, … of {p.typical_matrices} matrices per cell) against the attaining pair at the same $n$: the split constant with 95% half-widths, and their gap."))
        _markdown(LF.typical_text(typ, p.ensembles))

    def rate(self):
        grid, ens = self.grid, self.p.ensembles
        F.figure(LF.rate_figure(grid, ens), notebook="baseline_law", name="rate",
                 caption="The approach to $\\tfrac14$ on the scale of the conjecture: $(n-1)(P(\\text{holds})-\\tfrac14)=\\tfrac14-c_n$ with 95% intervals for the ensembles whose first-order constant $c_W$ is of order one; dashed: the conjectured limits $\\tfrac14-c_W$.",
                 alt="Line plot with error bars of n minus one times the excess over one quarter against matrix size, one line per ensemble, with dashed horizontal conjectured limits.")
        _display(F.table(LF.rate_table(grid, ens), name="tab-law-rate", caption="The largest simulated size of each ensemble on the scale of the conjecture."))
        _markdown(LF.rate_text(grid, ens))

    # ---------------------------------------------------------------- the reference table
    def token_counts(self):
        """The sentence on the token counts of the measured models (:func:`law_figures.model_tokens`), at the
        image sizes the vision chapters measure at in this profile."""
        _markdown(LF.token_counts_text(LF.model_tokens(LF.chapter_image_sizes(self.p.profile))))

    def sentence_tokens(self):
        """The fewest and most content tokens of the language chapter's sentences: the last run of this profile in
        the results folder (this chapter runs before the language chapter, so in a build that runs both, the
        previous build's run), else the published one; None without either."""
        from pathlib import Path

        from ..store.paths import published_dir, results_dir
        from .results_loading import token_range

        own = Path(self.p.results_dir) if self.p.results_dir is not None else results_dir()
        for folder in (own, published_dir()):
            got = None if folder is None else token_range(folder, "language", "content", self.p.profile)
            if got is not None:
                return got
        return None

    def reference(self):
        import pandas as pd

        from ..random import ensembles as E

        p = self.p
        ref_cells = [(e, n, self.ref_trials(n)) for e in p.reference_ensembles for n in p.reference_ns]
        self.ref = ref = E.run_grid(ref_cells, p.seed, check=lambda n: n <= p.check_max_n, cache=self.cache)
        self.reference_df = reference_df = pd.DataFrame({
            "n": ref["n"], "ensemble": ref["ensemble"], "p": ref["rb_p_holds"], "ci_low": ref["rb_ci_low"],
            "ci_high": ref["rb_ci_high"], "estimator": "column-averaged score, Student-t 95%", "matrices": ref["trials"],
            "p_direct": ref["p"], "direct_ci_low": ref["ci_low"], "direct_ci_high": ref["ci_high"],
        })
        E.write_table(reference_df, self.out_dir / "reference.csv", self.params)
        sentences = self.sentence_tokens()
        picks = [n for n in LF.reference_picks(sentences) if n in set(p.reference_ns)]
        _display(F.table(reference_df.loc[reference_df["n"].isin(picks), ["n", "ensemble", "p", "ci_low", "ci_high", "matrices", "estimator"]],
                         drop_constant=True, digits=4, name="tab-law-reference",
                         caption=f"The baseline at {len(picks)} of the {len(set(p.reference_ns))} token counts of the reference table: those the sentence below compares (the models' content tokens, "
                                 + ("the fewest and most content tokens of the measured sentences where the table has them, " if sentences is not None else "")
                                 + "and the vision models with their special tokens); the full table is in the collapsed block below and in `results/baseline/reference.csv`."))
        _display(F.details(f"All {len(reference_df)} rows of the reference table", F.table(
            reference_df[["n", "ensemble", "p", "ci_low", "ci_high", "matrices", "p_direct", "estimator"]],
            drop_constant=True, digits=4,
            caption="Every row of the reference table: per token count n and ensemble, the column-averaged estimate "
                    "p with its Student-t 95% interval (ci_low, ci_high), and the direct count over the same "
                    "matrices (p_direct; its 95% interval is in `results/baseline/reference.csv`).")))
        rd = reference_df[reference_df["ensemble"] == "dirichlet(1)"].set_index("n")

        band_lo, band_hi = band("baseline")  # the paper's range (dobrushin.report.claims)
        n_in = int(((reference_df["p"] >= band_lo) & (reference_df["p"] <= band_hi)).sum())
        half_max = ((reference_df["ci_high"] - reference_df["ci_low"]) / 2).max()
        _markdown(
            LF.reference_sizes_text(rd["p"], sentences)
            + f"{n_in} of the {len(reference_df)} "
            f"reference values lie inside the paper's {LF.pct(band_lo, 0)}–{LF.pct(band_hi, 0)} band; the band is "
            f"{(band_hi - band_lo) / (2 * half_max):.0f} times wider than the largest 95% interval of a reference value "
            f"(half-width {half_max:.4f}), so the paper's range is far too coarse to serve as the reference."
        )

    # ---------------------------------------------------------------- end of the chapter
    def finish(self):
        """The provenance block: parameters, versions, device and timings."""
        import pandas as pd
        import sympy as sp

        all_cells = pd.concat([self.grid, self.ref], ignore_index=True)
        return self._provenance({"sympy": sp.__version__},
                                {"CPU of all cells (cached ones at the cost of the run that made them)": float(all_cells["cpu_s"].sum())})
