"""The condition along training: FT-Transformer measured at initialisation (epoch 0) and after every epoch,
trained exactly as the published checkpoints are (:func:`~dobrushin.models.ft_transformer.fit`, bit for bit)
and then on, past early stopping, to ``max(stop, ⌈extend × early-stopping epoch⌉)`` epochs.

:func:`trajectory` returns the :data:`EPOCH_COLUMNS` rows, keyed like a checkpoint plus the row sample and this
module's code digest; finished rows are reused and an interrupted run resumes after its last epoch (the
training state is saved atomically after each).  The loop uses the training module's private helpers:
making them public would change the code digest that keys every published checkpoint.
"""
from __future__ import annotations

import copy
import hashlib
import io
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import torch

from ..capture.extract import extract_attention
from ..data.tabular_data import METRICS, TabularData
from ..math.coefficient import DEFAULT_TOL
from ..models import ft_transformer as ft
from ..store.code import code_digest
from ..store.progress import Progress
from ..store.results import VARIANTS, atomic_write_csv, atomic_write_json, params_key, sha256_bytes
from .measure import measure_batch

#: columns of ``epochs.csv``, one row per (data set, seed, epoch, variant, layer; layer empty: all layers)
EPOCH_COLUMNS = {
    "dataset": "string", "seed": "int64", "epoch": "int64", "variant": "string", "layer": "Int64",
    "pairs": "int64", "holds": "int64", "fraction": "float64", "val_metric": "string", "val_value": "float64",
    "early_stopping_epoch": "int64", "stop_epoch": "int64", "key": "string",
}
#: training goes on to this multiple of the early-stopping epoch (at least to the protocol's stop)
EXTEND = 1.5
#: the code behind the rows (:data:`dobrushin.store.code.PRODUCTS`)
EPOCHS_CODE = ("experiments/epochs.py",)
FORMAT = 1


def condition_counts(model, data: TabularData, rows: np.ndarray, *, batch_size: int = 512,
                     tol: float = DEFAULT_TOL) -> pd.DataFrame:
    """Per variant and layer (``layer`` NA: all layers) the (row, layer) pairs of test ``rows`` and how many
    hold, tested as the model tables test them."""
    tables = []
    for a in range(0, len(rows), batch_size):
        r = rows[a:a + batch_size]
        ex = extract_attention(model, ft.tensors(data, "test", r))
        t, _ = measure_batch(ex.attention, ex.roles, model="ft-transformer", input_ids=[str(i) for i in r],
                             weights="pretrained", variants=VARIANTS, tol=tol, rollout=False)
        tables.append(t[["variant", "layer", "holds"]])
    t = pd.concat(tables, ignore_index=True)
    per_layer = t.groupby(["variant", "layer"]).holds.agg(pairs="size", holds="sum").reset_index()
    pooled = t.groupby("variant").holds.agg(pairs="size", holds="sum").reset_index().assign(layer=pd.NA)
    out = pd.concat([pooled, per_layer], ignore_index=True)
    return out.astype({"layer": "Int64", "pairs": "int64", "holds": "int64"})


def _state_sha256(state) -> str:
    """SHA-256 of a state dict as :func:`~dobrushin.models.ft_transformer.fit` writes its checkpoint."""
    buf = io.BytesIO()
    torch.save(state, buf)
    return sha256_bytes(buf.getvalue())


@dataclass
class Trajectory:
    """``rows``: the :data:`EPOCH_COLUMNS` frame; ``record``: key, epochs, SHA-256 of the early-stopping
    epoch's weights, seconds, resumed epoch."""

    rows: pd.DataFrame
    record: dict


def trajectory_key(data: TabularData, seed: int, rows: np.ndarray, *, settings: dict, config: dict,
                   extend: float = EXTEND, tol: float = DEFAULT_TOL, digest: Optional[str] = None) -> str:
    """The key of a trajectory; ``digest``: the code digest it is keyed under (default: this code's)."""
    return params_key({"format": FORMAT, "data": data.checksum, "config": config, "train": settings,
                       "seed": int(seed), "rows": hashlib.sha256(np.asarray(rows, np.int64).tobytes()).hexdigest()[:16],
                       "extend": float(extend), "tol": float(tol),
                       "code_digest": code_digest(EPOCHS_CODE) if digest is None else digest})


