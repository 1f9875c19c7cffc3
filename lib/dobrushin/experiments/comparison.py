"""What ``make verify`` compares with (shared by :mod:`dobrushin.experiments.verify` and ``verify_products``):
the seeded sample, the comparison of a published table with the re-measured one (near-ties below the float
error excused) and the decision margins."""
from __future__ import annotations

import zlib
from dataclasses import asdict, dataclass, field
from typing import List, Optional, Sequence

import numpy as np
import pandas as pd

# tolerances on κ/slack and the float32 decision margin, defined with the attestations
from ..store.attest import FLOAT_ERROR, KAPPA_TOL
from ..store.results import MARGIN_COLUMNS
from .families import TRANSFORMER_INPUTS


#: seed of the sample
SEED = 19
#: inputs re-measured per model, weights setting and resolution
PER_GROUP = 3
#: test rows of the FT-Transformer checkpoint re-measured
TABULAR_ROWS = 64
KEY = ["input_id", "layer", "variant", "weights"]
NUMBERS = ("kappa", "kappa_factor", "slack", "trace")


@dataclass
class Comparison:
    """The comparison of one group (a model, weights setting and resolution; or the baseline)."""
    group: str
    rows: int = 0
    decision_mismatches: List[dict] = field(default_factory=list)  # margin ≥ FLOAT_ERROR or unknown: failures
    excused: List[dict] = field(default_factory=list)  # decision differs, margin below the float error
    max_abs_diff: float = 0.0
    number_failures: int = 0
    missing: int = 0  # published rows the re-measurement did not produce
    error: str = ""  # could not be re-measured: why

    @property
    def passed(self) -> bool:
        return (not self.error and not self.decision_mismatches and not self.number_failures
                and not self.missing and self.rows > 0)

    def absorb(self, other: "Comparison", table: str) -> None:
        """Add the comparison of another table of the same group (``table``: ``"heads"``, ``"rollout"``)."""
        self.rows += other.rows
        self.decision_mismatches += [{"table": table, **r} for r in other.decision_mismatches]
        self.excused += [{"table": table, **r} for r in other.excused]
        self.max_abs_diff = max(self.max_abs_diff, other.max_abs_diff)
        self.number_failures += other.number_failures
        self.missing += other.missing

    def as_dict(self) -> dict:
        return {**asdict(self), "passed": self.passed}


# ------------------------------------------------------------------------------------ margins
def margin_of_rows(df: pd.DataFrame) -> pd.Series:
    """The recorded decision margin of each row: the smallest of its margin columns (nan when it has none)."""
    if not set(MARGIN_COLUMNS) <= set(df.columns):
        return pd.Series(np.nan, index=df.index)
    return df[list(MARGIN_COLUMNS)].astype(float).abs().min(axis=1)


# ------------------------------------------------------------------------------------ comparison
#: the key, numbers and decision of the secondary tables: per head, and the whole rollout (its decision is
#: how many layers hold)
HEAD_KEY, HEAD_NUMBERS = KEY + ["head"], ("kappa", "slack")
ROLLOUT_KEY, ROLLOUT_NUMBERS = ["input_id", "variant", "weights"], ("kappa_rollout", "factor_product", "bound")


