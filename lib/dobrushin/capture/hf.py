"""The ``"hf"`` adapter: ``transformers`` encoders whose attention modules return ``(output, weights)`` (ViT,
DeiT, DINOv2 with or without registers, BERT/MiniLM, RoBERTa, DistilBERT, ...), plus MPNet.

The weights are hooked during the forward pass and averaged over heads at once (memory ``O(B·L·n²)``).
SDPA/flash/flex attention returns no weights, so the model is switched to eager attention with a ``UserWarning``.
"""
from __future__ import annotations

from typing import List

import torch

from .eager import ensure_eager, is_hf
from .errors import AttentionUnavailable
from .extract import Extraction
from .hooks import HookPoint, announce_roles, attention_maps, recording
from .roles import text_roles, vision_roles

#: keys a tokenizer may return that are not forward arguments (removed before the forward pass)
NON_FORWARD_KEYS = ("special_tokens_mask", "offset_mapping", "length", "overflowing_tokens",
                    "num_truncated_tokens")


def _hf_attention_specs(model):
    """(target classes, class-name suffixes, tuple index) of the modules recording "attentions"."""
    classes, names, index = [], [], 1
    for m in model.modules():
        rec = getattr(type(m), "_can_record_outputs", None) if is_hf(m) else None
        if not rec or "attentions" not in rec:
            continue
        specs = rec["attentions"]
        specs = specs if isinstance(specs, list) else [specs]
        for sp in specs:
            if isinstance(sp, type):
                classes.append(sp)
            elif isinstance(sp, str):
                names.append(sp)
            else:  # OutputRecorder
                if getattr(sp, "target_class", None) is not None:
                    classes.append(sp.target_class)
                if getattr(sp, "class_name", None):
                    names.append(sp.class_name)
                index = getattr(sp, "index", 1)
    return tuple(classes), names, index


#: HF attention classes without ``_can_record_outputs`` -> the submodule that receives exactly their
#: post-softmax probabilities (a dropout, the identity in eval mode); its output is read (index None)
SOFTMAX_DROPOUT = {"MPNetSelfAttention": "dropout"}


def attention_modules(model):
    """``([(name, module), ...], index)``: the modules whose output tuple holds the attention weights at
    ``index`` (``_can_record_outputs["attentions"]``), in forward order; classes in :data:`SOFTMAX_DROPOUT`
    are read at the output of their softmax dropout (index None)."""
    classes, names, index = _hf_attention_specs(model)
    mods = [(nm, m) for nm, m in model.named_modules()
            if (classes and isinstance(m, classes)) or any(nm.endswith(s) for s in names)]
    if not mods:
        mods = [(f"{nm}.{SOFTMAX_DROPOUT[type(m).__name__]}", getattr(m, SOFTMAX_DROPOUT[type(m).__name__]))
                for nm, m in model.named_modules()
                if type(m).__name__ in SOFTMAX_DROPOUT and type(m).__module__.startswith("transformers.")]
        index = None if mods else index
    return mods, index


def hook_points(model) -> List[HookPoint]:
    """The named hook points of an HF model: the output element ``index`` of every attention module."""
    mods, index = attention_modules(model)
    return [HookPoint(nm, "output", index) for nm, _ in mods]


def _hf_forward_kwargs(model, inputs):
    import inspect

    if isinstance(inputs, torch.Tensor):
        inputs = {"pixel_values": inputs}
    kw = {k: v for k, v in inputs.items() if k not in NON_FORWARD_KEYS}
    if "pixel_values" in kw:
        px = kw["pixel_values"]
        if px.ndim != 4:
            raise ValueError(f"pixel_values must be (B, C, H, W), got shape {tuple(px.shape)}")
        size = getattr(model.config, "image_size", None)
        size = (size, size) if isinstance(size, int) else tuple(size) if size else None
        if size and tuple(px.shape[-2:]) != size and "interpolate_pos_encoding" not in kw:
            if "interpolate_pos_encoding" in inspect.signature(model.forward).parameters:
                kw["interpolate_pos_encoding"] = True
    elif "input_ids" not in kw and "inputs_embeds" not in kw:
        raise ValueError(f"HF inputs need 'input_ids' or 'pixel_values'; got keys {sorted(inputs)}")
    return inputs, kw


def _hf_vision_roles(model, pixel_values: torch.Tensor, n: int) -> List[List[str]]:
    cfg = model.config
    patch = getattr(cfg, "patch_size", None)
    patch = (patch, patch) if isinstance(patch, int) else tuple(patch) if patch else None
    n_dist = 1 if getattr(cfg, "model_type", "") == "deit" else 0
    n_reg = int(getattr(cfg, "num_register_tokens", 0) or 0)
    if patch:
        n_patches = (pixel_values.shape[-2] // patch[0]) * (pixel_values.shape[-1] // patch[1])
        if n - n_patches != 1 + n_dist + n_reg:
            raise AttentionUnavailable(
                f"cannot assign token roles: {n} tokens, {n_patches} patches, but the layout predicts "
                f"{1 + n_dist + n_reg} prefix tokens (cls + {n_dist} distillation + {n_reg} registers)")
    r = vision_roles(n, n_cls=1, n_distillation=n_dist, n_registers=n_reg)
    return [list(r) for _ in range(pixel_values.shape[0])]


def matches(model) -> bool:
    return is_hf(model)


def run(model, inputs, average_heads: bool) -> Extraction:
    ensure_eager(model, _stacklevel=4)
    inputs, kw = _hf_forward_kwargs(model, inputs)
    points = hook_points(model)
    transform = attention_maps(average_heads)
    known: dict = {}

    def roles_of(n: int) -> List[List[str]]:  # the batch's roles for n tokens (announced to layer sinks)
        if n not in known:
            if "input_ids" in kw:
                r = text_roles(kw["input_ids"], kw.get("attention_mask"), inputs.get("special_tokens_mask"),
                               model.config)
                if len(r[0]) != n:
                    raise AttentionUnavailable(f"{n} attention tokens but {len(r[0])} input tokens")
            elif "pixel_values" in kw:
                r = _hf_vision_roles(model, kw["pixel_values"], n)
            else:
                r = [["content"] * n for _ in range(len(next(iter(kw.values()))))]
            known[n] = r
        return known[n]

    with announce_roles(roles_of):
        if points:
            stacked = attention_maps(average_heads, layers=len(points))
            with recording(model, points, stacked) as rec:
                outputs = model(**kw)
            A = stacked.stack(rec.per_point(type(model).__name__))
        else:  # older-style model: ask for the attentions tuple (memory O(B·L·H·n²) for one pass)
            outputs = model(**kw, output_attentions=True)
            atts = getattr(outputs, "attentions", None)
            if not atts or any(a is None for a in atts):
                raise AttentionUnavailable(f"{type(model).__name__} returned no attentions")
            A = torch.stack([transform(a.detach()) for a in atts], dim=1)
    n = A.shape[-1]
    roles = [list(r) for r in roles_of(n)] if ("input_ids" in kw or "pixel_values" in kw) \
        else [["content"] * n for _ in range(A.shape[0])]
    lengths = [sum(r != "pad" for r in rr) for rr in roles] if "input_ids" in kw else None
    return Extraction(attention=A, roles=roles, lengths=lengths, outputs=outputs, adapter="hf")
