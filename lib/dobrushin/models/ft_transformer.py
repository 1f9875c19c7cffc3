"""FT-Transformer (Gorishniy et al. 2021) on tabular data: the model, its training and a checkpoint cache.

:func:`make_model`: the rtdl default configuration, seeded (the untrained control).  :func:`fit`: trains
with early stopping on the validation split (the best state is kept), or loads the checkpoint
``cache_dir()/tabular/<dataset>-seed<k>-<key>.pt`` (+ ``.json`` sidecar with its SHA-256; ``key``:
:func:`cache_key`).  Same data, configuration and seed give the same weights on the same machine and torch
thread count.  The state after each epoch is written atomically to ``<...>.epoch.pt``, so a killed run
resumes with the same result.  A checkpoint that does not match its sidecar or load strictly is reported
corrupt and retrained.  The attention is captured by ``dobrushin.capture.ft_transformer``.
"""
from __future__ import annotations

import copy
import io
import json
import math
import os
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..store.code import code_digest
from ..store.paths import cache_dir as _default_cache_dir
from ..store.progress import Progress
from ..store.results import atomic_write, atomic_write_bytes, atomic_write_json, params_key, sha256_bytes
from ..data.tabular_data import TabularData

try:
    import rtdl_revisiting_models as rtdl
except ImportError as e:  # pragma: no cover - a declared dependency
    raise ImportError("dobrushin.models.ft_transformer needs the 'rtdl-revisiting-models' package") from e

CHECKPOINT_FORMAT = 1
#: defaults of the training loop (the FT-Transformer paper / rtdl_revisiting_models defaults)
TRAIN_DEFAULTS = {"batch_size": 256, "lr": 1e-4, "weight_decay": 1e-5, "patience": 16, "max_epochs": None}

#: number of times :func:`fit` actually trained (not loaded) a model in this process; tests use it
TRAIN_RUNS = 0


# -------------------------------------------------------------------------------------------------
# model


def model_config(data: TabularData, **overrides) -> Dict[str, Any]:
    """Constructor arguments of the default FT-Transformer for ``data`` (``overrides`` replace defaults)."""
    kw = rtdl.FTTransformer.get_default_kwargs()
    unknown = set(overrides) - set(kw) - {"ffn_activation"}
    if unknown:
        raise ValueError(f"unknown FT-Transformer option(s) {sorted(unknown)}; known: {sorted(kw)}")
    kw.update(overrides)
    if overrides:
        kw["_is_default"] = False
    d_out = 1 if data.task in ("regression", "binclass") else int(data.n_classes)
    return {"n_cont_features": len(data.num_names), "cat_cardinalities": list(data.cat_cardinalities),
            "d_out": d_out, **kw}