def compare(published: pd.DataFrame, remeasured: pd.DataFrame, group: str,
            margins: Optional[pd.Series] = None, key: Sequence[str] = KEY, numbers: Sequence[str] = NUMBERS,
            decision: str = "holds", published_margins: Optional[pd.Series] = None) -> Comparison:
    """Compare re-measured rows with the published ones on ``key``: ``decision`` equal, ``numbers`` within
    :data:`KAPPA_TOL` (the trace relative to its size, only where published).  ``margins``: of the re-measured
    rows, used where the published rows carry none; ``published_margins``: overrides the published ones."""
    c = Comparison(group)
    key, numbers = list(key), tuple(numbers)
    pm = margin_of_rows(published) if published_margins is None else published_margins
    pub = published.assign(_margin=np.asarray(pm, dtype=float))
    rem = remeasured.assign(_rmargin=(margins.to_numpy() if margins is not None else np.nan))
    for col in key:
        pub[col], rem[col] = pub[col].astype(str), rem[col].astype(str)
    m = pub.merge(rem, on=key, how="left", suffixes=("", "_new"), indicator=True)
    c.missing = int((m["_merge"] == "left_only").sum())
    m = m[m["_merge"] == "both"]
    c.rows = len(m)
    if not c.rows:
        return c
    numbers = tuple(x for x in numbers if x != "trace" or {"trace", "trace_new"} <= set(m.columns) and m[x].notna().any())
    diffs = np.column_stack([np.abs(m[x].astype(float) - m[f"{x}_new"].astype(float))
                             / (np.maximum(1.0, m[x].abs().astype(float)) if x == "trace" else 1.0) for x in numbers])
    # a number that is NaN on one side only differs by more than any tolerance
    nan_one_side = np.column_stack([m[x].astype(float).isna() != m[f"{x}_new"].astype(float).isna() for x in numbers])
    diffs = np.where(nan_one_side, np.inf, diffs)
    c.max_abs_diff = float(np.nanmax(diffs)) if diffs.size and not np.isnan(diffs).all() else 0.0
    flip = np.array([_plain(a) != _plain(b) for a, b in zip(m[decision], m[f"{decision}_new"])], dtype=bool)
    # a flipped decision also moves the slack across 0 by its margin: the number check covers agreeing rows
    c.number_failures = int(((diffs > KAPPA_TOL).any(axis=1) & ~flip).sum())
    for _, r in m[flip].iterrows():
        margin = r["_margin"] if np.isfinite(r["_margin"]) else r["_rmargin"]
        rec = {k: r[k] for k in key} | {"published": _plain(r[decision]), "now": _plain(r[f"{decision}_new"]),
                                         "margin": None if not np.isfinite(margin) else float(margin)}
        (c.excused if np.isfinite(margin) and margin < FLOAT_ERROR else c.decision_mismatches).append(rec)
    return c


def _plain(v):
    """A table cell as a plain Python value (numpy scalars to their Python type)."""
    return v.item() if hasattr(v, "item") else v


def focus_inputs(rows: pd.DataFrame) -> List[str]:
    """Inputs re-measured beside the seeded sample: the one with the most tokens (first by id) and every input
    with a published decision margin below :data:`FLOAT_ERROR`."""
    if rows.empty:
        return []
    ids = rows["input_id"].astype(str)
    top = rows.assign(_id=ids).sort_values(["n_tokens", "_id"], ascending=[False, True])["_id"].iloc[0]
    ties = set(ids[(margin_of_rows(rows) < FLOAT_ERROR).to_numpy()])
    return sorted(ties | {top})


def sample_inputs(table: pd.DataFrame, seed: int = SEED, per_group: int = PER_GROUP) -> dict:
    """``{(model, weights): [input ids]}``: ``per_group`` inputs (all when fewer) of every model and weights
    setting, drawn with a generator seeded by ``seed`` and the group's name (independent of the order)."""
    out = {}
    for (model, weights), g in table.groupby(["model", "weights"], sort=True):
        ids = sorted(set(g["input_id"].astype(str)))
        rng = np.random.default_rng([seed, zlib.crc32(f"{model}|{weights}".encode())])
        k = min(per_group, len(ids))
        out[(str(model), str(weights))] = sorted(rng.choice(ids, size=k, replace=False).tolist())
    return out


# ------------------------------------------------------------------------------------ re-measuring
def published_inputs(published_root, notebook: str, ids: Optional[Sequence[str]] = None):
    """The inputs of a family chapter's published run (``ids`` in that order; all when None), per its manifest."""
    import json

    from ..data.inputs import load_inputs

    params = json.loads((published_root / notebook / "manifest.json").read_text()).get("parameters") or {}
    kind = TRANSFORMER_INPUTS[notebook]
    inputs = load_inputs(kind, params.get(f"{kind}_source"), params.get("n_inputs"), seed=int(params.get("seed", 0)))
    return inputs if ids is None else subset_inputs(inputs, ids)


def subset_inputs(inputs, ids: Sequence[str]):
    pos = {str(x): i for i, x in enumerate(inputs.ids)}
    missing = [i for i in ids if i not in pos]
    if missing:
        import os

        from ..data.canonical import IMAGENET_SAMPLES_SOURCE, SST2_SOURCE

        fell_back = inputs.source not in (IMAGENET_SAMPLES_SOURCE, SST2_SOURCE)
        hint = ("" if os.environ.get("DOBRUSHIN_DATA") or not fell_back else
                "; DOBRUSHIN_DATA is not set and the canonical inputs were not had"
                + (f" ({inputs.notes})" if inputs.notes else "")
                + ", so the inputs came from elsewhere than the published run's (set DOBRUSHIN_DATA to a data "
                "folder holding them, e.g. ../shared/data)")
        raise LookupError(f"inputs {missing} are not in today's selection (source {inputs.source}){hint}")
    return inputs.subset([pos[i] for i in ids])
