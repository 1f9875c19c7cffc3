"""dobrushin: the Dobrushin coefficient of attention-rollout factors and its equality condition.

Matrix routines take numpy arrays or torch tensors ``(..., n, n)``; ``analyse`` gives every per-matrix
number in one pass, ``equality_holds`` the condition alone.
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
