"""From captured attention to the tidy per-(input, layer, variant) table of the results schema."""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

import numpy as np
import pandas as pd
import torch

from ..math.coefficient import DEFAULT_TOL, analyse, restrict
from ..store.results import conform

ROLES = ("cls", "register", "distillation", "sep", "pad", "content")
#: bump when a change here changes any measured number; cache keys of the notebooks include it
#: (2: inputs keeping fewer than two tokens are left out)
MEASURE_VERSION = 2


def keep_indices(roles: Sequence[str], variant: str) -> np.ndarray:
    """Token indices kept by a variant: ``content`` keeps content tokens only; ``with_special``
    keeps every token except padding."""
    r = np.asarray(roles)
    unknown = set(r.tolist()) - set(ROLES)
    if unknown:
        raise ValueError(f"unknown token role(s) {sorted(unknown)}; expected {ROLES}")
    if variant == "content":
        return np.flatnonzero(r == "content")
    if variant == "with_special":
        return np.flatnonzero(r != "pad")
    raise ValueError(f"unknown variant {variant!r}; expected 'content' or 'with_special'")


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
    return conform(df)
