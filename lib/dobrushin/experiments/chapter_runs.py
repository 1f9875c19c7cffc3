"""What a chapter measures before it shows anything (the report's chapters present it): a family chapter's inputs
and model runs (:func:`measure_family`), the tabular chapter's trained networks and their runs
(:func:`train_and_measure`) and its trajectories along training (:func:`epoch_trajectories`)."""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional

import pandas as pd

from ..data.availability import DataUnavailable
from ..models.configs import display_name, resolution_id
from ..store.results import atomic_write_csv, slugify


@dataclass
class FamilyMeasurement:
    """A family chapter's measurement: ``input_set`` (None when the data is unavailable: ``data_status`` says
    why), ``runs`` (``ModelRun``, trained weights first) and their tables concatenated."""
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


def _load_inputs(params, store, out: FamilyMeasurement) -> None:
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


def measure_family(params, store, config, device) -> FamilyMeasurement:
    """Load a family chapter's inputs and measure every model of ``params`` (cached runs reused), then record the
    run in the chapter's manifest."""
    from .environment import describe_device, versions
    from .pipeline import measure_models

    out = FamilyMeasurement()
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
    recorded = {k: v for k, v in versions(("transformers", "timm", "dobrushin")).items() if k != "numpy"}
    store.update_manifest(parameters=params.recorded(), profile=params.profile, device=describe_device(device),
                          seed=params.seed, versions=recorded)
    return out


def train_overrides(p) -> dict:
    """The training settings the tabular parameters ``p`` give :func:`dobrushin.models.ft_transformer.fit`."""
    return {"max_epochs": p.max_epochs, "patience": p.patience, "batch_size": p.batch_size}


@dataclass
class TabularMeasurement:
    """The tabular chapter's measurement, keyed ``(data set, seed)``: ``trained`` (data, fit result), ``runs``;
    ``metric_rows`` (also ``metrics.csv``), the concatenated ``table`` and training ``timings``."""
    trained: dict = field(default_factory=dict)
    metric_rows: list = field(default_factory=list)
    runs: dict = field(default_factory=dict)
    table: pd.DataFrame = field(default_factory=pd.DataFrame)
    timings: dict = field(default_factory=dict)


def train_and_measure(p, data_sets: dict, unavailable: dict, store, *, published: dict,
                      model_name: Callable[[str, int], str]) -> TabularMeasurement:
    """Train (or load cached) every data set x seed of ``p``, then measure each network and its initialisation;
    ``unavailable`` data sets are recorded with their reason.  ``published``: the paper's metric per data set."""
    from ..data import tabular_data
    from ..models import ft_transformer as ft
    from . import tabular as T

    out = TabularMeasurement()
    for name, d in data_sets.items():  # every network trained first, then every one measured
        dtrain = d.subsample("train", p.train_rows, seed=p.split_seed)
        for seed in p.seeds:
            r = ft.fit(dtrain, seed, **train_overrides(p), progress=store.dir / "progress.log")  # not in the notebook
            metric = tabular_data.METRICS[name]
            out.trained[(name, seed)] = (dtrain, r)
            out.metric_rows.append({"dataset": name, "seed": seed, "metric": metric, "epochs": r.epochs,
                                    "value": ft.score(dtrain, ft.predict(r.model, dtrain, "test"), "test")[metric],
                                    "train_seconds": round(r.train_seconds, 1)})
            cached = " (checkpoint cache)" if r.from_cache else ""
            out.timings[f"train {tabular_data.TITLES[name]} seed {seed}{cached}"] = round(r.train_seconds, 1)
    atomic_write_csv(store.dir / "metrics.csv", pd.DataFrame(
        out.metric_rows, columns=["dataset", "seed", "metric", "value", "epochs", "train_seconds"]))
    for m in out.metric_rows:
        name, seed = m["dataset"], m["seed"]
        d, r = out.trained[(name, seed)]
        out.runs[(name, seed)] = T.measure_tabular(
            store, f"{name}-seed{seed}", models={"pretrained": r.model, "untrained": ft.make_model(d, seed)},
            provenance={"pretrained": r.provenance, "untrained": {"source": "untrained", "seed": seed}}, data=d,
            rows=ft.select_rows(d.size("test"), p.attention_rows, seed=p.split_seed),
            model_name=model_name(name, seed), key_extra={"dataset": name, "seed": seed},
            config=T.TABULAR_CONFIG.replace(head_inputs=p.head_inputs, force=p.force), dataset=name, seed=seed,
            metric=m["metric"], metric_value=m["value"], published=published.get(name), epochs=r.epochs,
            train_seconds=round(r.train_seconds, 1), profile=p.profile, paper_benchmark=name in published,
            weights_note="pretrained = trained in this notebook; untrained = its seeded initialisation")
    for name, status in unavailable.items():
        for seed in p.seeds:
            store.record(f"{name}-seed{seed}", {"dataset": name, "seed": seed, "profile": p.profile}, status=status,
                         model=model_name(name, seed), family="ft-transformer", dataset=name, seed=seed,
                         paper_benchmark=name in published)
    out.table = (pd.concat([v.table for v in out.runs.values()], ignore_index=True) if out.runs
                 else store.tables().iloc[:0])
    return out


def epoch_trajectories(p, data_sets: dict, store):
    """The trajectories along training for ``p.epoch_datasets`` x seeds: published where the key matches, else
    computed.  ``(rows, {"<data set>-seed<k>": record}, sizes of the test-row samples)``."""
    import json

    from ..models import ft_transformer as ft
    from ..store import paths
    from ..store.code import code_digest
    from . import epochs as E

    frames, sizes, records = [], set(), {}
    pub = paths.published_dir()
    pub_csv = pub / "tabular" / "epochs.csv" if pub is not None else None
    published = E.conform_epochs(pd.read_csv(pub_csv)) if pub_csv is not None and pub_csv.is_file() else None
    pub_records = (json.loads((pub / "tabular" / "manifest.json").read_text()).get("epochs") or {}).get(
        "trajectories", {}) if published is not None else {}
    settings = ft.train_settings(**train_overrides(p))
    for name in [n for n in p.epoch_datasets if n in data_sets]:
        d = data_sets[name].subsample("train", p.train_rows, seed=p.split_seed)
        rows = ft.select_rows(d.size("test"), p.epoch_rows, seed=p.split_seed)
        sizes.add(f"{len(rows):,}")
        for seed in p.seeds:
            slug, config = f"{name}-seed{seed}", ft.model_config(d)
            key = E.trajectory_key(d, seed, rows, settings=settings, config=config)
            got = published[published.key == key] if published is not None else []
            if len(got) and (pub_records.get(slug) or {}).get("key") == key:
                frames.append(got)
                records[slug] = pub_records[slug]
            else:
                tr = E.trajectory(d, seed, rows, cache_root=paths.cache_dir() / "epochs",
                                  progress=store.dir / "progress.log", **settings)
                frames.append(tr.rows)
                records[slug] = {**tr.record, "checkpoint_key": ft.cache_key(d, seed, config, settings),
                                 "code_digest": code_digest(E.EPOCHS_CODE)}  # the digest in the key
    rows = E.conform_epochs(pd.concat(frames, ignore_index=True) if frames else
                            pd.DataFrame({k: pd.Series(dtype=v) for k, v in E.EPOCH_COLUMNS.items()}))
    return rows, records, sizes
