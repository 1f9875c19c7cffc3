"""A causal test of why MPNet fails the equality condition: ablate its distance-0 relative position bias.

MPNet adds a learned bias ``b[bucket(j - i), head]`` to every attention score (``encoder.relative_attention_bias``,
an ``Embedding(buckets, heads)``; the bucket of a relative position comes from the model's own
``relative_position_bucket``).  In all-mpnet-base-v2 the bucket of distance 0 holds a strongly negative bias,
which pushes the score of a token with itself down before the softmax.  :func:`ablate_distance0` sets that one
row to the mean of the rows of distance −1 and +1 (head by head) in a copy of the model; :func:`run_ablation`
measures the original and the ablated copy on the same sentences with the book's one measurement
(:func:`dobrushin.experiments.measure.measure`), per layer, and compares their sentence embeddings (mean of the
last hidden states over the real tokens, as sentence-transformers pools all-mpnet-base-v2; the cosine is
unaffected by its final normalisation).
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
ABLATION_COLUMNS = ("model", "weights", "condition", "variant", "layer", "k", "n", "fraction", "mean_self")


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
    rows (per head); every other parameter is unchanged.  ``info``: the buckets and the per-head bias before and
    after (``before``, ``after``, ``neighbours`` arrays over heads)."""
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
    """``layers``: per (condition, variant, layer) the pairs holding (``k`` of ``n``), their ``fraction`` and the
    mean head-averaged self-attention ``mean_self`` (content tokens, rows renormalised); ``table``: the tidy
    per-(input, layer, variant) table of both conditions (column ``condition`` added to the results schema);
    ``cosine``: per sentence, the cosine between the original and the ablated embedding; ``info``: the bias
    before and after (:func:`ablate_distance0`)."""

    layers: pd.DataFrame
    table: pd.DataFrame
    cosine: np.ndarray
    info: dict = field(default_factory=dict)


def _run(model, preprocess, texts, *, model_id: str, weights: str, batch_size: int):
    tables, embs, selfs = [], [], []
    for s in range(0, len(texts), batch_size):
        batch = list(texts[s:s + batch_size])
        inputs = preprocess(batch)
        ex = extract_attention(model, inputs)
        ids = [f"s{s + b}" for b in range(len(batch))]
        tables.append(measure(ex.attention, ex.roles, model=model_id, input_ids=ids, weights=weights))
        embs.append(mean_pooled(ex.outputs, inputs["attention_mask"]).detach().double().cpu())
        for b in range(len(batch)):
            idx = torch.as_tensor(ex.keep(b, "content"), dtype=torch.long)
            if len(idx) < 2:
                continue
            A = ex.attention[b].double().index_select(-2, idx).index_select(-1, idx)
            A = A / A.sum(-1, keepdim=True)
            selfs.append(pd.DataFrame({"input_id": ids[b], "layer": np.arange(A.shape[0]),
                                       "self": A.diagonal(dim1=-2, dim2=-1).mean(-1).numpy()}))
    return pd.concat(tables, ignore_index=True), torch.cat(embs), pd.concat(selfs, ignore_index=True)


def _per_layer(table: pd.DataFrame, selfs: pd.DataFrame) -> pd.DataFrame:
    g = (table.groupby(["model", "weights", "condition", "variant", "layer"], sort=False)["holds"]
         .agg(k="sum", n="count").reset_index())
    g["k"] = g["k"].astype(int)
    g["fraction"] = g["k"] / g["n"]
    ms = selfs.groupby(["condition", "layer"])["self"].mean().rename("mean_self").reset_index()
    return g.merge(ms, on=["condition", "layer"], how="left")[list(ABLATION_COLUMNS)]


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
    parts, embs, selfs = [], {}, []
    for cond, model in (("original", lm.model), ("ablated", ablated)):
        t, e, sa = _run(model, lm.preprocess, texts, model_id=mid, weights=weights, batch_size=int(batch_size))
        parts.append(t.assign(condition=cond))
        selfs.append(sa.assign(condition=cond))
        embs[cond] = e
    table = pd.concat(parts, ignore_index=True)
    cos = torch.nn.functional.cosine_similarity(embs["original"], embs["ablated"], dim=-1).numpy()
    return AblationResult(layers=_per_layer(table, pd.concat(selfs, ignore_index=True)), table=table, cosine=cos,
                          info=info)


__all__ = ["ABLATION_COLUMNS", "AblationResult", "ablate_distance0", "distance_buckets", "mean_pooled", "run_ablation"]