def make_model(data: TabularData, seed: int, **overrides) -> "rtdl.FTTransformer":
    """FT-Transformer for ``data`` with a seeded initialisation (the untrained control), in eval mode."""
    cfg = model_config(data, **overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = rtdl.FTTransformer(**cfg)
    return model.eval()


def tensors(data: TabularData, part: str, rows=None) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """``(x_num, x_cat)`` tensors of split ``part`` (optionally only ``rows``); None for an absent kind."""
    sel = (lambda a: a) if rows is None else (lambda a: a[rows])
    xn = None if data.X_num is None or not data.num_names else torch.as_tensor(sel(data.X_num[part]))
    xc = None if data.X_cat is None or not data.cat_names else torch.as_tensor(sel(data.X_cat[part]))
    return xn, xc


@torch.no_grad()
def predict(model, data: TabularData, part: str, batch_size: int = 1024) -> np.ndarray:
    """Raw model outputs on a split: ``(n,)`` for regression/binary (standardised target / logit), else ``(n, C)``."""
    was = model.training
    model.eval()
    xn, xc = tensors(data, part)
    n = data.size(part)
    out = []
    for i in range(0, n, batch_size):
        out.append(model(None if xn is None else xn[i:i + batch_size], None if xc is None else xc[i:i + batch_size]))
    model.train(was)
    y = torch.cat(out).float()
    return (y.squeeze(-1) if y.shape[-1] == 1 else y).numpy()


def score(data: TabularData, pred: np.ndarray, part: str) -> Dict[str, float]:
    """Metrics on ``part``: regression ``rmse`` (original units: ``y_std`` × RMSE of the standardised
    target); classification ``accuracy``."""
    y = data.y[part]
    if data.task == "regression":
        return {"rmse": float(np.sqrt(np.mean((pred.astype(np.float64) - y) ** 2)) * data.y_std)}
    labels = (pred > 0).astype(np.int64) if pred.ndim == 1 else pred.argmax(-1)
    return {"accuracy": float(np.mean(labels == y))}


def _val_score(data: TabularData, pred: np.ndarray) -> float:
    m = score(data, pred, "val")
    return -m["rmse"] if "rmse" in m else m["accuracy"]


def _loss(data: TabularData, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    if data.task == "regression":
        return F.mse_loss(out.squeeze(-1), y.float())
    if data.task == "binclass":
        return F.binary_cross_entropy_with_logits(out.squeeze(-1), y.float())
    return F.cross_entropy(out, y)


# -------------------------------------------------------------------------------------------------
# training


@dataclass
class TrainResult:
    """A trained model and its training record.

    ``best_epoch``: 1-based epoch whose validation score was kept; ``train_seconds``: wall time of the
    original training (also when loaded); ``cache_note``: ``"hit"``, ``"miss"``, ``"corrupt: ..."`` or
    ``"disabled"``; ``resumed_from``: the epoch an interrupted training resumed after (None: from the start).
    """

    model: Any
    key: str
    epochs: int
    best_epoch: int
    history: List[dict]
    train_seconds: float
    from_cache: bool
    cache_note: str
    checkpoint: Optional[Path] = None
    config: dict = field(default_factory=dict)
    sha256: Optional[str] = None
    resumed_from: Optional[int] = None

    @property
    def provenance(self) -> Dict[str, Any]:
        """Provenance for the results' cache key and manifest: checkpoint ``key`` and the SHA-256 of the
        state dict; the same whether trained now or read from the cache."""
        return {"source": "trained in this build", "checkpoint_key": self.key, "sha256": self.sha256,
                "proxy_for": None}


def train_settings(**overrides) -> Dict[str, Any]:
    s = dict(TRAIN_DEFAULTS)
    unknown = set(overrides) - set(s)
    if unknown:
        raise ValueError(f"unknown training setting(s) {sorted(unknown)}; known: {sorted(s)}")
    s.update(overrides)
    if int(s["batch_size"]) < 1:
        raise ValueError(f"batch_size must be positive, got {s['batch_size']}")
    if int(s["patience"]) < 1:
        raise ValueError(f"patience must be positive, got {s['patience']}")
    if s["max_epochs"] is not None and int(s["max_epochs"]) < 1:
        raise ValueError(f"max_epochs must be positive or None, got {s['max_epochs']}")
    return s


#: the source files a trained checkpoint depends on: this training code and the data preparation
TRAINING_CODE = ("models/ft_transformer.py", "data/tabular_data.py")


def cache_key(data: TabularData, seed: int, config: dict, settings: dict) -> str:
    """Key of a checkpoint: data checksum, model configuration, training settings, seed and the digest
    of :data:`TRAINING_CODE` (so an edited training loop retrains)."""
    if not data.checksum:
        raise ValueError("the data set has no checksum; build it with dobrushin.data.tabular_data")
    return params_key({"format": CHECKPOINT_FORMAT, "data": data.checksum, "config": config,
                       "train": settings, "seed": int(seed), "code_digest": code_digest(TRAINING_CODE)})


#: test hook: when set to an epoch number, the epoch checkpoint of that epoch stops half-written (its
#: temporary file flushed, a line on stderr) and waits, so that a test can SIGKILL the process there
PAUSE_IN_SAVE_ENV = "DOBRUSHIN_TEST_PAUSE_IN_CHECKPOINT_SAVE"
PAUSE_MARKER = "dobrushin: paused in epoch checkpoint save"


def _save_progress(path: Path, state: dict, epoch: int) -> None:
    """Write the epoch checkpoint atomically (temporary file beside it, fsync, os.replace)."""
    buf = io.BytesIO()
    torch.save(state, buf)
    blob = buf.getvalue()

    def write(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(blob[: len(blob) // 2])
            if os.environ.get(PAUSE_IN_SAVE_ENV) == str(epoch):
                f.flush()
                sys.stderr.write(f"{PAUSE_MARKER} {epoch}\n")
                sys.stderr.flush()
                time.sleep(3600)
            f.write(blob[len(blob) // 2:])

    atomic_write(path, write)


def _load_progress(path: Optional[Path], key: str) -> Optional[dict]:
    """The last completed epoch's training state under ``path`` (same key), or None."""
    if path is None or not path.exists():
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # an unreadable file is not resumed from; training starts again
        warnings.warn(f"epoch checkpoint {path.name} does not load ({type(e).__name__}); training from the start",
                      UserWarning, stacklevel=3)
        return None
    return state if isinstance(state, dict) and state.get("key") == key else None


def _param_index(opt, model) -> Dict[str, int]:
    """Parameter name → its index in ``opt.state_dict()`` (the order of the parameter groups is not
    the same in every process, so the optimiser state is saved by name)."""
    names = {id(p): n for n, p in model.named_parameters()}
    sd = opt.state_dict()
    return {names[id(p)]: i for g_sd, g in zip(sd["param_groups"], opt.param_groups)
            for i, p in zip(g_sd["params"], g["params"])}


def _optimizer_state(opt, model) -> dict:
    idx = {i: n for n, i in _param_index(opt, model).items()}
    return {idx[i]: v for i, v in opt.state_dict()["state"].items()}


def _load_optimizer(opt, model, by_name: dict) -> None:
    sd = opt.state_dict()
    sd["state"] = {i: by_name[n] for n, i in _param_index(opt, model).items() if n in by_name}
    opt.load_state_dict(sd)


def _train(data: TabularData, seed: int, config: dict, settings: dict, progress=None,
           resume: Optional[Path] = None, key: str = ""):
    """Train; with ``resume`` (a path) the state after every epoch is written there atomically, and a
    saved state of the same ``key`` is continued from, giving the same weights as an uninterrupted run."""
    global TRAIN_RUNS
    TRAIN_RUNS += 1
    t0 = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = rtdl.FTTransformer(**config)
        opt = torch.optim.AdamW(model.make_parameter_groups(), lr=settings["lr"],
                                weight_decay=settings["weight_decay"])
        gen = torch.Generator().manual_seed(int(seed))
        xn, xc = tensors(data, "train")
        y = torch.as_tensor(data.y["train"])
        n, bs = len(y), int(settings["batch_size"])
        bar = None if callable(progress) else Progress(
            int(settings["max_epochs"] or 0), f"train {data.name} seed {seed}",
            unit="epochs" if settings["max_epochs"] else "epochs (no cap: early stopping)", log=progress, terminal=True)
        best, best_state, best_epoch, bad, history = -math.inf, None, 0, 0, []
        epoch = 0
        resumed_from, spent = None, 0.0
        saved = _load_progress(resume, key)
        if saved is not None:
            model.load_state_dict(saved["model"])
            _load_optimizer(opt, model, saved["optimizer"])
            gen.set_state(saved["generator"])
            torch.set_rng_state(saved["torch_rng"])
            best, best_state, best_epoch = float(saved["best"]), saved["best_state"], int(saved["best_epoch"])
            bad, history, epoch = int(saved["bad"]), list(saved["history"]), int(saved["epoch"])
            resumed_from, spent = epoch, float(saved["seconds"])
            if bar is not None:  # the epochs done before the interruption count as done
                bar.done = min(bar.total, epoch) if bar.total > 0 else epoch
        max_epochs = settings["max_epochs"]
        while max_epochs is None or epoch < int(max_epochs):
            epoch += 1
            model.train()
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for i in range(0, n, bs):
                b = perm[i:i + bs]
                opt.zero_grad(set_to_none=True)
                loss = _loss(data, model(None if xn is None else xn[b], None if xc is None else xc[b]), y[b])
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(b)
            val = _val_score(data, predict(model, data, "val"))
            history.append({"epoch": epoch, "train_loss": total / n, "val_score": val})
            if callable(progress):
                progress(f"{data.name} seed {seed} epoch {epoch}: train loss {total / n:.4f}, val score {val:.4f}")
            if val > best:
                best, best_epoch, bad = val, epoch, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                bad += 1
            if bar is not None:
                left = int(settings["patience"]) - bad
                bar.update(1, note=f"val score {val:.4f}, best {best:.4f} at epoch {best_epoch}; early stop after "
                                   f"{left} more without improvement")
            if bad >= int(settings["patience"]):
                break
            if resume is not None and (max_epochs is None or epoch < int(max_epochs)):
                _save_progress(resume, {
                    "key": key, "epoch": epoch, "model": model.state_dict(), "optimizer": _optimizer_state(opt, model),
                    "generator": gen.get_state(), "torch_rng": torch.get_rng_state(), "best": best,
                    "best_state": best_state, "best_epoch": best_epoch, "bad": bad, "history": history,
                    "seconds": spent + time.perf_counter() - t0}, epoch)
    if bar is not None:
        bar.close()
    if best_state is None:
        raise RuntimeError(f"{data.name} seed {seed}: no epoch gave a finite validation score (training diverged)")
    model.load_state_dict(best_state)
    model.eval()
    return model, epoch, best_epoch, history, spent + time.perf_counter() - t0, resumed_from


def _paths(root: Path, data: TabularData, seed: int, key: str) -> Tuple[Path, Path]:
    stem = f"{data.name}-seed{int(seed)}-{key}"
    return root / f"{stem}.pt", root / f"{stem}.json"


def _progress_path(root: Path, data: TabularData, seed: int, key: str) -> Path:
    """The epoch checkpoint of an unfinished training (removed once the final checkpoint is written)."""
    return root / f"{data.name}-seed{int(seed)}-{key}.epoch.pt"


def load_checkpoint(data: TabularData, seed: int, config: dict, settings: dict, root: Path):
    """``(model, record, note)``: the cached model or ``None`` with ``note`` "miss" / "corrupt: <why>"."""
    key = cache_key(data, seed, config, settings)
    pt, meta = _paths(root, data, seed, key)
    if not pt.exists() and not meta.exists():
        return None, None, "miss"
    try:
        rec = json.loads(meta.read_text())
    except FileNotFoundError:
        return None, None, f"corrupt: {meta.name} is missing"
    except ValueError as e:
        return None, None, f"corrupt: {meta.name} is not valid JSON ({e})"
    if not pt.exists():
        return None, None, f"corrupt: {pt.name} is missing"
    blob = pt.read_bytes()
    if rec.get("key") != key:
        return None, None, f"corrupt: {meta.name} records key {rec.get('key')!r}, expected {key!r}"
    if rec.get("sha256") != sha256_bytes(blob):
        return None, None, f"corrupt: {pt.name} does not match the SHA-256 in {meta.name}"
    try:
        state = torch.load(io.BytesIO(blob), map_location="cpu", weights_only=True)
        model = rtdl.FTTransformer(**config)
        model.load_state_dict(state, strict=True)
    except Exception as e:
        return None, None, f"corrupt: {pt.name} does not load ({type(e).__name__}: {e})"
    return model.eval(), rec, "hit"


def fit(data: TabularData, seed: int, *, model_overrides: Optional[dict] = None, cache: bool = True,
        cache_root: Optional[Path] = None, progress=None, **settings) -> TrainResult:
    """Train FT-Transformer on ``data`` with ``seed``, or load it from the checkpoint cache.

    ``settings`` override :data:`TRAIN_DEFAULTS`; ``cache_root`` defaults to ``cache_dir() / "tabular"``.
    ``progress``: a callable receiving one line per epoch; otherwise progress goes to standard error
    (and, when ``progress`` is a path, to that log file too).
    """
    config = model_config(data, **(model_overrides or {}))
    settings = train_settings(**settings)
    key = cache_key(data, seed, config, settings)
    root = Path(cache_root) if cache_root is not None else _default_cache_dir() / "tabular"
    note = "disabled"
    if cache:
        model, rec, note = load_checkpoint(data, seed, config, settings, root)
        if model is None and note == "miss":  # the published folder's copy (same key, checked the same way)
            from ..store.paths import published_dir

            pub = published_dir()
            if pub is not None and (pub / "checkpoints" / "tabular").is_dir():
                model, rec, pnote = load_checkpoint(data, seed, config, settings, pub / "checkpoints" / "tabular")
                if model is not None:
                    for src, dst in zip(_paths(pub / "checkpoints" / "tabular", data, seed, key), _paths(root, data, seed, key)):
                        atomic_write_bytes(dst, src.read_bytes())
        if model is not None:
            return TrainResult(model=model, key=key, epochs=rec["epochs"], best_epoch=rec["best_epoch"],
                               history=rec["history"], train_seconds=rec["train_seconds"], from_cache=True,
                               cache_note="hit", checkpoint=_paths(root, data, seed, key)[0], config=config,
                               sha256=rec["sha256"])
        if note.startswith("corrupt"):
            warnings.warn(f"checkpoint for {data.name} seed {seed} is {note}; retraining", UserWarning, stacklevel=2)
    resume = None
    if cache:
        resume = _progress_path(root, data, seed, key)
        for stale in root.glob(f".{resume.name}.*.tmp"):  # a save killed half-way: never read, removed
            stale.unlink(missing_ok=True)
    model, epochs, best_epoch, history, secs, resumed = _train(data, seed, config, settings, progress,
                                                               resume=resume, key=key)
    pt = None
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    blob = buf.getvalue()
    if cache:
        pt, meta = _paths(root, data, seed, key)
        atomic_write_bytes(pt, blob)
        atomic_write_json(meta, {"key": key, "sha256": sha256_bytes(blob), "dataset": data.name, "seed": int(seed),
                                 "data_checksum": data.checksum, "config": config, "settings": settings,
                                 "epochs": epochs, "best_epoch": best_epoch, "history": history,
                                 "train_seconds": secs, "torch": torch.__version__,
                                 "code_digest": code_digest(TRAINING_CODE), "resumed_from_epoch": resumed})
        resume.unlink(missing_ok=True)  # the final checkpoint is in place: the epoch state is not needed
    return TrainResult(model=model, key=key, epochs=epochs, best_epoch=best_epoch, history=history,
                       train_seconds=secs, from_cache=False, cache_note=note, checkpoint=pt, config=config,
                       sha256=sha256_bytes(blob), resumed_from=resumed)


# -------------------------------------------------------------------------------------------------
# attention


def select_rows(n: int, k: Optional[int], seed: int = 0) -> np.ndarray:
    """``k`` row numbers out of ``n`` (seeded, sorted); all rows when ``k`` is None or ≥ n."""
    if k is None or k >= n:
        return np.arange(n)
    if isinstance(k, bool) or int(k) < 1:
        raise ValueError(f"number of rows must be a positive integer or None, got {k!r}")
    return np.sort(np.random.default_rng(seed).choice(n, size=int(k), replace=False))


__all__ = ["TRAIN_DEFAULTS", "TrainResult", "cache_key", "fit", "load_checkpoint", "make_model", "model_config",
           "predict", "score", "select_rows", "tensors", "train_settings"]
