"""The ``"timm"`` adapter: timm Vision Transformers (``VisionTransformer`` and subclasses).  The softmax is
read at each block's ``attn.attn_drop``; fused attention never forms it, so it is switched off
(``fused_attn=False``) with a ``UserWarning``.
"""
from __future__ import annotations

from typing import List

import torch

from .eager import ensure_eager
from .errors import AttentionUnavailable
from .extract import Extraction
from .hooks import HookPoint, announce_roles, attention_maps, recording
from .roles import vision_roles


def _timm_blocks(model):
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        return None
    blocks = list(blocks)
    if not blocks or not all(hasattr(getattr(b, "attn", None), "attn_drop") for b in blocks):
        return None
    return blocks


def hook_points(model) -> List[HookPoint]:
    """The named hook points of a timm ViT: the output of every block's ``attn.attn_drop`` (the
    softmax output; dropout is the identity in eval mode)."""
    return [HookPoint(f"blocks.{i}.attn.attn_drop", "output") for i in range(len(_timm_blocks(model) or ()))]


def matches(model) -> bool:
    return type(model).__module__.startswith("timm.") and _timm_blocks(model) is not None


def _timm_roles(model, B: int, n: int) -> List[List[str]]:
    n_cls = 1 if getattr(model, "cls_token", None) is not None else 0
    n_dist = 1 if getattr(model, "dist_token", None) is not None else 0
    n_reg = int(getattr(model, "num_reg_tokens", 0) or 0) if getattr(model, "reg_token", None) is not None else 0
    n_prefix = getattr(model, "num_prefix_tokens", None)
    if n_prefix is not None and n_prefix != n_cls + n_dist + n_reg:
        raise AttentionUnavailable(f"cannot assign token roles: num_prefix_tokens={n_prefix} but cls={n_cls}, "
                                   f"distillation={n_dist}, registers={n_reg}")
    r = vision_roles(n, n_cls=n_cls, n_distillation=n_dist, n_registers=n_reg)
    return [list(r) for _ in range(B)]


def run(model, inputs, average_heads: bool) -> Extraction:
    if isinstance(inputs, dict) or hasattr(inputs, "items"):
        if "pixel_values" not in inputs:
            raise ValueError(f"timm inputs: expected a pixel tensor or a dict with 'pixel_values', got keys {sorted(inputs)}")
        inputs = inputs["pixel_values"]
    if not isinstance(inputs, torch.Tensor) or inputs.ndim != 4:
        raise ValueError(f"timm inputs must be a pixel tensor (B, C, H, W), got {getattr(inputs, 'shape', type(inputs))}")
    ensure_eager(model, _stacklevel=4)
    B = inputs.shape[0]
    points = hook_points(model)
    stacked = attention_maps(average_heads, layers=len(points))
    with announce_roles(lambda n: _timm_roles(model, B, n)), recording(model, points, stacked) as rec:
        outputs = model(inputs)
    A = stacked.stack(rec.per_point(type(model).__name__))
    roles = _timm_roles(model, A.shape[0], A.shape[-1])
    return Extraction(attention=A, roles=roles, lengths=None, outputs=outputs, adapter="timm")
