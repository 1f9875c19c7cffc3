"""A causal test of why MPNet fails the equality condition: ablate its distance-0 relative position bias.

MPNet adds a learned bias ``b[bucket(j - i), head]`` (``encoder.relative_attention_bias``) to every attention
score; in all-mpnet-base-v2 distance 0 holds a strongly negative bias.  :func:`ablate_distance0` replaces that
row by the mean of the distance −1 and +1 rows in a copy of the model; :func:`run_ablation` measures both
models per layer and compares their mean-pooled sentence embeddings.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..capture.extract import extract_attention
from .measure import measure

#: columns of the per-layer ablation table
ABLATION_COLUMNS = ("model", "weights", "condition", "variant", "layer", "k", "n", "fraction", "trace")


def _bias_module(model):
    enc = getattr(model, "encoder", None)
    emb = getattr(enc, "relative_attention_bias", None)
    fn = getattr(enc, "relative_position_bucket", None)
    if emb is None or fn is None or getattr(emb, "weight", None) is None or emb.weight.ndim != 2:
        raise ValueError(f"{type(model).__name__} has no learned relative position bias "
                         "(encoder.relative_attention_bias with encoder.relative_position_bucket)")
    return enc, emb, fn


def distance_buckets(model) -> dict:
    """``{-1: bucket, 0: bucket, 1: bucket}``: the buckets of relative positions −1, 0, +1 (key − query), from the
    model's own bucketing function and number of buckets."""
    _, emb, fn = _bias_module(model)
    rel = torch.tensor([-1, 0, 1], dtype=torch.long)
    b = fn(rel, num_buckets=int(emb.weight.shape[0])).tolist()
    if len(set(b)) != 3:
        raise ValueError(f"relative positions −1, 0, +1 share a bucket ({b}); the ablation needs them apart")
    return {-1: int(b[0]), 0: int(b[1]), 1: int(b[2])}


def ablate_distance0(model):
    """``(copy, info)``: a deep copy of ``model`` whose distance-0 bias row is the mean of the distance −1 and +1
    rows (per head); ``info``: the ``buckets`` and the per-head rows ``before``, ``after``, ``minus1``, ``plus1``."""
    buckets = distance_buckets(model)
    ablated = copy.deepcopy(model)
    _, emb, _ = _bias_module(ablated)
    with torch.no_grad():
        w = emb.weight
        before = w[buckets[0]].detach().clone()
        new = 0.5 * (w[buckets[-1]] + w[buckets[1]])
        w[buckets[0]] = new
    return ablated, {"buckets": buckets, "before": before.double().numpy(), "after": new.detach().double().numpy(),
                     "minus1": w[buckets[-1]].detach().double().numpy(),
                     "plus1": w[buckets[1]].detach().double().numpy()}


def mean_pooled(outputs, attention_mask) -> torch.Tensor:
    """Sentence embeddings: the mean of the last hidden states over the real (unmasked) tokens, ``(B, d)``."""
    h = outputs[0] if isinstance(outputs, (tuple, list)) else outputs.last_hidden_state
    m = attention_mask.to(h.dtype).unsqueeze(-1).to(h.device)
    return (h * m).sum(1) / m.sum(1).clamp_min(1)


@dataclass
class AblationResult:
    """``layers``: per (condition, variant, layer) ``k`` of ``n`` pairs holding and the mean ``trace`` of the
    restricted attention; ``table``: the tidy table of both conditions (plus ``condition``); ``cosine``: per
    sentence, original vs ablated embedding; ``info``: as :func:`ablate_distance0`."""

    layers: pd.DataFrame
    table: pd.DataFrame
    cosine: np.ndarray
    info: dict = field(default_factory=dict)


def _run(model, preprocess, texts, *, model_id: str, weights: str, batch_size: int):
    tables, embs = [], []
    for s in range(0, len(texts), batch_size):
        batch = list(texts[s:s + batch_size])
        inputs = preprocess(batch)
        ex = extract_attention(model, inputs)
        ids = [f"s{s + b}" for b in range(len(batch))]
        tables.append(measure(ex.attention, ex.roles, model=model_id, input_ids=ids, weights=weights))
        embs.append(mean_pooled(ex.outputs, inputs["attention_mask"]).detach().double().cpu())
    return pd.concat(tables, ignore_index=True), torch.cat(embs)


