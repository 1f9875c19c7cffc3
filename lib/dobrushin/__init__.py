"""dobrushin: the Dobrushin coefficient of attention-rollout factors and its equality condition.

Matrix routines (numpy arrays or torch tensors, batched over leading axes ``(..., n, n)``):
:func:`kappa`, :func:`rollout_factor`, :func:`layer_bound`, :func:`attaining_pairs`,
:func:`mutually_self_dominant`, :func:`equality_holds`, :func:`restrict`, :func:`rollout`,
:func:`rollout_bound`, :func:`check_stochastic`, and :func:`analyse` (all per-matrix numbers in one pass).
"""
from .math.coefficient import (
    DEFAULT_TOL,
    Analysis,
    analyse,
    attaining_pairs,
    equality_holds,
    kappa,
    kappa_factor,
    layer_bound,
    mutually_self_dominant,
    restrict,
    rollout,
    rollout_bound,
    rollout_factor,
)
from .math.stats import wilson
from .math.validation import check_stochastic

__version__ = "0.1.0"


def __getattr__(name):  # lazy: importing the extraction stack pulls in transformers/timm
    if name in ("extract_attention", "Extraction", "register_adapter"):
        from . import capture

        return getattr(capture, name)
    raise AttributeError(f"module 'dobrushin' has no attribute {name!r}")


__all__ = [
    "DEFAULT_TOL", "Analysis", "analyse", "attaining_pairs", "check_stochastic", "equality_holds",
    "extract_attention", "Extraction", "register_adapter", "kappa", "kappa_factor", "layer_bound", "mutually_self_dominant", "restrict",
    "rollout", "rollout_bound", "rollout_factor", "wilson",
]
