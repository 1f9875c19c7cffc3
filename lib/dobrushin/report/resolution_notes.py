"""Scorecard notes for a model also measured at a second resolution (``"<id>@518px"``): shown beside its claims'
verdicts, never pooled into them."""
from __future__ import annotations

import pandas as pd

from ..models.configs import RESOLUTION_SEP, base_id, model_family
from .names import display_name
from .claims import SCORECARD
from .scorecard import clustered_text
from .tables import input_sums


def add_resolution_notes(card: pd.DataFrame, table: pd.DataFrame) -> pd.DataFrame:
    """``card`` with ``second_resolution`` set from ``table``'s ``"<id>@518px"`` rows: that run's fraction and clustered
    interval on the row's variant, trained weights (``"518 px: 100.0% [96.3–100.0%]"``)."""
    if not len(table) or "model" not in table.columns:
        return card
    card = card.copy()
    by_key = {r.key: r for r in SCORECARD}
    for model in sorted({str(m) for m in table["model"] if RESOLUTION_SEP in str(m)}):
        base = base_id(model)
        for i, crow in card.iterrows():
            r = by_key.get(crow["key"])
            if r is None or r.kind != "fraction" or model_family(base) not in r.families:
                continue
            if r.models and not any(f in base.lower() for f in r.models):
                continue
            part = table[(table["model"] == model) & (table["weights"] == "pretrained") & (table["variant"] == r.variant)]
            if len(part):
                text = f"{display_name(model).rsplit(', ', 1)[-1]}: {clustered_text(input_sums(part))}"
                card.at[i, "second_resolution"] = "; ".join(x for x in (crow["second_resolution"], text) if x)
    return card
