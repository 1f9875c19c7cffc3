"""Capturing post-softmax attention: token roles, hooks, eager switching and one adapter per model family.

Depends on torch and :mod:`dobrushin.math` only (no pandas, nothing above it)."""
from .extract import (  # noqa: F401  (the public entry points)
    Adapter,
    AttentionUnavailable,
    Extraction,
    adapters,
    ensure_eager,
    extract_attention,
    find_adapter,
    register_adapter,
)
