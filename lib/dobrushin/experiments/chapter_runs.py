"""What a chapter measures before it shows anything: a family chapter's inputs and model runs
(:func:`measure_family`) and the tabular chapter's data sets, trained networks and runs (:func:`measure_tabular`).
The report's chapters (:mod:`dobrushin.report.chapter`, :mod:`dobrushin.report.tabular_chapter`) present them."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Optional

import pandas as pd

from ..data.availability import DataUnavailable
from ..models.configs import display_name, resolution_id
from ..store.results import slugify


@dataclass
class FamilyRuns:
    """A family chapter's measurement: ``input_set`` (None when the data is unavailable, ``data_status`` saying
    why), ``runs`` (:class:`~dobrushin.experiments.pipeline.ModelRun`, models with trained weights first) and their
    tables concatenated (``table``, ``heads``, ``roll``)."""
    input_set: object = None
    data_status: Optional[str] = None
    runs: list = field(default_factory=list)
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    heads: pd.DataFrame = field(default_factory=pd.DataFrame)
    roll: pd.DataFrame = field(default_factory=pd.DataFrame)
    wall_s: float = 0.0


def extra_models(params) -> list:
    """The models measured a second time at ``extra_image_size`` (none when it is not set)."""
    return list(params.get("extra_size_models") or []) if params.get("extra_image_size") is not None else []


def trained_ok(run) -> bool:
    return run.runs.get("pretrained", {}).get("status") == "ok"


def _load_inputs(params, store, out: FamilyRuns) -> None:
    """The inputs; when the data is unavailable, every model recorded with the reason."""
    from ..data.inputs import load_inputs

    try:
        out.input_set = load_inputs(params.kind, params.source, params.n_inputs, seed=params.seed)
    except DataUnavailable as e:
        out.data_status = e.status
        for m in params.models:
            store.record(slugify(m), params.recorded(), status=e.status, model=m, display=display_name(m), family="")


def _measure_extra(params, inputs, store, config) -> list:
    """The models of ``extra_size_models`` again at ``extra_image_size`` px, stored as ``<id>@<size>px``."""
    from ..models.loading import load_model, weights_provenance
    from .pipeline import measure_model

    runs, size = [], int(params.extra_image_size)
    for m in extra_models(params):
        vid = resolution_id(m, size)

        def loader(_id, *, base=m, vid=vid, **kw):
            lm = load_model(base, **{**kw, "image_size": size})
            lm.model_id = vid
            return lm

        runs.append(measure_model(vid, inputs, store=store, config=config.replace(image_size=size), loader=loader,
                                  provenance=lambda _id, base=m, **kw: weights_provenance(base, **kw),
                                  info={"base_model": m, "image_size": size}))
    return runs


def measure_family(params, store, config, device) -> FamilyRuns:
    """Load a family chapter's inputs and measure every model of ``params`` (cached runs reused), then record the
    run in the chapter's manifest."""
    from .environment import describe_device, versions
    from .pipeline import measure_models

    out = FamilyRuns()
    _load_inputs(params, store, out)
    t0 = time.perf_counter()
    if out.input_set is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # e.g. "switched to eager attention"
            out.runs = measure_models(params.models, out.input_set, store=store, config=config)
            if extra_models(params):
                out.runs += _measure_extra(params, out.input_set, store, config)
    out.runs = [r for r in out.runs if trained_ok(r)] + [r for r in out.runs if not trained_ok(r)]
    if out.runs:
        out.table = pd.concat([r.table for r in out.runs], ignore_index=True)
        out.heads = pd.concat([r.heads for r in out.runs], ignore_index=True)
        out.roll = pd.concat([r.rollout for r in out.runs], ignore_index=True)
    out.wall_s = round(time.perf_counter() - t0, 1)
    store.update_manifest(parameters=params.recorded(), profile=params.profile, device=describe_device(device),
                          seed=params.seed, versions={k: v for k, v in versions(("transformers", "timm", "dobrushin")).items()
                                                      if k != "numpy"})
    return out
