"""Capturing post-softmax attention (``extract_attention``): token roles, one hook mechanism, eager
switching, and one adapter per model family, registered here: ``"ft-transformer"``, ``"timm"``, ``"hf"``.
A new family needs ``register_adapter(name, matches, run, prepare=...)``.  Depends on torch and numpy only.
"""
from . import ft_transformer as _ft
from . import hf as _hf
from . import timm as _timm
from .eager import ensure_eager
from .errors import AttentionUnavailable
from .extract import (
    Adapter,
    Extraction,
    adapters,
    extract_attention,
    find_adapter,
    prepare_for_capture,
    register_adapter,
)
from .hooks import HookPoint, recording
from .roles import ROLES, keep_indices, text_roles, vision_roles

# the built-in adapters, tried after any registered by the user (first match wins)
register_adapter("ft-transformer", _ft.matches, _ft.extract, first=False)
register_adapter("timm", _timm.matches, _timm.run, first=False, prepare=ensure_eager)
register_adapter("hf", _hf.matches, _hf.run, first=False, prepare=ensure_eager)

__all__ = [
    "ROLES", "Adapter", "AttentionUnavailable", "Extraction", "HookPoint", "adapters", "ensure_eager",
    "extract_attention", "find_adapter", "keep_indices", "prepare_for_capture", "recording", "register_adapter",
    "text_roles", "vision_roles",
]
