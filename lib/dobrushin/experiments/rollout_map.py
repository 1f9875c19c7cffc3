"""Attention-rollout maps of a vision transformer over its input photos, next to the per-layer slack.

For one photo and a ViT with a CLS token, :func:`cls_rollout_map` takes the head-averaged attention
of every layer over *all* tokens, forms the rollout :math:`R = F_L\\cdots F_1`, :math:`F_\\ell = \\tfrac12(I+A_\\ell)`
(:func:`dobrushin.math.coefficient.rollout`, as in Abnar & Zuidema 2020), and returns the CLS row of
:math:`R` over the patch tokens reshaped to the patch grid: the map that attention papers draw over the
image.  :func:`layer_slack` gives, for the same photo, the slack of the layer bound
:math:`\\tfrac12(1+\\kappa(\\tilde A_\\ell)) - \\kappa(\\tfrac12(I+\\tilde A_\\ell))` per layer on the tokens of
a variant (``content``: the patches, rows renormalised — the quantity the family chapters test).
:func:`rollout_maps` does both for the first ``n`` photos of an input set with a loaded model.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

from ..capture.roles import keep_indices
from ..math.coefficient import kappa, layer_bound, restrict, rollout, rollout_factor


def _stack(attention) -> np.ndarray:
    A = np.asarray(attention.detach().cpu().numpy() if hasattr(attention, "detach") else attention, dtype=np.float64)
    if A.ndim != 3 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"attention must be one input's layer stack (L, n, n), got shape {A.shape}")
    return A


def cls_rollout_map(attention, roles: Sequence[str]) -> np.ndarray:
    """CLS row of the rollout of ½(I + A_ℓ) over all layers (all tokens, no restriction), over the
    content (patch) tokens, reshaped to the square patch grid ``(side, side)``; float64, sums to at most 1."""
    A = _stack(attention)
    roles = list(roles)
    if len(roles) != A.shape[-1]:
        raise ValueError(f"{len(roles)} roles for {A.shape[-1]} tokens")
    if "cls" not in roles:
        raise ValueError("the tokens have no CLS token: there is no CLS row to map")
    patches = keep_indices(roles, "content")
    side = math.isqrt(len(patches))
    if side * side != len(patches) or side == 0:
        raise ValueError(f"{len(patches)} content tokens do not form a square patch grid")
    R = np.asarray(rollout(A), dtype=np.float64)
    return R[roles.index("cls"), patches].reshape(side, side)


def layer_slack(attention, roles: Sequence[str], variant: str = "content") -> np.ndarray:
    """Per layer, the slack ½(1 + κ(Ã)) − κ(½(I + Ã)) of the layer bound, Ã the attention restricted
    to the tokens of ``variant`` and renormalised (shape ``(L,)``, float64; 0 in the equality case)."""
    A = _stack(attention)
    keep = keep_indices(list(roles), variant)
    At = np.asarray(restrict(A, keep), dtype=np.float64)
    return np.asarray(layer_bound(At), dtype=np.float64) - np.asarray(kappa(rollout_factor(At)), dtype=np.float64)


def to_display(pixels, mean: Sequence[float], std: Sequence[float]) -> np.ndarray:
    """Model input ``(B, 3, H, W)`` normalised with ``mean``/``std`` → images ``(B, H, W, 3)`` in [0, 1]."""
    x = np.asarray(pixels.detach().cpu().numpy() if hasattr(pixels, "detach") else pixels, dtype=np.float64)
    if x.ndim != 4 or x.shape[1] != 3:
        raise ValueError(f"pixels must be (B, 3, H, W), got shape {x.shape}")
    m = np.asarray(mean, dtype=np.float64).reshape(1, 3, 1, 1)
    s = np.asarray(std, dtype=np.float64).reshape(1, 3, 1, 1)
    return np.clip(x * s + m, 0.0, 1.0).transpose(0, 2, 3, 1)


@dataclass
class RolloutMaps:
    """For ``len(ids)`` photos: ``images`` (B, H, W, 3) in [0, 1] as the model saw them, ``maps``
    (B, side, side) CLS-row rollout maps, ``slack`` (B, L) per-layer slack on content tokens,
    ``holds`` (B, L) the equality test on content tokens; ``model_id`` and the weights' ``provenance``."""

    model_id: str
    ids: List[str]
    images: np.ndarray
    maps: np.ndarray
    slack: np.ndarray
    holds: np.ndarray
    provenance: dict = field(default_factory=dict)


def rollout_maps(lm, inputs, n: int = 4, *, mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None, tol: Optional[float] = None) -> RolloutMaps:
    """:func:`cls_rollout_map` and :func:`layer_slack` for the first ``n`` inputs of ``inputs`` (an
    :class:`~dobrushin.data.inputs.InputSet` of images) with ``lm`` (a
    :class:`~dobrushin.models.LoadedModel` of a vision model with a CLS token). ``mean``/``std``: the
    normalisation of ``lm.preprocess`` (default ImageNet's) to show the photos as the model saw them."""
    from ..capture.extract import extract_attention
    from ..math.coefficient import DEFAULT_TOL, equality_holds

    if getattr(lm, "kind", "vision") != "vision":  # the model's modality (models.base.INPUT_KIND)
        raise ValueError(f"{lm.model_id} is not a vision model")
    n = int(n)
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    k = min(n, len(inputs))
    x = lm.preprocess(inputs.items(0, k))
    ex = extract_attention(lm.model, x)
    pixels = x["pixel_values"] if isinstance(x, dict) else x
    images = to_display(pixels, mean or (0.485, 0.456, 0.406), std or (0.229, 0.224, 0.225))
    maps, slack, holds = [], [], []
    for b in range(k):
        A, roles = ex.attention[b], ex.roles[b]
        maps.append(cls_rollout_map(A, roles))
        slack.append(layer_slack(A, roles, "content"))
        At = restrict(_stack(A), keep_indices(roles, "content"))
        holds.append(np.asarray(equality_holds(At, DEFAULT_TOL if tol is None else tol), dtype=bool))
    return RolloutMaps(lm.model_id, list(inputs.ids[:k]), images, np.stack(maps), np.stack(slack), np.stack(holds),
                       dict(getattr(lm, "provenance", None) or {}))


__all__ = ["RolloutMaps", "cls_rollout_map", "layer_slack", "rollout_maps", "to_display"]
