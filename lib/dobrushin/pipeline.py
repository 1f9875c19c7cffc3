"""The measurement pipeline: one model (trained weights and/or the untrained control) over a set
of inputs, to the tidy result tables.

For every weights setting (``"pretrained"``: trained weights via :func:`dobrushin.models.load_model`;
``"untrained"``: the same architecture at a seeded random initialisation) :func:`measure_model`

1. loads the model (a :class:`~dobrushin.models.WeightsUnavailable` for the trained weights is
   recorded as ``status = "weights unavailable: <reason>"`` and the untrained control still runs);
2. runs the inputs in batches (progress bar), captures the head-averaged post-softmax attention of
   every layer with :func:`dobrushin.extract_attention`, and tests the equality condition on every
   (input, layer) with :func:`dobrushin.measure.measure` for the variants ``content`` (content tokens
   only: CLS, registers, distillation, separator and pad tokens removed, rows renormalised with
   :func:`dobrushin.restrict`) and ``with_special`` (all tokens except padding, renormalised);
3. per input and variant, rolls out those *same restricted, renormalised per-layer matrices*
   :math:`\\tilde A_l` — :math:`R = F_L\\cdots F_1`, :math:`F_l = \\tfrac12(I+\\tilde A_l)`
   (:func:`dobrushin.rollout`) — and compares :math:`\\kappa(R)` with
   :math:`\\prod_l \\kappa(F_l)` and the whole-rollout bound :math:`\\prod_l \\tfrac12(1+\\kappa(\\tilde A_l))`
   (:func:`dobrushin.rollout_bound`);  this is *not* the rollout of the full attention over all tokens;
4. per head (no head averaging), on the first ``head_inputs`` inputs only so memory and time stay
   bounded, tests the condition on each head's restricted attention;
5. times the loop (inputs per second, device) and writes everything through
   :class:`dobrushin.results.ResultStore`.

Files, per model (``<slug>`` = :func:`dobrushin.results.slugify` of the id), in ``results/<notebook>/``:
``<slug>.parquet`` (the :data:`~dobrushin.results.SCHEMA` table, both weights), ``<slug>.heads.parquet``
(:data:`HEAD_COLUMNS`), ``<slug>.rollout.parquet`` (:data:`ROLLOUT_COLUMNS`) and the manifest entry.

Manifest entry (``results/<notebook>/manifest.json``, key = slug): ``status``, ``model`` (the model id,
as in the table's ``model`` column), ``display`` (short name), ``family``, ``wall_s``, ``device``,
``inputs_per_s``, ``inputs`` (description of the selection), ``runs`` (per weights setting: status,
inputs, load/measure/head times, loader notes), the secondary files and their SHA-256, and the
cache parameters.

Caching: the parameter key covers everything that affects the numbers — model id, weights settings,
the selected input ids (SHA-256 of the ordered ids) and their source, numbers of inputs, seed, image size, text length, batch
size, tolerances, variants, head subset, device type and the versions of torch, transformers, timm
and dobrushin.  A re-run with the same key reuses the files when all three are intact (SHA-256 in
the manifest); a missing, partial or corrupt file triggers a full recomputation.  A cached entry
whose trained weights were unavailable is re-checked (one cheap load attempt) so that weights that
have since become available are used.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence

import numpy as np
import pandas as pd
import torch

from .core import DEFAULT_TOL, analyse, kappa, restrict, rollout
from .measure import MEASURE_VERSION, keep_indices, measure
from .results import (
    SCHEMA,
    VARIANTS,
    WEIGHTS,
    ResultStore,
    conform,
    sha256_file,
    slugify,
)
from .stats import wilson

#: bump when the pipeline's output for the same parameters changes
PIPELINE_VERSION = 1

#: columns of ``<slug>.heads.parquet``: the condition per input x layer x head (head attention, not averaged)
HEAD_COLUMNS = {
    "model": "string", "weights": "string", "input_id": "string", "layer": "int64", "head": "int64",
    "variant": "string", "n_tokens": "int64", "kappa": "float64", "slack": "float64", "holds": "bool",
}
#: columns of ``<slug>.rollout.parquet``: per input x variant, κ of the rollout of the restricted
#: per-layer matrices vs the product of the per-factor coefficients and the product of the layer bounds
ROLLOUT_COLUMNS = {
    "model": "string", "weights": "string", "input_id": "string", "variant": "string",
    "n_layers": "int64", "n_tokens": "int64", "kappa_rollout": "float64", "factor_product": "float64",
    "bound": "float64", "layers_holding": "int64",
}


def _frame(rows_or_frames, columns: Dict[str, str]) -> pd.DataFrame:
    if isinstance(rows_or_frames, pd.DataFrame):
        df = rows_or_frames
    elif rows_or_frames and isinstance(rows_or_frames[0], pd.DataFrame):
        df = pd.concat(rows_or_frames, ignore_index=True)
    else:
        df = pd.DataFrame(rows_or_frames, columns=list(columns))
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"table lacks columns {missing}")
    return df[list(columns)].astype(columns).reset_index(drop=True)


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; otherwise ``torch.device(device)``."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"unknown device {device!r}: {e}") from None
    if d.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available")
    return d


def describe_device(d: torch.device) -> str:
    """``"cpu (2 threads)"`` or ``"cuda:0 (NVIDIA H200)"``."""
    if d.type == "cuda":
        return f"{d} ({torch.cuda.get_device_name(d)})"
    return f"{d} ({torch.get_num_threads()} threads)"


def versions() -> Dict[str, str]:
    """Versions of the packages whose behaviour affects the numbers."""
    import importlib.metadata as md

    out = {"python": sys.version.split()[0], "numpy": np.__version__, "torch": torch.__version__}
    for pkg in ("transformers", "timm", "dobrushin"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            out[pkg] = "not installed"
    return out


def display_name(model_id: str) -> str:
    """Short name for tables and figures: the last path component of the id."""
    return str(model_id).rstrip("/").split("/")[-1]


@dataclass
class ModelRun:
    """Everything measured for one model.

    ``table``: the tidy :data:`~dobrushin.results.SCHEMA` table (both weights); ``heads``,
    ``rollout``: the secondary tables; ``status``: ``"ok"`` or ``"weights unavailable: <reason>"``
    (about the trained weights); ``runs``: per weights setting, ``{"status", "n_inputs", "wall_s",
    "inputs_per_s", "device", "notes", ...}``; ``entry``: the manifest entry; ``cached``: reused.
    """

    model_id: str
    slug: str
    status: str
    table: pd.DataFrame
    heads: pd.DataFrame
    rollout: pd.DataFrame
    runs: Dict[str, dict]
    entry: dict
    cached: bool = False

    @property
    def name(self) -> str:
        return display_name(self.model_id)


# ------------------------------------------------------------------------------------------------
# per-batch computations


def rollout_rows(attention: torch.Tensor, roles: Sequence[Sequence[str]], table: pd.DataFrame, *,
                 model: str, input_ids: Sequence[str], weights: str,
                 variants: Sequence[str] = VARIANTS, atol: float = 1e-4) -> pd.DataFrame:
    """Rollout of the restricted, renormalised per-layer matrices of each input vs its bounds.

    ``table`` is the :func:`~dobrushin.measure.measure` output for the same batch; the products of
    ``kappa_factor`` (κ(½(I+Ã_l))) and ``bound`` (½(1+κ(Ã_l))) over layers are taken from it, so the
    rollout is compared with exactly the per-layer numbers of the tidy table.
    """
    A = attention.detach().to("cpu", torch.float64)
    L = A.shape[1]
    prods = (table.assign(lk=np.log(table["kappa_factor"].to_numpy(float)),
                          lb=np.log(table["bound"].to_numpy(float)))
             .groupby(["input_id", "variant"], observed=True)
             .agg(lk=("lk", "sum"), lb=("lb", "sum"), layers_holding=("holds", "sum"), L=("layer", "count")))
    rows = []
    for b, iid in enumerate(input_ids):
        for v in variants:
            keep = keep_indices(roles[b], v)
            if keep.size == 0:
                continue
            sub = restrict(A[b], keep, atol=atol)
            k_r = float(kappa(rollout(sub, validate=False), validate=False))
            p = prods.loc[(str(iid), v)]
            if int(p["L"]) != L:
                raise ValueError(f"input {iid}, variant {v}: table has {int(p['L'])} layers, attention {L}")
            rows.append((model, weights, str(iid), v, L, int(keep.size), k_r, float(np.exp(p["lk"])),
                         float(np.exp(p["lb"])), int(p["layers_holding"])))
    return _frame(rows, ROLLOUT_COLUMNS)


def head_rows(attention: torch.Tensor, roles: Sequence[Sequence[str]], *, model: str,
              input_ids: Sequence[str], weights: str, variants: Sequence[str] = ("content",),
              tol: float = DEFAULT_TOL, atol: float = 1e-4) -> pd.DataFrame:
    """The condition on each head's restricted attention; ``attention`` is ``(B, L, H, n, n)``."""
    A = attention.detach().to("cpu", torch.float64)
    if A.ndim != 5:
        raise ValueError(f"per-head attention must be (B, L, H, n, n), got shape {tuple(A.shape)}")
    B, L, H = A.shape[:3]
    frames = []
    for b in range(B):
        for v in variants:
            keep = keep_indices(roles[b], v)
            if keep.size == 0:
                continue
            res = analyse(restrict(A[b], keep, atol=atol), tol, validate=False)
            frames.append(pd.DataFrame({
                "model": model, "weights": weights, "input_id": str(input_ids[b]),
                "layer": np.repeat(np.arange(L), H), "head": np.tile(np.arange(H), L), "variant": v,
                "n_tokens": int(keep.size), "kappa": res.kappa.ravel(), "slack": res.slack.ravel(),
                "holds": res.holds.ravel(),
            }))
    return _frame(frames, HEAD_COLUMNS)


