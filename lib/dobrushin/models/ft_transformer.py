"""FT-Transformer (Gorishniy et al. 2021) on tabular data: training, a checkpoint cache, and attention.

Model and training
------------------
:func:`make_model` builds ``rtdl_revisiting_models.FTTransformer`` with the package's default
configuration (``FTTransformer.get_default_kwargs()``: 3 blocks, d_block 192, 8 heads, attention
dropout 0.2, FFN dropout 0.1, ReGLU, residual dropout 0) and a seeded initialisation.
:func:`fit` trains it with the package's default optimiser (``make_default_optimizer``: AdamW,
lr 1e-4, weight decay 1e-5 with weight decay 0 for embeddings, normalisation layers and biases),
batch 256, loss MSE (regression, standardised target) or binary cross-entropy, evaluating on the
validation split after every epoch and stopping after ``patience`` (16) epochs without improvement or at
``max_epochs``; the best validation state is kept.  Everything random (initialisation, batch order,
dropout) is drawn from generators seeded with ``seed``, so the same data, configuration and seed give
the same weights on the same machine and torch thread count (the thread count is not part of the cache
key: a different count may change the last bits, not the model).

Checkpoint cache
----------------
A trained model is stored under ``dobrushin.paths.cache_dir()/tabular/`` as
``<dataset>-seed<k>-<key>.pt`` plus a ``.json`` sidecar holding its SHA-256 and the training record;
``key`` hashes the data checksum (:attr:`dobrushin.tabular_data.TabularData.checksum`), the model
configuration, the training settings and the seed.  Both files are written atomically.  A checkpoint
is reused only when the sidecar's key and SHA-256 match and the state dict loads strictly; anything
else (truncated, modified, unreadable) is reported as corrupt and the model is retrained.

Attention
---------
Tokens are ``[CLS]`` then one token per numeric feature, then one per categorical feature: this
implementation *prepends* the CLS embedding (``FTTransformer.forward`` puts ``cls_embedding`` first in
the token list and the backbone reads ``x[:, 0]``), so role ``cls`` is position 0 and the others are
``content``.  :func:`capture` hooks every block's attention: the post-softmax probabilities (read at
the module's attention-dropout, which is the identity in eval mode) and the block's attention input
(the normalised token states).  The last block computes only the CLS query (``x[:, :1]``), so its full
``n x n`` matrix is *recomputed* by :func:`recompute_attention`: softmax(QKᵀ/√d_head) from that block's
own input and its ``W_q``/``W_k`` weights, for all queries, with the same operations as
``MultiheadAttention.forward``.  For the earlier blocks the recomputation equals the hooked attention
(checked in the tests), and for the last block its CLS row equals the hooked CLS row.

:func:`extract` returns a :class:`dobrushin.extract.Extraction`; importing this module registers it
as the ``"ft-transformer"`` adapter, so ``dobrushin.extract_attention(model, {"x_num": ..., "x_cat": ...})``
works (and ``(x_num, x_cat)`` tuples wherever the caller's input handling passes them through).
"""
from __future__ import annotations

import copy
import io
import json
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F

from ..store.paths import cache_dir as _default_cache_dir
from ..store.results import atomic_write_bytes, atomic_write_json, params_key
from ..data.tabular_data import TabularData

try:
    import rtdl_revisiting_models as rtdl
except ImportError as e:  # pragma: no cover - a declared dependency
    raise ImportError("dobrushin.tabular needs the 'rtdl-revisiting-models' package") from e

#: position of the [CLS] token in rtdl_revisiting_models.FTTransformer (it is prepended)
CLS_POSITION = 0
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

    ``epochs``: epochs run; ``best_epoch``: epoch (1-based) whose validation score was kept;
    ``history``: per epoch ``{"epoch", "train_loss", "val_score"}``; ``train_seconds``: wall time of the
    original training (also when loaded from the cache); ``from_cache``: loaded, not trained;
    ``cache_note``: why the cache was not used (``"miss"``, ``"corrupt: ..."``, ``"disabled"``) or ``"hit"``.
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


def cache_key(data: TabularData, seed: int, config: dict, settings: dict) -> str:
    """Key of a checkpoint: data checksum + model configuration + training settings + seed."""
    if not data.checksum:
        raise ValueError("the data set has no checksum; build it with dobrushin.tabular_data")
    return params_key({"format": CHECKPOINT_FORMAT, "data": data.checksum, "config": config,
                       "train": settings, "seed": int(seed)})