def _per_layer(table: pd.DataFrame) -> pd.DataFrame:
    g = (table.groupby(["model", "weights", "condition", "variant", "layer"], sort=False)
         .agg(k=("holds", "sum"), n=("holds", "count"), trace=("trace", "mean")).reset_index())
    g["k"] = g["k"].astype(int)
    g["fraction"] = g["k"] / g["n"]
    return g[list(ABLATION_COLUMNS)]


def run_ablation(lm, texts: Sequence[str], *, batch_size: int = 8) -> AblationResult:
    """Measure ``lm`` (a text :class:`dobrushin.models.LoadedModel` with a relative position bias) and its
    distance-0-ablated copy on ``texts``: per-layer fractions holding, the tidy tables and the embedding cosines."""
    texts = list(texts)
    if not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("run_ablation expects a non-empty list of sentences")
    if int(batch_size) < 1:
        raise ValueError(f"batch_size must be ≥ 1, got {batch_size!r}")
    ablated, info = ablate_distance0(lm.model)
    weights = getattr(lm, "weights", "pretrained") or "pretrained"
    mid = getattr(lm, "model_id", type(lm.model).__name__)
    parts, embs = [], {}
    for cond, model in (("original", lm.model), ("ablated", ablated)):
        t, e = _run(model, lm.preprocess, texts, model_id=mid, weights=weights, batch_size=int(batch_size))
        parts.append(t.assign(condition=cond))
        embs[cond] = e
    table = pd.concat(parts, ignore_index=True)
    cos = torch.nn.functional.cosine_similarity(embs["original"], embs["ablated"], dim=-1).numpy()
    return AblationResult(layers=_per_layer(table), table=table, cosine=cos, info=info)


def measured_ablation(store, subject: str, texts: Sequence[str], ids: Sequence[str], *, provenance, seed: int,
                      max_length) -> dict:
    """The ablation of ``subject``, trained and untrained, as a keyed analysis of ``store`` (reused while the
    sentences' SHA-256, code, package versions and weights ``provenance`` are the same).
    ``{weights: {"layers": rows of ABLATION_COLUMNS, "cosine": [...], "info": {...}}}``; an untrained control that
    could not be built is ``{"error": why}``; the trained weights failing to load raise."""
    import hashlib

    from ..models.loading import load_model
    from .environment import key_versions

    def one(pretrained: bool) -> dict:
        lm = load_model(subject, pretrained=pretrained, seed=seed, max_length=max_length)
        r = run_ablation(lm, texts)
        return {"layers": r.layers.to_dict("records"), "cosine": r.cosine.tolist(),
                "info": {k: (v.tolist() if hasattr(v, "tolist") else {str(b): n for b, n in v.items()})
                         for k, v in r.info.items()}}

    def compute() -> dict:
        out = {"pretrained": one(True)}
        try:
            out["untrained"] = one(False)
        except Exception as e:  # noqa: BLE001 - the control is optional; the trained result stands, with why
            out["untrained"] = {"error": f"{type(e).__name__}: {e}"}
        return out

    texts = list(texts)
    params = {"analysis": "distance-0 ablation", "model": subject, "inputs": list(map(str, ids)),
              "texts_sha256": hashlib.sha256("\x00".join(texts).encode("utf-8")).hexdigest(),
              "provenance": provenance, "seed": int(seed), "max_length": max_length, "versions": key_versions(),
              "device": "cpu"}
    return store.keyed("mpnet-ablation", params, compute)


def check_ablation(value: dict, lm, texts: Sequence[str], *, atol: float) -> dict:
    """``make verify``'s check of a published ablation ``value`` (trained weights), re-measured on ``texts``: equal
    ``k`` of ``n`` per (condition, variant, layer), mean trace within ``atol`` relative (a trace is up to n).
    ``{"rows", "mismatches", "number_failures", "max_abs_diff"}``."""
    new = run_ablation(lm, texts).layers
    old = pd.DataFrame(value["pretrained"]["layers"])
    m = old.merge(new, on=["condition", "variant", "layer"], suffixes=("_old", "_new"), how="outer", indicator=True)
    both = m["_merge"] == "both"
    differ = both & ((m["k_old"] != m["k_new"]) | (m["n_old"] != m["n_new"]))
    diff = (m["trace_old"] - m["trace_new"]).abs()
    within = diff <= atol * np.maximum(1.0, m["trace_old"].abs())
    return {"rows": len(m), "mismatches": int((~both).sum() + differ.sum()),
            "number_failures": int((both & ~within).sum()), "max_abs_diff": float(diff[both].max()) if both.any() else 0.0}