# ------------------------------------------------------------------------------------------------
# one model


def _default_loader():
    from .models import load_model

    return load_model


def _default_extractor():
    from .extract import extract_attention

    return extract_attention


def _unavailable_types():
    from .models import ArchitectureUnavailable, WeightsUnavailable

    return WeightsUnavailable, ArchitectureUnavailable


def _status_of(exc: BaseException) -> str:
    WU, AU = _unavailable_types()
    reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    if isinstance(exc, AU):
        return f"architecture unavailable: {reason}"
    try:
        from .models import unavailable_status

        s = unavailable_status(exc)
        if isinstance(s, str) and s.startswith("weights unavailable"):
            return s
    except Exception:  # noqa: BLE001 - stub or other failure: fall back to the plain format
        pass
    return f"weights unavailable: {reason}"


def _to_device(x, device: torch.device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: _to_device(v, device) for k, v in x.items()}
    return x


def progress_enabled(requested: bool = True, stream=None) -> bool:
    """Whether to draw a progress bar: only when asked for and ``stream`` (default stdout) is a
    terminal. Under papermill / in the book the stream is not a terminal, so no bar is printed."""
    stream = sys.stdout if stream is None else stream
    try:
        return bool(requested) and bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def _progress(total: int, desc: str, enabled: bool):
    from tqdm.std import tqdm

    return tqdm(total=total, desc=desc, unit="input", file=sys.stdout, disable=not progress_enabled(enabled),
                mininterval=15.0, ascii=True, dynamic_ncols=False, ncols=80)


