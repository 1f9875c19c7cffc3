"""Tables of the report, plain functions of the tidy result tables: fractions with their intervals,
per-head and rollout summaries, the status of each run, and everything a store holds."""
from __future__ import annotations

from typing import Sequence

import pandas as pd

from ..math.stats import cluster_sums, clustered, wilson
from ..store.results import WEIGHTS, ResultStore
from .names import VARIANT_TABLE_LABELS, display_name, pct


def fractions(table: pd.DataFrame, by: Sequence[str] = ("model", "weights", "variant")) -> pd.DataFrame:
    """Fraction of rows where the condition holds, per group, with its 95% intervals: Wilson's over rows
    (``ci_low``, ``ci_high``) and, where the table has ``input_id``, the one clustered by input that the verdicts
    use (``cl_low``, ``cl_high``: the layers of one input are not independent draws; Wilson's otherwise).

    Columns: ``*by, k, n, fraction, ci_low, ci_high, cl_low, cl_high``; groups in the order they first appear in
    ``table``.
    """
    by = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, g in table.groupby(by, sort=False, observed=True):  # groups in order of first appearance
        key = key if isinstance(key, tuple) else (key,)
        k, n = int(g["holds"].sum()), len(g)
        p, lo, hi = wilson(k, n)
        if "input_id" in g:
            per = g.groupby(g["input_id"].astype(str), sort=False)["holds"].agg(["sum", "count"])
            _, clo, chi = clustered(cluster_sums(per["sum"].to_numpy(), per["count"].to_numpy()))
        else:
            clo, chi = lo, hi
        rows.append((*key, k, n, p, lo, hi, clo, chi))
    return pd.DataFrame(rows, columns=[*by, "k", "n", "fraction", "ci_low", "ci_high", "cl_low", "cl_high"])


def status_table(runs: Sequence) -> pd.DataFrame:
    """One row per model x weights: status, inputs, load and measurement time, inputs/s, device,
    whether the files were reused, and the loader's notes (how weights/tokenizer/processor were obtained)."""
    rows = []
    for r in runs:
        for w in WEIGHTS:
            info = r.runs.get(w)
            if info is None:
                continue
            rows.append({
                "model": r.model_id, "weights": w, "status": info.get("status", ""),
                "inputs": info.get("n_inputs", 0), "load_s": info.get("load_s"),
                "wall_s": info.get("wall_s"), "inputs_per_s": info.get("inputs_per_s"),
                "device": info.get("device", ""), "reused from cache": r.cached,
                "notes": info.get("notes", ""),
            })
    return pd.DataFrame(rows)


#: the caption of every chapter's table of fractions (:func:`fraction_grid`)
FRACTIONS_CAPTION = ("Share of (input, layer) pairs where the equality condition holds, with its 95% interval "
                     "clustered by input (the one the verdicts use); pairs: those of the row's first measured column.")


_GRID_WEIGHTS = {"pretrained": "trained", "untrained": "untrained"}


def fraction_grid(summ: pd.DataFrame, name=None) -> pd.DataFrame:
    """One row per model of :func:`dobrushin.report.tables.fractions` output ``summ``: a column per weights setting
    and token variant ("trained, content"), each cell the fraction with its interval clustered by input, and
    ``pairs``, the (input, layer) pairs of the row's first cell.  ``name`` maps a model id to its label
    (default :func:`display_name`)."""
    name = name or display_name
    rows = {}
    for r in summ.itertuples():
        d = rows.setdefault(r.model, {"model": name(r.model), "pairs": f"{int(r.n):,}"})
        d[f"{_GRID_WEIGHTS.get(r.weights, r.weights)}, {VARIANT_TABLE_LABELS.get(r.variant, r.variant)}"] = (
            f"{pct(r.fraction)} [{pct(r.cl_low)[:-1]}–{pct(r.cl_high)}]")
    out = pd.DataFrame(list(rows.values()))
    return out[[c for c in out.columns if c != "pairs"] + ["pairs"]].fillna("—") if len(out) else out


def head_summary(heads: pd.DataFrame) -> pd.DataFrame:
    """Per model x weights x variant: fraction of (input, layer, head) triples where the condition
    holds (Wilson 95%), and how it spreads over the heads: ``heads`` counts the model's heads (each head of
    each layer, a (layer, head) pair), ``head_min``/``head_median``/``head_max`` the lowest, median and highest
    of their fractions over the inputs."""
    if heads.empty:
        return pd.DataFrame(columns=["model", "weights", "variant", "inputs", "heads", "k", "n", "fraction",
                                     "ci_low", "ci_high", "head_min", "head_median", "head_max"])
    f = fractions(heads, ("model", "weights", "variant"))
    per_head = heads.groupby(["model", "weights", "variant", "layer", "head"], observed=True)["holds"].mean()
    spread = per_head.groupby(level=[0, 1, 2], observed=True).agg(["min", "median", "max"])
    spread.columns = ["head_min", "head_median", "head_max"]
    counts = heads.groupby(["model", "weights", "variant"], observed=True).agg(inputs=("input_id", "nunique"))
    counts["heads"] = per_head.groupby(level=[0, 1, 2], observed=True).size()
    out = f.merge(counts.reset_index(), on=["model", "weights", "variant"]).merge(
        spread.reset_index(), on=["model", "weights", "variant"])
    return out[["model", "weights", "variant", "inputs", "heads", "k", "n", "fraction", "ci_low", "ci_high",
                "head_min", "head_median", "head_max"]]


def rollout_summary(roll: pd.DataFrame) -> pd.DataFrame:
    """Per model x weights x variant: inputs, median κ(R), median bound, median ratio κ(R)/bound,
    and the number of inputs violating κ(R) ≤ ∏κ(F_l) ≤ ∏½(1+κ(Ã_l)) (must be 0; tolerance 1e-9)."""
    if roll.empty:
        return pd.DataFrame(columns=["model", "weights", "variant", "inputs", "median_kappa_rollout",
                                     "median_bound", "median_ratio", "violations"])
    r = roll.assign(ratio=roll["kappa_rollout"] / roll["bound"],
                    bad=(roll["kappa_rollout"] > roll["factor_product"] + 1e-9)
                    | (roll["factor_product"] > roll["bound"] + 1e-9))
    g = r.groupby(["model", "weights", "variant"], observed=True)
    return g.agg(inputs=("input_id", "count"), median_kappa_rollout=("kappa_rollout", "median"),
                 median_bound=("bound", "median"), median_ratio=("ratio", "median"),
                 violations=("bad", "sum")).reset_index()


def collect(store: ResultStore) -> dict:
    """Every intact table listed in a store's manifest: ``{"table", "heads", "rollout", "entries"}``."""
    entries = store.manifest()["entries"]
    return {"table": store.tables("table", entries), "heads": store.tables("heads", entries),
            "rollout": store.tables("rollout", entries), "entries": entries}


__all__ = ["FRACTIONS_CAPTION", "collect", "fraction_grid", "fractions", "head_summary", "rollout_summary", "status_table"]