def _train(data: TabularData, seed: int, config: dict, settings: dict, progress=None):
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
        best, best_state, best_epoch, bad, history = -math.inf, None, 0, 0, []
        epoch = 0
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
            if progress:
                progress(f"{data.name} seed {seed} epoch {epoch}: train loss {total / n:.4f}, val score {val:.4f}")
            if val > best:
                best, best_epoch, bad = val, epoch, 0
                best_state = copy.deepcopy(model.state_dict())
            else:
                bad += 1
                if bad >= int(settings["patience"]):
                    break
    if best_state is None:
        raise RuntimeError(f"{data.name} seed {seed}: no epoch gave a finite validation score (training diverged)")
    model.load_state_dict(best_state)
    model.eval()
    return model, epoch, best_epoch, history, time.perf_counter() - t0


def _paths(root: Path, data: TabularData, seed: int, key: str) -> Tuple[Path, Path]:
    stem = f"{data.name}-seed{int(seed)}-{key}"
    return root / f"{stem}.pt", root / f"{stem}.json"


def _sha256(b: bytes) -> str:
    import hashlib

    return hashlib.sha256(b).hexdigest()


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
    if rec.get("sha256") != _sha256(blob):
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

    ``settings`` override :data:`TRAIN_DEFAULTS` (``batch_size``, ``lr``, ``weight_decay``, ``patience``,
    ``max_epochs``).  ``cache_root`` defaults to ``dobrushin.paths.cache_dir() / "tabular"``.
    ``progress``: optional callable receiving one line per epoch.
    """
    config = model_config(data, **(model_overrides or {}))
    settings = train_settings(**settings)
    key = cache_key(data, seed, config, settings)
    root = Path(cache_root) if cache_root is not None else _default_cache_dir() / "tabular"
    note = "disabled"
    if cache:
        model, rec, note = load_checkpoint(data, seed, config, settings, root)
        if model is not None:
            return TrainResult(model=model, key=key, epochs=rec["epochs"], best_epoch=rec["best_epoch"],
                               history=rec["history"], train_seconds=rec["train_seconds"], from_cache=True,
                               cache_note="hit", checkpoint=_paths(root, data, seed, key)[0], config=config)
        if note.startswith("corrupt"):
            warnings.warn(f"checkpoint for {data.name} seed {seed} is {note}; retraining", UserWarning, stacklevel=2)
    model, epochs, best_epoch, history, secs = _train(data, seed, config, settings, progress)
    pt = None
    if cache:
        pt, meta = _paths(root, data, seed, key)
        buf = io.BytesIO()
        torch.save(model.state_dict(), buf)
        blob = buf.getvalue()
        atomic_write_bytes(pt, blob)
        atomic_write_json(meta, {"key": key, "sha256": _sha256(blob), "dataset": data.name, "seed": int(seed),
                                 "data_checksum": data.checksum, "config": config, "settings": settings,
                                 "epochs": epochs, "best_epoch": best_epoch, "history": history,
                                 "train_seconds": secs, "torch": torch.__version__})
    return TrainResult(model=model, key=key, epochs=epochs, best_epoch=best_epoch, history=history,
                       train_seconds=secs, from_cache=False, cache_note=note, checkpoint=pt, config=config)


# -------------------------------------------------------------------------------------------------
# attention


class _ProbeDropout(torch.nn.Module):
    """Stands in for a block's attention dropout during capture: records its input (the
    post-softmax probabilities) and applies the original dropout (identity in eval mode)."""

    def __init__(self, inner: Optional[torch.nn.Module], store: list):
        super().__init__()
        self.inner, self.store = inner, store

    def forward(self, x):
        self.store.append(x.detach())
        return x if self.inner is None else self.inner(x)


def _attention_modules(model) -> List[Any]:
    if not isinstance(model, rtdl.FTTransformer):
        raise ValueError(f"expected an rtdl_revisiting_models.FTTransformer, got {type(model).__name__}")
    mods = [blk["attention"] for blk in model.backbone.blocks]
    for i, m in enumerate(mods):
        if m.key_compression is not None:
            raise ValueError(f"block {i} uses Linformer key compression: its attention is not square (n x n)")
    return mods


def recompute_attention(attn_module, x: torch.Tensor) -> torch.Tensor:
    """Post-softmax attention ``(B, H, n, n)`` of ``attn_module`` for **all** queries of ``x`` ``(B, n, d)``.

    The same operations as ``rtdl_revisiting_models.MultiheadAttention.forward`` with ``x_q = x_kv = x``:
    ``softmax(W_q(x) W_k(x)ᵀ / √d_head)`` per head (no dropout).
    """
    if x.ndim != 3:
        raise ValueError(f"attention input must be (B, n, d), got shape {tuple(x.shape)}")
    if attn_module.key_compression is not None:
        raise ValueError("Linformer key compression: attention is not square")
    q, k = attn_module.W_q(x), attn_module.W_k(x)
    d_head_key = k.shape[-1] // attn_module._n_heads
    q, k = attn_module._reshape(q), attn_module._reshape(k)
    logits = q @ k.transpose(1, 2) / math.sqrt(d_head_key)
    probs = F.softmax(logits, dim=-1)
    B, n = x.shape[0], x.shape[1]
    return probs.reshape(B, attn_module._n_heads, n, n)


@dataclass
class Capture:
    """What :func:`capture` saw in one forward pass (float32, CPU).

    ``hooked[l]``: ``(B, H, n_q, n)`` attention computed by block ``l`` (``n_q = n`` except the last
    block, where ``n_q = 1``: the CLS query); ``inputs[l]``: ``(B, n, d)`` the block's attention input;
    ``recomputed[l]``: ``(B, H, n, n)`` :func:`recompute_attention` of that input; ``outputs``: model output.
    """

    hooked: List[torch.Tensor]
    inputs: List[torch.Tensor]
    recomputed: List[torch.Tensor]
    outputs: torch.Tensor

    def full(self) -> torch.Tensor:
        """``(B, L, H, n, n)``: hooked attention for the blocks that compute every query, the
        recomputation for the last block (which computes only the CLS query)."""
        layers = [h if h.shape[-2] == h.shape[-1] else r for h, r in zip(self.hooked, self.recomputed)]
        return torch.stack(layers, dim=1)


def _split_inputs(inputs):
    if isinstance(inputs, dict) or hasattr(inputs, "items"):
        unknown = set(inputs) - {"x_num", "x_cat", "x_cont"}
        if unknown:
            raise ValueError(f"FT-Transformer inputs: unknown key(s) {sorted(unknown)}; expected 'x_num', 'x_cat'")
        return inputs.get("x_num", inputs.get("x_cont")), inputs.get("x_cat")
    if isinstance(inputs, (tuple, list)) and len(inputs) == 2:
        return inputs[0], inputs[1]
    raise ValueError("FT-Transformer inputs must be (x_num, x_cat) or {'x_num': ..., 'x_cat': ...} "
                     f"(None for an absent kind), got {type(inputs).__name__}")


@torch.no_grad()
def capture(model, x_num: Optional[torch.Tensor], x_cat: Optional[torch.Tensor]) -> Capture:
    """One eval-mode forward pass of ``model`` recording every block's attention (see :class:`Capture`)."""
    mods = _attention_modules(model)
    was = model.training
    model.eval()
    probs: List[torch.Tensor] = []
    inputs: List[torch.Tensor] = []
    originals = [m.dropout for m in mods]
    handles = []
    try:
        for m in mods:
            m.dropout = _ProbeDropout(m.dropout, probs)
            handles.append(m.register_forward_pre_hook(lambda mod, args: inputs.append(args[1].detach())))
        out = model(x_num, x_cat)
    finally:
        for h in handles:
            h.remove()
        for m, d in zip(mods, originals):
            m.dropout = d
        model.train(was)
    if len(probs) != len(mods) or len(inputs) != len(mods):
        raise RuntimeError(f"captured {len(probs)} attention maps / {len(inputs)} inputs for {len(mods)} blocks")
    hooked, recomputed = [], []
    for m, p, x in zip(mods, probs, inputs):
        B = x.shape[0]
        hooked.append(p.reshape(B, m._n_heads, p.shape[-2], p.shape[-1]).float().cpu())
        recomputed.append(recompute_attention(m, x).float().cpu())
    return Capture(hooked=hooked, inputs=[x.float().cpu() for x in inputs], recomputed=recomputed, outputs=out)