def _run_weights(lm, inputs, *, extractor, model_id: str, weights: str, batch_size: int,
                 head_inputs: int, head_variants, variants, tol, atol, device, progress) -> dict:
    model = lm.model.to(device)
    model.eval()
    tables, rolls, heads = [], [], []
    n = len(inputs)
    t0 = time.perf_counter()
    with _progress(n, f"{display_name(model_id)} [{weights}]", progress) as bar:
        for start in range(0, n, batch_size):
            ids = inputs.ids[start:start + batch_size]
            x = _to_device(lm.preprocess(inputs.items(start, start + batch_size)), device)
            ex = extractor(model, x)
            if ex.attention.ndim != 4:
                raise ValueError(f"{model_id}: expected head-averaged attention (B, L, n, n), "
                                 f"got shape {tuple(ex.attention.shape)}")
            t = measure(ex.attention, ex.roles, model=model_id, input_ids=ids, weights=weights,
                        variants=variants, tol=tol, atol=atol)
            tables.append(t)
            rolls.append(rollout_rows(ex.attention, ex.roles, t, model=model_id, input_ids=ids,
                                      weights=weights, variants=variants, atol=atol))
            del ex
            bar.update(len(ids))
    wall = time.perf_counter() - t0
    # per-head subset: small batches, heads not averaged
    th = time.perf_counter()
    k = min(head_inputs, n)
    hb = max(1, min(batch_size, 2))
    for start in range(0, k, hb):
        stop = min(start + hb, k)
        x = _to_device(lm.preprocess(inputs.items(start, stop)), device)
        ex = extractor(model, x, average_heads=False)
        heads.append(head_rows(ex.attention, ex.roles, model=model_id, input_ids=inputs.ids[start:stop],
                               weights=weights, variants=head_variants, tol=tol, atol=atol))
        del ex
    head_s = time.perf_counter() - th
    model.to("cpu")
    return {
        "table": pd.concat(tables, ignore_index=True),
        "rollout": pd.concat(rolls, ignore_index=True),
        "heads": _frame(heads, HEAD_COLUMNS) if heads else _frame([], HEAD_COLUMNS),
        "info": {"status": "ok", "n_inputs": n, "wall_s": round(wall, 3),
                 "inputs_per_s": round(n / wall, 4) if wall > 0 else None,
                 "head_inputs": k, "head_wall_s": round(head_s, 3),
                 "family": getattr(lm, "family", "") or "", "notes": getattr(lm, "notes", "") or "",
                 "source": getattr(lm, "source", "") or ""},
    }


