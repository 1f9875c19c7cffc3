"""Switching a model to an attention implementation that forms the softmax (eager attention)."""
from __future__ import annotations

import warnings

from .errors import AttentionUnavailable


def is_hf(model) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:  # pragma: no cover
        return False
    return isinstance(model, PreTrainedModel)


def _timm_attn_modules(model):
    return [m for m in model.modules() if hasattr(m, "fused_attn") and type(m).__module__.startswith("timm.")]


def ensure_eager(model, *, _stacklevel: int = 2) -> bool:
    """Switch ``model`` to an attention implementation that forms the softmax (HF: ``"eager"``;
    timm: ``fused_attn = False`` on every attention module).  Returns True when something was
    switched (and warns), False when it already was eager."""
    if is_hf(model):
        impl = getattr(model.config, "_attn_implementation", None)
        if impl in (None, "eager"):
            return False
        try:
            model.set_attn_implementation("eager")
        except Exception as e:  # older transformers: set the config field
            try:
                model.config._attn_implementation = "eager"
            except Exception:
                raise AttentionUnavailable(
                    f"model uses {impl!r} attention, which returns no attention weights, and cannot be "
                    f"switched to eager attention ({e}); load it with attn_implementation='eager'") from e
        warnings.warn(f"{type(model).__name__} used {impl!r} attention, which returns no attention weights; "
                      "switched it to eager attention", UserWarning, stacklevel=_stacklevel)
        return True
    mods = [m for m in _timm_attn_modules(model) if bool(getattr(m, "fused_attn"))]
    for m in mods:
        m.fused_attn = False
    if mods:
        warnings.warn(f"{type(model).__name__}: {len(mods)} attention module(s) used fused attention, which "
                      "never forms the softmax; switched them to fused_attn=False", UserWarning, stacklevel=_stacklevel)
    return bool(mods)
