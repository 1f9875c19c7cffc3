"""The measurement path as it was before the streaming change (commit 643e18f), kept verbatim as the
reference of tests/test_streaming.py: ``measure``, ``rollout_rows`` and ``head_rows`` from
``experiments/measure.py`` and the batch loop of ``pipeline.run_weights`` (main pass, then a second
forward pass for the per-head table in batches of at most two).  Not used by the library."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from dobrushin.capture.extract import to_device
from dobrushin.capture.roles import keep_indices
from dobrushin.math.coefficient import DEFAULT_TOL, analyse, kappa, restrict, rollout
from dobrushin.store.results import HEAD_COLUMNS, ROLLOUT_COLUMNS, SCHEMA, VARIANTS, frame

#: the columns of the tidy table before the margins were added
OLD_COLUMNS = ["model", "input_id", "layer", "n_tokens", "kappa", "kappa_factor", "bound", "slack", "holds",
               "variant", "weights"]
def measure(
    attention,
    roles: Sequence[Sequence[str]],
    *,
    model: str,
    input_ids: Sequence[str],
    weights: str,
    variants: Sequence[str] = ("content", "with_special"),
    tol: float = DEFAULT_TOL,
    atol: float = 1e-4,
) -> pd.DataFrame:
    """Test the equality condition on every input x layer x variant.

    ``attention``: ``(B, L, n, n)`` head-averaged post-softmax attention (numpy or torch);
    ``roles[b]``: the role of each of the n tokens of input b.  The kept tokens' submatrix is
    renormalised with :func:`dobrushin.restrict` before the test (``atol`` is the tolerance on
    the row sums of the captured float32 attention).  Inputs with the same kept-token layout are
    analysed as one batch.  An input that keeps fewer than two tokens in a variant (e.g. a one-word
    sentence on content tokens) has no pair to test and contributes no rows to that variant.
    """
    A = attention if isinstance(attention, torch.Tensor) else torch.as_tensor(np.asarray(attention))
    A = A.detach().to("cpu", torch.float64)
    if A.ndim != 4:
        raise ValueError(f"attention must be (B, L, n, n), got shape {tuple(A.shape)}")
    B, L = A.shape[:2]
    if len(roles) != B or len(input_ids) != B:
        raise ValueError(f"got {B} inputs but {len(roles)} role lists and {len(input_ids)} input ids")
    frames = []
    for variant in variants:
        groups: dict = defaultdict(list)
        for b in range(B):
            if len(roles[b]) != A.shape[-1]:
                raise ValueError(f"input {b}: {len(roles[b])} roles for {A.shape[-1]} tokens")
            groups[tuple(keep_indices(roles[b], variant).tolist())].append(b)
        for keep, members in groups.items():
            if len(keep) < 2:
                # fewer than two kept tokens: no pair exists, so the condition is vacuous (κ = 0 and
                # the test would count a "failure" that says nothing); such inputs are left out
                continue
            sub = restrict(A[members], np.asarray(keep, dtype=np.int64), atol=atol)
            res = analyse(sub, tol, validate=False)
            nm = len(members)
            frames.append(pd.DataFrame({
                "model": model,
                "input_id": np.repeat([str(input_ids[b]) for b in members], L),
                "layer": np.tile(np.arange(L), nm),
                "n_tokens": len(keep),
                "kappa": res.kappa.ravel(),
                "kappa_factor": res.kappa_factor.ravel(),
                "bound": res.bound.ravel(),
                "slack": res.slack.ravel(),
                "holds": res.holds.ravel(),
                "variant": variant,
                "weights": weights,
            }))
    if not frames:
        raise ValueError("no input kept two or more tokens")
    df = pd.concat(frames, ignore_index=True)
    return df[OLD_COLUMNS].astype({c: SCHEMA[c] for c in OLD_COLUMNS}).reset_index(drop=True)


def rollout_rows(attention: torch.Tensor, roles: Sequence[Sequence[str]], table: pd.DataFrame, *,
                 model: str, input_ids: Sequence[str], weights: str,
                 variants: Sequence[str] = VARIANTS, atol: float = 1e-4) -> pd.DataFrame:
    """Rollout of the restricted, renormalised per-layer matrices of each input vs its bounds.

    ``table`` is the :func:`~dobrushin.experiments.measure.measure` output for the same batch; the products of
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
    return frame(rows, ROLLOUT_COLUMNS)


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
    return frame(frames, HEAD_COLUMNS)



def run_weights_old(lm, inputs, *, extractor, weights, config):
    """The old loop of pipeline.run_weights (CPU): tables, rollout and the per-head second pass."""
    cfg, model_id, model = config, lm.model_id, lm.model
    model.eval()
    tables, rolls, heads = [], [], []
    n = len(inputs)
    for start in range(0, n, cfg.batch_size):
        ids = inputs.ids[start:start + cfg.batch_size]
        ex = extractor(model, to_device(lm.preprocess(inputs.items(start, start + cfg.batch_size)), "cpu"))
        t = measure(ex.attention, ex.roles, model=model_id, input_ids=ids, weights=weights,
                    variants=cfg.variants, tol=cfg.tol, atol=cfg.atol)
        tables.append(t)
        rolls.append(rollout_rows(ex.attention, ex.roles, t, model=model_id, input_ids=ids,
                                  weights=weights, variants=cfg.variants, atol=cfg.atol))
    k = min(cfg.head_inputs, n)
    hb = max(1, min(cfg.batch_size, 2))
    for start in range(0, k, hb):
        stop = min(start + hb, k)
        ex = extractor(model, to_device(lm.preprocess(inputs.items(start, stop)), "cpu"), average_heads=False)
        heads.append(head_rows(ex.attention, ex.roles, model=model_id, input_ids=inputs.ids[start:stop],
                               weights=weights, variants=cfg.head_variants, tol=cfg.tol, atol=cfg.atol))
    return (pd.concat(tables, ignore_index=True), pd.concat(rolls, ignore_index=True), frame(heads, HEAD_COLUMNS))
