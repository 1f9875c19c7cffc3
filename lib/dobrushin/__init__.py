"""dobrushin: the Dobrushin coefficient of attention-rollout factors and its equality condition.

Matrix routines (numpy arrays or torch tensors, batched over leading axes ``(..., n, n)``):
:func:`kappa`, :func:`rollout_factor`, :func:`layer_bound`, :func:`attaining_pairs`,
:func:`mutually_self_dominant`, :func:`equality_holds`, :func:`restrict`, :func:`rollout`,
:func:`rollout_bound`, :func:`check_stochastic`, and :func:`analyse` (all per-matrix numbers in one pass).

Importing the package before torch sets ``THP_MEM_ALLOC_ENABLE=1`` unless it is already set (``0`` turns it
off): torch's CPU allocator then aligns its large blocks to 2 MB and asks the kernel for transparent huge
pages (where ``/sys/kernel/mm/transparent_hugepage/enabled`` allows ``madvise``), so the forward pass's and
the measurement's fresh 100 MB+ tensors cost a page fault per 2 MB instead of per 4 kB.  Only where memory
lies changes, never a result; torch reads the variable at its first allocation, so it has no effect when
torch was imported first (``make`` exports it for everything it runs).
"""
import os as _os
import sys as _sys

if "torch" not in _sys.modules:
    _os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")

from .math.coefficient import (  # noqa: E402 (after the allocator setting above)
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
from .math.stats import wilson  # noqa: E402
from .math.validation import check_stochastic  # noqa: E402

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