def roles_for(model, n_tokens: int) -> List[str]:
    """Token roles of one FT-Transformer input: ``cls`` at :data:`CLS_POSITION`, ``content`` elsewhere."""
    r = ["content"] * n_tokens
    r[CLS_POSITION] = "cls"
    return r


def _extraction_class():
    from ..capture.extract import Extraction

    return Extraction


def extract(model, inputs, average_heads: bool = True):
    """:class:`dobrushin.extract.Extraction` of an FT-Transformer on ``inputs`` = ``(x_num, x_cat)``
    or ``{"x_num": ..., "x_cat": ...}``: attention ``(B, L, n, n)`` (``(B, L, H, n, n)`` with
    ``average_heads=False``), the last block recomputed for all queries; roles ``cls``/``content``."""
    x_num, x_cat = _split_inputs(inputs)
    cap = capture(model, x_num, x_cat)
    A = cap.full()
    if average_heads:
        A = A.mean(2)
    B, n = A.shape[0], A.shape[-1]
    roles = [roles_for(model, n) for _ in range(B)]
    return _extraction_class()(attention=A.contiguous(), roles=roles, lengths=None, outputs=cap.outputs,
                               adapter="ft-transformer")


def _matches(model) -> bool:
    return isinstance(model, rtdl.FTTransformer)


