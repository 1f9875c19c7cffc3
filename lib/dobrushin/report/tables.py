"""Tables from the tidy result tables: fractions with intervals, the κ table, the rollout summary."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd

from ..math.stats import cluster_sums, clustered, wilson
from .names import VARIANT_TABLE_LABELS, WEIGHTS_SHORT, display_name, pct, range_text, runs, weights_label


def input_sums(part: pd.DataFrame) -> dict:
    """``dobrushin.math.stats.cluster_sums`` of a result table's rows, clustered by ``input_id``."""
    if not len(part):
        return cluster_sums([], [])
    g = part.groupby(part["input_id"].astype(str))["holds"]
    return cluster_sums(g.sum().to_numpy(), g.size().to_numpy())


def fractions(table: pd.DataFrame, by: Sequence[str] = ("model", "weights", "variant")) -> pd.DataFrame:
    """Fraction holding per group (first-appearance order): ``*by, k, n, fraction``, Wilson 95% ``ci_low, ci_high``
    and input-clustered ``cl_low, cl_high`` (Wilson's when there is no ``input_id``)."""
    by = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, g in table.groupby(by, sort=False, observed=True):  # groups in order of first appearance
        key = key if isinstance(key, tuple) else (key,)
        k, n = int(g["holds"].sum()), len(g)
        p, lo, hi = wilson(k, n)
        _, clo, chi = clustered(input_sums(g)) if "input_id" in g else (p, lo, hi)
        rows.append((*key, k, n, p, lo, hi, clo, chi))
    return pd.DataFrame(rows, columns=[*by, "k", "n", "fraction", "ci_low", "ci_high", "cl_low", "cl_high"])


def fractions_caption(unit: str = "input") -> str:
    """The caption of every chapter's table of fractions (``fraction_grid``); ``unit``: what an input is."""
    return (f"Share of ({unit}, layer) pairs where the equality condition holds, with its 95% interval clustered by "
            f"{unit} (the one the verdicts use); pairs: those of the row's first measured column.")


def fraction_grid(summ: pd.DataFrame) -> pd.DataFrame:
    """One row per model of ``fractions`` output ``summ``: a column per weights and variant, each cell the fraction
    with its clustered interval, and ``pairs`` (the row's first cell's)."""
    rows = {}
    for r in summ.itertuples():
        d = rows.setdefault(r.model, {"model": display_name(r.model), "pairs": f"{int(r.n):,}"})
        d[f"{WEIGHTS_SHORT.get(r.weights, r.weights)}, {VARIANT_TABLE_LABELS.get(r.variant, r.variant)}"] = (
            f"{pct(r.fraction)} [{range_text(r.cl_low, r.cl_high)}]")
    out = pd.DataFrame(list(rows.values()))
    return out[[c for c in out.columns if c != "pairs"] + ["pairs"]].fillna("—") if len(out) else out


def rollout_summary(roll: pd.DataFrame) -> pd.DataFrame:
    """Per model x weights x variant: inputs, medians of κ(R), bound and κ(R)/bound with its two factors
    κ(R)/∏κ(F_ℓ) (``median_submult``) and ∏κ(F_ℓ)/bound (``median_layers``), and ``violations`` of
    κ(R) ≤ ∏κ(F_ℓ) ≤ ∏½(1+κ(Ã_ℓ)) (must be 0; tolerance 1e-9)."""
    if roll.empty:
        return pd.DataFrame(columns=["model", "weights", "variant", "inputs", "median_kappa_rollout", "median_bound",
                                     "median_ratio", "median_submult", "median_layers", "violations"])
    r = roll.assign(ratio=roll["kappa_rollout"] / roll["bound"], submult=roll["kappa_rollout"] / roll["factor_product"],
                    layers=roll["factor_product"] / roll["bound"],
                    bad=(roll["kappa_rollout"] > roll["factor_product"] + 1e-9)
                    | (roll["factor_product"] > roll["bound"] + 1e-9))
    g = r.groupby(["model", "weights", "variant"], observed=True)
    return g.agg(inputs=("input_id", "count"), median_kappa_rollout=("kappa_rollout", "median"),
                 median_bound=("bound", "median"), median_ratio=("ratio", "median"),
                 median_submult=("submult", "median"), median_layers=("layers", "median"),
                 violations=("bad", "sum")).reset_index()


def value_range(x) -> str:
    """``min–max`` of ``x`` with two decimals each (``0.05–0.07``; one value when they agree)."""
    lo, hi = float(np.min(x)), float(np.max(x))
    return f"{lo:.2f}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}–{hi:.2f}"


#: a layer whose median κ(A) is below this is near-uniform: both sides of the layer bound are close to ½ there
NEAR_UNIFORM = 0.1


def near_uniform_layers(kappa_per_layer, threshold: float = NEAR_UNIFORM) -> str:
    """The 1-based layers whose median κ(A) is below ``threshold``, as runs (``"2–12"``), or ``"none"``."""
    near = [int(i) + 1 for i, v in pd.Series(kappa_per_layer).items() if v < threshold]
    spans = runs(near, range(1, max(near, default=0) + 1))
    return ", ".join(str(a) if a == b else f"{a}–{b}" for a, b in spans) or "none"


def kappa_table(content: pd.DataFrame, random_kappa: dict, n_tokens: dict) -> pd.DataFrame:
    """One row per (model, weights) of ``content``: median κ(A) range over layers, median random κ, fraction holding
    and near-uniform layers."""
    rows = []
    for (m, w), g in content.groupby(["model", "weights"], sort=False):
        per = g.groupby("layer")["kappa"].median()
        rows.append({"model": display_name(m), "weights": weights_label(w), "κ(A) per layer": value_range(per),
                     "random κ": f"{np.median(random_kappa[m]):.2f} (n = {n_tokens[m]})",
                     "holds": pct(float(g["holds"].mean())), "near-uniform layers": near_uniform_layers(per)})
    return pd.DataFrame(rows)


def kappa_caption(rows: str) -> str:
    """The caption of a ``kappa_table``; ``rows``: what a row is."""
    return (f"{rows}, content tokens: the median κ(A) per layer (lowest–highest over layers), κ of random matrices of "
            f"the same n, the fraction holding, and the layers whose median κ(A) is below {NEAR_UNIFORM:g} "
            "(near-uniform: there the layer bound is nearly tight in value whether the condition holds or not).")