def _inputs_key(inputs) -> dict:
    """The selection's identity: source, seed, count and a SHA-256 of the ordered ids (the ids
    themselves are in the tables)."""
    import hashlib

    k = dict(inputs.key())
    ids = k.pop("ids")
    k["n"] = len(ids)
    k["ids_sha256"] = hashlib.sha256("\n".join(map(str, ids)).encode()).hexdigest()
    return k


def cache_params(model_id: str, inputs, *, weights: Sequence[str], n_untrained: Optional[int], batch_size: int,
                 seed: int, image_size: int, max_length: int, head_inputs: int, head_variants, variants,
                 tol: float, atol: float, device: torch.device) -> dict:
    """The parameter mapping whose hash keys the cache (everything that affects the numbers)."""
    return {
        "pipeline_version": PIPELINE_VERSION, "measure_version": MEASURE_VERSION, "model_id": model_id, "weights": list(weights),
        "inputs": _inputs_key(inputs), "n_inputs": len(inputs), "n_untrained": n_untrained,
        "batch_size": batch_size, "seed": seed, "image_size": image_size, "max_length": max_length,
        "head_inputs": head_inputs, "head_variants": list(head_variants), "variants": list(variants),
        "tol": tol, "atol": atol, "device_type": device.type, "versions": versions(),
    }


def _load_cached(store: ResultStore, slug: str, params: dict):
    hit = store.load(slug, params)
    if hit is None:
        return None
    table, entry = hit
    out = {"table": table, "entry": entry}
    for what, cols in (("heads", HEAD_COLUMNS), ("rollout", ROLLOUT_COLUMNS)):
        p = store.path(slug, f".{what}.parquet")
        if not p.exists() or entry.get(f"{what}_sha256") != sha256_file(p):
            return None
        try:
            out[what] = _frame(pd.read_parquet(p), cols)
        except Exception:  # noqa: BLE001 - corrupt file: recompute
            return None
    return out


def _check_choice(values, allowed, what) -> tuple:
    if isinstance(values, str):
        values = (values,)
    values = tuple(values)
    bad = [v for v in values if v not in allowed]
    if not values or bad:
        raise ValueError(f"{what} must be a non-empty subset of {allowed}, got {values}")
    return values