def _register() -> bool:
    try:
        from ..capture.extract import register_adapter
    except ImportError as e:  # pragma: no cover - extract.py is part of the package
        warnings.warn(f"dobrushin.extract unavailable ({e}); FT-Transformer adapter not registered", UserWarning)
        return False
    register_adapter("ft-transformer", _matches, extract)
    return True


REGISTERED = _register()


def extract_rows(model, data: TabularData, part: str, rows, *, average_heads: bool = True,
                 batch_size: int = 512):
    """:func:`extract` over ``rows`` of split ``part`` in batches; returns ``(attention, roles, outputs)``."""
    rows = np.asarray(rows, dtype=np.int64)
    atts, outs = [], []
    for i in range(0, len(rows), batch_size):
        xn, xc = tensors(data, part, rows[i:i + batch_size])
        ex = extract(model, (xn, xc), average_heads=average_heads)
        atts.append(ex.attention)
        outs.append(ex.outputs)
    A = torch.cat(atts)
    return A, [roles_for(model, A.shape[-1]) for _ in range(A.shape[0])], torch.cat(outs)


#: bump when the measurement's output for the same parameters changes
from ..experiments.measure import MEASURE_VERSION  # noqa: E402  (shared with the other notebooks' cache keys)


def select_rows(n: int, k: Optional[int], seed: int = 0) -> np.ndarray:
    """``k`` row numbers out of ``n`` (seeded, sorted); all rows when ``k`` is None or ≥ n."""
    if k is None or k >= n:
        return np.arange(n)
    if isinstance(k, bool) or int(k) < 1:
        raise ValueError(f"number of rows must be a positive integer or None, got {k!r}")
    return np.sort(np.random.default_rng(seed).choice(n, size=int(k), replace=False))


def measure_rows(model, data: TabularData, part: str, rows, *, model_name: str, weights: str,
                 head_inputs: int = 0, batch_size: int = 512, tol: Optional[float] = None,
                 atol: float = 1e-4) -> dict:
    """Measure the equality condition on ``rows`` of split ``part`` with :func:`extract`.

    Returns ``{"table", "heads", "rollout", "info"}``: the results-schema table (head-averaged
    attention; variants ``content`` and ``with_special``), the per-head table of
    :data:`dobrushin.pipeline.HEAD_COLUMNS` on the first ``head_inputs`` rows (content tokens), the
    rollout table of :data:`dobrushin.pipeline.ROLLOUT_COLUMNS`, and timing info.  Input ids are
    ``"<part>/<row number in the source table>"``.
    """
    import pandas as pd

    from ..math.coefficient import DEFAULT_TOL
    from ..experiments.measure import measure
    from ..experiments.pipeline import HEAD_COLUMNS, ROLLOUT_COLUMNS, _frame, head_rows, rollout_rows

    tol = DEFAULT_TOL if tol is None else tol
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        raise ValueError("no rows to measure")
    ids_all = [f"{part}/{int(data.index[part][r])}" for r in rows]
    tables, rolls, heads = [], [], []
    t0 = time.perf_counter()
    for i in range(0, len(rows), batch_size):
        xn, xc = tensors(data, part, rows[i:i + batch_size])
        ex = extract(model, (xn, xc))
        ids = ids_all[i:i + batch_size]
        t = measure(ex.attention, ex.roles, model=model_name, input_ids=ids, weights=weights, tol=tol, atol=atol)
        tables.append(t)
        rolls.append(rollout_rows(ex.attention, ex.roles, t, model=model_name, input_ids=ids, weights=weights,
                                  atol=atol))
    wall = time.perf_counter() - t0
    k = min(int(head_inputs), len(rows))
    for i in range(0, k, batch_size):
        stop = min(i + batch_size, k)
        xn, xc = tensors(data, part, rows[i:stop])
        ex = extract(model, (xn, xc), average_heads=False)
        heads.append(head_rows(ex.attention, ex.roles, model=model_name, input_ids=ids_all[i:stop],
                               weights=weights, tol=tol, atol=atol))
    return {"table": pd.concat(tables, ignore_index=True),
            "heads": _frame(heads, HEAD_COLUMNS) if heads else _frame([], HEAD_COLUMNS),
            "rollout": _frame(rolls, ROLLOUT_COLUMNS),
            "info": {"status": "ok", "n_inputs": len(rows), "wall_s": round(wall, 3),
                     "inputs_per_s": round(len(rows) / wall, 4) if wall > 0 else None, "head_inputs": k}}