def trajectory(data: TabularData, seed: int, rows: Sequence[int], *, cache_root: Path, extend: float = EXTEND,
               model_overrides: Optional[dict] = None, progress=None, tol: float = DEFAULT_TOL,
               **settings) -> Trajectory:
    """Train ``data`` with ``seed`` (``settings`` as for ``ft_transformer.fit``) to
    ``max(stop, ⌈extend × early-stopping epoch⌉)`` epochs, measuring test ``rows`` at epoch 0 and after every
    epoch; cached and resumable under ``cache_root``.  ``progress``: a log file for the progress lines."""
    if not float(extend) >= 1:
        raise ValueError(f"extend must be at least 1, got {extend!r}")
    rows = np.asarray(rows, dtype=np.int64)
    config = ft.model_config(data, **(model_overrides or {}))
    settings = ft.train_settings(**settings)
    key = trajectory_key(data, seed, rows, settings=settings, config=config, extend=extend, tol=tol)
    root = Path(cache_root)
    stem = root / f"{data.name}-seed{int(seed)}-{key}"
    done_csv, done_json, state_pt = (Path(f"{stem}{s}") for s in (".csv", ".json", ".state.pt"))
    if done_csv.exists() and done_json.exists():
        rec = json.loads(done_json.read_text())
        if rec.get("sha256") == sha256_bytes(done_csv.read_bytes()):
            return Trajectory(conform_epochs(pd.read_csv(done_csv)), rec)
    metric = METRICS.get(data.name, "rmse" if data.task == "regression" else "accuracy")
    found: list = []

    def measure(model, epoch: int, val: float) -> None:
        c = condition_counts(model, data, rows, tol=tol)
        found.append(c.assign(epoch=epoch, val_value=val))

    def val_value(model) -> float:
        return ft.score(data, ft.predict(model, data, "val"), "val")[metric]

    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):  # as ft._train: the same generators, the same weights
        torch.manual_seed(int(seed))
        model = ft.rtdl.FTTransformer(**config)
        opt = torch.optim.AdamW(model.make_parameter_groups(), lr=settings["lr"], weight_decay=settings["weight_decay"])
        gen = torch.Generator().manual_seed(int(seed))
        xn, xc = ft.tensors(data, "train")
        y = torch.as_tensor(data.y["train"])
        n, bs, patience = len(y), int(settings["batch_size"]), int(settings["patience"])
        cap = settings["max_epochs"]
        best, best_state, best_epoch, bad, epoch, stop, target, spent = -math.inf, None, 0, 0, 0, None, None, 0.0
        es_sha = None
        saved = ft._load_progress(state_pt, key)
        resumed = None
        if saved is not None:
            model.load_state_dict(saved["model"])
            ft._load_optimizer(opt, model, saved["optimizer"])
            gen.set_state(saved["generator"])
            torch.set_rng_state(saved["torch_rng"])
            best, best_state, best_epoch, bad = float(saved["best"]), saved["best_state"], int(saved["best_epoch"]), int(saved["bad"])
            epoch, stop, target, spent = int(saved["epoch"]), saved["stop"], saved["target"], float(saved["seconds"])
            found, resumed, es_sha = [pd.read_csv(io.StringIO(saved["rows"]))], epoch, saved["es_sha"]
        else:
            measure(model, 0, val_value(model))
        bar = Progress(target or 0, f"epochs {data.name} seed {seed}", unit="epochs", log=progress, done=epoch)
        while target is None or epoch < target:
            epoch += 1
            model.train()
            perm = torch.randperm(n, generator=gen)
            for i in range(0, n, bs):
                b = perm[i:i + bs]
                opt.zero_grad(set_to_none=True)
                ft._loss(data, model(None if xn is None else xn[b], None if xc is None else xc[b]), y[b]).backward()
                opt.step()
            pred = ft.predict(model, data, "val")
            val = ft._val_score(data, pred)
            if stop is None:  # the protocol's early stopping, as in ft._train
                if val > best:
                    best, best_epoch, bad = val, epoch, 0
                    best_state = copy.deepcopy(model.state_dict())
                else:
                    bad += 1
                if bad >= patience or (cap is not None and epoch >= int(cap)):
                    stop, target = epoch, max(epoch, math.ceil(float(extend) * best_epoch))
                    es_sha, bar.total = _state_sha256(best_state), target
            measure(model, epoch, ft.score(data, pred, "val")[metric])
            bar.update(1, note=f"val {metric} {found[-1].val_value.iloc[0]:.4f}" +
                       (f"; protocol stopped at {stop}, early-stopping epoch {best_epoch}" if stop else ""))
            if target is None or epoch < target:
                ft._save_progress(state_pt, {
                    "key": key, "epoch": epoch, "model": model.state_dict(), "optimizer": ft._optimizer_state(opt, model),
                    "generator": gen.get_state(), "torch_rng": torch.get_rng_state(), "best": best,
                    "best_state": best_state, "best_epoch": best_epoch, "bad": bad, "stop": stop, "target": target,
                    "es_sha": es_sha, "seconds": spent + time.perf_counter() - t0,
                    "rows": pd.concat(found, ignore_index=True).to_csv(index=False)}, epoch)
        bar.close()
    out = pd.concat(found, ignore_index=True).assign(
        dataset=data.name, seed=int(seed), val_metric=metric, early_stopping_epoch=best_epoch, stop_epoch=stop, key=key)
    out = conform_epochs(out.assign(fraction=out.holds / out.pairs))
    atomic_write_csv(done_csv, out)
    rec = {"key": key, "dataset": data.name, "seed": int(seed), "epochs": int(epoch), "early_stopping_epoch": best_epoch,
           "stop_epoch": stop, "early_stopping_sha256": es_sha, "seconds": round(spent + time.perf_counter() - t0, 1),
           "resumed_after_epoch": resumed, "sha256": sha256_bytes(done_csv.read_bytes())}
    atomic_write_json(done_json, rec)
    state_pt.unlink(missing_ok=True)
    return Trajectory(out, rec)


def conform_epochs(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with the :data:`EPOCH_COLUMNS` in order and type, sorted by data set, seed, epoch, variant, layer."""
    missing = set(EPOCH_COLUMNS) - set(df.columns)
    if missing:
        raise ValueError(f"epoch rows lack the column(s) {sorted(missing)}")
    df = df[list(EPOCH_COLUMNS)].astype(EPOCH_COLUMNS)
    return df.sort_values(["dataset", "seed", "epoch", "variant", "layer"], na_position="first").reset_index(drop=True)
