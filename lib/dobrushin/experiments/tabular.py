"""FT-Transformer through the one measurement loop: test rows of a tabular data set as inputs
(:class:`TabularInputs`, ids ``"<part>/<row number in the source table>"``), the trained model and its seeded
initialisation as the two weights settings (:func:`measure_tabular`).  Training and the checkpoint cache live
in :mod:`dobrushin.models.ft_transformer`.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..data.tabular_data import TabularData
from ..store.results import ResultStore
from .pipeline import MeasureConfig, ModelRun, measure_model

#: the loop's defaults for FT-Transformer: every test row in batches of 512, no per-input progress bar
TABULAR_CONFIG = MeasureConfig(batch_size=512, head_inputs=0, device="cpu", progress=False,
                               recheck_unavailable=False)


@dataclass
class TabularInputs:
    """Rows ``rows`` of split ``part`` of ``data`` as inputs of the measurement loop; ``items(a, b)``
    gives the row numbers, which the model's ``preprocess`` turns into ``(x_num, x_cat)``."""

    data: TabularData
    part: str
    rows: np.ndarray
    ids: List[str] = field(init=False)
    kind: str = field(init=False, default="tabular")

    def __post_init__(self):
        self.rows = np.asarray(self.rows, dtype=np.int64)
        if self.rows.ndim != 1 or self.rows.size == 0:
            raise ValueError("no rows to measure")
        n = self.data.size(self.part)
        if self.rows.min() < 0 or self.rows.max() >= n:
            raise ValueError(f"rows must lie in 0..{n - 1} of split {self.part!r}")
        self.ids = [f"{self.part}/{int(self.data.index[self.part][r])}" for r in self.rows]

    def __len__(self) -> int:
        return len(self.rows)

    def items(self, start: int = 0, stop: Optional[int] = None) -> np.ndarray:
        return self.rows[start:stop]

    def head(self, n: int) -> "TabularInputs":
        return TabularInputs(self.data, self.part, self.rows[:n])

    def key(self) -> dict:
        return {"kind": self.kind, "source": f"{self.data.name} ({self.data.checksum})", "part": self.part,
                "ids": list(self.ids), "rows_sha256": hashlib.sha256(self.rows.tobytes()).hexdigest()[:16]}

    def describe(self) -> str:
        return f"{len(self)} {self.part} rows of {self.data.name}"

    def preprocess(self, rows):
        from ..models.ft_transformer import tensors

        return tensors(self.data, self.part, rows)


@dataclass
class TabularModel:
    """A trained or initial FT-Transformer as the loop's loader returns it (the fields of a
    :class:`~dobrushin.models.LoadedModel` the loop reads)."""

    model: Any
    preprocess: Any
    model_id: str
    weights: str
    provenance: Dict[str, Any]
    kind: str = "tabular"
    source: str = "rtdl_revisiting_models"
    family: str = "ft-transformer"
    notes: str = ""


def measure_tabular(store: ResultStore, slug: str, *, models: Mapping[str, Any], provenance: Mapping[str, dict],
                    data: TabularData, rows, model_name: str, config: Optional[MeasureConfig] = None,
                    key_extra: Optional[Mapping[str, Any]] = None, notes: Mapping[str, str] = None,
                    **info) -> ModelRun:
    """Measure ``models`` (``{"pretrained": ..., "untrained": ...}``, one or both) on the test ``rows`` of ``data``
    with the measurement loop, stored under ``slug`` (``info``: extra manifest fields).  ``provenance[w]`` keys
    each model (checkpoint key and SHA-256 for the trained one); ``config`` defaults to :data:`TABULAR_CONFIG`."""
    bad = set(models) - {"pretrained", "untrained"}
    if bad or not models:
        raise ValueError(f"models must be keyed by 'pretrained' and/or 'untrained', got {sorted(models)}")
    cfg = (config or TABULAR_CONFIG).replace(weights=tuple(w for w in ("pretrained", "untrained") if w in models))
    inputs = TabularInputs(data, "test", rows)
    notes = dict(notes or {})
    loaded = {w: TabularModel(m, inputs.preprocess, model_name, w, dict(provenance[w]), notes=notes.get(w, ""))
              for w, m in models.items()}

    def loader(model_id, *, pretrained=True, **_):
        return loaded["pretrained" if pretrained else "untrained"]

    return measure_model(model_name, inputs, store=store, config=cfg, loader=loader, provenance=provenance,
                         slug=slug, key_extra=key_extra, info=info)