def measure_and_store(store, slug: str, *, models: Dict[str, Any], data: TabularData, rows, model_name: str,
                      key_params: dict, head_inputs: int = 0, batch_size: int = 512, force: bool = False,
                      tol: Optional[float] = None, atol: float = 1e-4, **info) -> dict:
    """Measure each of ``models`` (``{"pretrained": trained model, "untrained": seeded init}``) on the
    test ``rows`` and write ``<slug>.parquet`` (both weights), ``<slug>.heads.parquet`` and
    ``<slug>.rollout.parquet`` through ``store`` (a :class:`dobrushin.results.ResultStore`), with the
    manifest fields of :mod:`dobrushin.pipeline`.  Reused without recomputation when the manifest holds
    the same parameters (``key_params`` — which must identify the trained checkpoint — plus rows,
    head inputs, tolerances and versions) and all three files are intact.

    Returns ``{"table", "heads", "rollout", "entry", "cached"}``.
    """
    import pandas as pd

    from ..math.coefficient import DEFAULT_TOL
    from ..experiments.pipeline import HEAD_COLUMNS, ROLLOUT_COLUMNS, _frame, _load_cached, describe_device

    bad = set(models) - {"pretrained", "untrained"}
    if bad or not models:
        raise ValueError(f"models must be keyed by 'pretrained' and/or 'untrained', got {sorted(models)}")
    tol = DEFAULT_TOL if tol is None else tol
    rows = np.asarray(rows, dtype=np.int64)
    import hashlib

    params = {"measure_version": MEASURE_VERSION, **key_params, "weights": sorted(models),
              "rows": hashlib.sha256(rows.tobytes()).hexdigest()[:16], "n_rows": len(rows),
              "head_inputs": int(head_inputs), "tol": tol, "atol": atol, "torch": torch.__version__,
              "rtdl_revisiting_models": rtdl.__version__}
    if not force:
        hit = _load_cached(store, slug, params)
        if hit is not None:
            return {**hit, "cached": True}
    t0 = time.perf_counter()
    results, runs = [], {}
    for w in ("pretrained", "untrained"):
        if w in models:
            r = measure_rows(models[w], data, "test", rows, model_name=model_name, weights=w,
                             head_inputs=head_inputs, batch_size=batch_size, tol=tol, atol=atol)
            runs[w] = {**r["info"], "device": describe_device(torch.device("cpu"))}
            results.append(r)
    wall = time.perf_counter() - t0
    loop = sum(r["wall_s"] for r in runs.values())
    entry_info = {"status": "ok", "model": model_name, "family": "ft-transformer", "wall_s": round(wall, 3),
                  "device": describe_device(torch.device("cpu")),
                  "inputs_per_s": round(sum(r["n_inputs"] for r in runs.values()) / loop, 4) if loop > 0 else None,
                  "runs": runs, **info}
    table = pd.concat([r["table"] for r in results], ignore_index=True)
    heads = _frame([r["heads"] for r in results], HEAD_COLUMNS)
    roll = _frame([r["rollout"] for r in results], ROLLOUT_COLUMNS)
    entry = store.save(slug, params, table, secondary={"heads": heads, "rollout": roll}, **entry_info)
    return {"table": store.load(slug, params)[0], "heads": heads, "rollout": roll, "entry": entry, "cached": False}


__all__ = ["CLS_POSITION", "tensors", "MEASURE_VERSION", "measure_and_store", "measure_rows", "select_rows", "Capture", "TRAIN_DEFAULTS", "TrainResult", "cache_key", "capture", "extract",
           "extract_rows", "fit", "load_checkpoint", "make_model", "model_config", "predict",
           "recompute_attention", "roles_for", "score", "train_settings"]