def measure_model(
    model_id: str,
    inputs,
    *,
    store: ResultStore,
    weights: Sequence[str] = WEIGHTS,
    n_untrained: Optional[int] = None,
    batch_size: int = 8,
    seed: int = 0,
    image_size: int = 224,
    max_length: int = 128,
    head_inputs: int = 4,
    head_variants: Sequence[str] = ("content",),
    variants: Sequence[str] = VARIANTS,
    tol: float = DEFAULT_TOL,
    atol: float = 1e-4,
    device: str = "auto",
    force: bool = False,
    progress: bool = True,
    recheck_unavailable: bool = True,
    loader: Optional[Callable] = None,
    extractor: Optional[Callable] = None,
) -> ModelRun:
    """Measure ``model_id`` on ``inputs`` (an :class:`~dobrushin.inputs.InputSet`); see the module docstring.

    ``weights``: which of ``("pretrained", "untrained")`` to run; ``n_untrained``: inputs for the
    untrained control (a prefix of ``inputs``; None = all); ``head_inputs``: inputs (a prefix) for the
    per-head table; ``force``: ignore the cache.  ``loader(model_id, pretrained=, seed=, image_size=,
    max_length=)`` and ``extractor(model, x, average_heads=)`` default to
    :func:`dobrushin.models.load_model` and :func:`dobrushin.extract_attention`.
    """
    weights = _check_choice(weights, WEIGHTS, "weights")
    variants = _check_choice(variants, VARIANTS, "variants")
    head_variants = _check_choice(head_variants, VARIANTS, "head_variants")
    for name, v, lo in (("batch_size", batch_size, 1), ("head_inputs", head_inputs, 0),
                        ("image_size", image_size, 1), ("max_length", max_length, 2)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    if n_untrained is not None and (isinstance(n_untrained, bool) or not isinstance(n_untrained, (int, np.integer))
                                    or n_untrained < 1):
        raise ValueError(f"n_untrained must be a positive integer or None, got {n_untrained!r}")
    if len(inputs) == 0:
        raise ValueError("no inputs to measure")
    loader = loader or _default_loader()
    extractor = extractor or _default_extractor()
    dev = resolve_device(device)
    slug = slugify(model_id)
    params = cache_params(model_id, inputs, weights=weights, n_untrained=n_untrained, batch_size=batch_size,
                          seed=seed, image_size=image_size, max_length=max_length, head_inputs=head_inputs,
                          head_variants=head_variants, variants=variants, tol=tol, atol=atol, device=dev)
    load_kw = dict(seed=seed, image_size=image_size, max_length=max_length)
    WU, AU = _unavailable_types()

    if not force:
        hit = _load_cached(store, slug, params)
        if hit is not None:
            entry = hit["entry"]
            stale = False
            if recheck_unavailable and "pretrained" in weights and entry.get("status", "ok") != "ok":
                try:  # trained weights may have become available since
                    loader(model_id, pretrained=True, **load_kw)
                    stale = True
                except (WU, AU):
                    pass
            if not stale:
                return ModelRun(model_id, slug, entry.get("status", "ok"), hit["table"], hit["heads"],
                                hit["rollout"], entry.get("runs", {}), entry, cached=True)

    t_all = time.perf_counter()
    runs: Dict[str, dict] = {}
    results = []
    status = "ok"
    family = ""
    for w in weights:
        pretrained = w == "pretrained"
        subset = inputs if pretrained or n_untrained is None else inputs.head(n_untrained)
        tl = time.perf_counter()
        try:
            lm = loader(model_id, pretrained=pretrained, **load_kw)
        except (WU, AU) as e:
            st = _status_of(e)
            runs[w] = {"status": st, "n_inputs": 0}
            if pretrained:
                status = st
            continue
        load_s = time.perf_counter() - tl
        kind = getattr(lm, "kind", None)
        if kind is not None and {"vision": "image", "text": "text"}.get(kind, kind) != inputs.kind:
            raise ValueError(f"{model_id} is a {kind} model but the inputs are {inputs.kind}s")
        r = _run_weights(lm, subset, extractor=extractor, model_id=model_id, weights=w, batch_size=batch_size,
                         head_inputs=head_inputs, head_variants=head_variants, variants=variants, tol=tol,
                         atol=atol, device=dev, progress=progress)
        r["info"]["load_s"] = round(load_s, 3)
        r["info"]["device"] = describe_device(dev)
        family = family or r["info"]["family"]
        runs[w] = r["info"]
        results.append(r)
        del lm
    if not family:
        try:
            from .models import model_family

            family = model_family(model_id)
        except Exception:  # noqa: BLE001
            family = ""
    wall = time.perf_counter() - t_all
    measured = [runs[w] for w in weights if runs.get(w, {}).get("status") == "ok"]
    n_done = sum(r["n_inputs"] for r in measured)
    loop_s = sum(r["wall_s"] for r in measured)
    info = {
        "status": status, "model": model_id, "display": display_name(model_id), "family": family,
        "wall_s": round(wall, 3), "device": describe_device(dev),
        "inputs_per_s": round(n_done / loop_s, 4) if loop_s > 0 else None,
        "inputs": inputs.describe(), "runs": runs,
    }
    if not results:  # nothing could be loaded at all
        entry = store.record(slug, params, **info)
        return ModelRun(model_id, slug, status, _empty_table(), _frame([], HEAD_COLUMNS),
                        _frame([], ROLLOUT_COLUMNS), runs, entry)
    table = pd.concat([r["table"] for r in results], ignore_index=True)
    heads = pd.concat([r["heads"] for r in results], ignore_index=True)
    roll = pd.concat([r["rollout"] for r in results], ignore_index=True)
    heads, roll = _frame(heads, HEAD_COLUMNS), _frame(roll, ROLLOUT_COLUMNS)
    entry = store.save(slug, params, table, secondary={"heads": heads, "rollout": roll}, **info)
    return ModelRun(model_id, slug, status, conform(table), heads, roll, runs, entry)


def _empty_table() -> pd.DataFrame:
    return conform(pd.DataFrame({c: pd.Series(dtype=t) for c, t in SCHEMA.items()}))


def measure_models(model_ids: Sequence[str], inputs, *, store: ResultStore, **kw) -> List[ModelRun]:
    """:func:`measure_model` for each id, in order."""
    if isinstance(model_ids, str):
        model_ids = [model_ids]
    if not model_ids:
        raise ValueError("no models to measure")
    return [measure_model(m, inputs, store=store, **kw) for m in model_ids]


# ------------------------------------------------------------------------------------------------
# summaries (used by the notebooks; plain functions of the tidy tables)


def fractions(table: pd.DataFrame, by: Sequence[str] = ("model", "weights", "variant")) -> pd.DataFrame:
    """Fraction of rows where the condition holds, per group, with Wilson 95% intervals.

    Columns: ``*by, k, n, fraction, ci_low, ci_high``; groups in the order they first appear in ``table``.
    """
    by = [by] if isinstance(by, str) else list(by)
    rows = []
    for key, g in table.groupby(by, sort=False, observed=True):  # groups in order of first appearance
        key = key if isinstance(key, tuple) else (key,)
        k, n = int(g["holds"].sum()), len(g)
        rows.append((*key, k, n, *wilson(k, n)))
    return pd.DataFrame(rows, columns=[*by, "k", "n", "fraction", "ci_low", "ci_high"])


def status_table(runs: Sequence[ModelRun]) -> pd.DataFrame:
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


def head_summary(heads: pd.DataFrame) -> pd.DataFrame:
    """Per model x weights x variant: fraction of (input, layer, head) triples where the condition
    holds (Wilson 95%), and how the per-head fractions (over inputs and layers) spread."""
    if heads.empty:
        return pd.DataFrame(columns=["model", "weights", "variant", "inputs", "heads", "k", "n", "fraction",
                                     "ci_low", "ci_high", "head_min", "head_median", "head_max"])
    f = fractions(heads, ("model", "weights", "variant"))
    per_head = heads.groupby(["model", "weights", "variant", "head"], observed=True)["holds"].mean()
    spread = per_head.groupby(level=[0, 1, 2], observed=True).agg(["min", "median", "max"])
    spread.columns = ["head_min", "head_median", "head_max"]
    counts = heads.groupby(["model", "weights", "variant"], observed=True).agg(
        inputs=("input_id", "nunique"), heads=("head", "nunique"))
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
    m = store.manifest()
    heads, rolls = [], []
    for slug, e in m["entries"].items():
        for what, cols, acc in (("heads", HEAD_COLUMNS, heads), ("rollout", ROLLOUT_COLUMNS, rolls)):
            f = e.get(f"{what}_file")
            if f and (store.dir / f).exists() and e.get(f"{what}_sha256") == sha256_file(store.dir / f):
                acc.append(_frame(pd.read_parquet(store.dir / f), cols))
    return {
        "table": store.tables(),
        "heads": _frame(heads, HEAD_COLUMNS) if heads else _frame([], HEAD_COLUMNS),
        "rollout": _frame(rolls, ROLLOUT_COLUMNS) if rolls else _frame([], ROLLOUT_COLUMNS),
        "entries": m["entries"],
    }


__all__ = [
    "HEAD_COLUMNS", "ModelRun", "PIPELINE_VERSION", "ROLLOUT_COLUMNS", "cache_params", "collect",
    "describe_device", "display_name", "fractions", "head_rows", "head_summary", "measure_model",
    "measure_models", "resolve_device", "rollout_rows", "rollout_summary", "status_table", "versions",
]
