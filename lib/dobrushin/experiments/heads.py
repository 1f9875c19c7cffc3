"""The per-head table (``HEAD_COLUMNS``): the condition on every head's own attention (no head averaging) of the
first inputs of a batch, from a stack (:func:`head_rows`) or layer by layer during the forward pass
(:class:`HeadSink`), restricted and grouped as in :mod:`dobrushin.experiments.measure`."""
from __future__ import annotations

import time
from collections import defaultdict
from typing import Dict, List, Optional, Sequence

import numpy as np
import pandas as pd
import torch

from ..math.coefficient import DEFAULT_TOL, analyse
from ..store.results import HEAD_COLUMNS, frame
from . import measure as _m
from .measure import (NoMassError, as_cpu, check_captured, gather_members, kept_groups, restrict_checked,
                      thread_scratch)


def _head_layer(W: torch.Tensor, roles, variants: Sequence[str], tol: float,
                ids: Optional[Sequence[str]] = None, layer: Optional[int] = None):
    """The condition on every head of one layer, ``W`` ``(k, H, n, n)`` (validated), inputs with the same kept
    tokens tested together, at most ``CHUNK_BYTES`` of restricted float64 heads at a time.  Yields
    ``(b, variant, n_kept, (kappa, slack, holds))``, each of shape ``(H,)``, in input order; ``ids``, ``layer``:
    only to name a row that cannot be renormalised."""
    if len(roles) < W.shape[0]:
        raise ValueError(f"got {W.shape[0]} inputs' heads but {len(roles)} role lists")
    out = {}
    for v in variants:
        for keep, members in kept_groups(roles[: W.shape[0]], v, W.shape[-1]).items():
            if not keep:
                continue
            # at most CHUNK_BYTES of float64 restricted heads at a time (one input at least)
            step = max(1, _m.CHUNK_BYTES // (W.shape[1] * len(keep) ** 2 * 8))
            kept = np.asarray(keep, dtype=np.int64)
            for c0 in range(0, len(members), step):
                part = members[c0:c0 + step]
                try:
                    sub = restrict_checked(gather_members(W, part), kept, thread_scratch())
                except NoMassError as e:  # name the input, layer and head
                    i, h = e.index
                    name = part[i] if ids is None else ids[part[i]]
                    where = "" if layer is None else f"layer {layer}, "
                    raise ValueError(f"input {name}, {where}head {h}, variant {v}: {e}") from None
                res = analyse(sub, tol, validate=False)
                for i, b in enumerate(part):
                    out[(b, v)] = (len(keep), (res.kappa[i], res.slack[i], res.holds[i]))
                # let the buffer piece go before the next take may grow it
                del sub, res
    for b in range(W.shape[0]):
        for v in variants:
            if (b, v) in out:
                yield (b, v) + out[(b, v)]


def _head_table(entries, *, model, weights, H) -> pd.DataFrame:
    """The per-head table of ``entries``, each ``(input_id, variant, n_kept, res_layers)`` with per layer the
    ``(kappa, slack, holds)`` of the H heads; rows ordered by entry, layer, head."""
    if not entries:
        return frame([], HEAD_COLUMNS)
    Ls = [len(rl) for _, _, _, rl in entries]
    rows = [L * H for L in Ls]  # rows per entry
    rep = lambda vals: np.repeat(np.asarray(vals, dtype=object), rows)  # noqa: E731
    col = lambda j: np.concatenate([r[j] for _, _, _, rl in entries for r in rl])  # noqa: E731
    return frame(pd.DataFrame({
        "model": model, "weights": weights, "input_id": rep([str(e[0]) for e in entries]),
        "layer": np.concatenate([np.repeat(np.arange(L), H) for L in Ls]),
        "head": np.tile(np.arange(H), sum(Ls)), "variant": rep([e[1] for e in entries]),
        "n_tokens": np.repeat(np.asarray([int(e[2]) for e in entries], dtype=np.int64), rows),
        "kappa": col(0), "slack": col(1), "holds": col(2),
    }), HEAD_COLUMNS)


def head_rows(attention, roles: Sequence[Sequence[str]], *, model: str,
              input_ids: Sequence[str], weights: str, variants: Sequence[str] = ("content",),
              tol: float = DEFAULT_TOL, atol: float = 1e-4) -> pd.DataFrame:
    """The condition on each head's restricted attention; ``attention`` is ``(B, L, H, n, n)``."""
    A = as_cpu(attention)
    if A.ndim != 5:
        raise ValueError(f"per-head attention must be (B, L, H, n, n), got shape {tuple(A.shape)}")
    check_captured(A, atol)
    B, L, H = A.shape[:3]
    res: Dict[tuple, list] = defaultdict(list)
    nk: Dict[tuple, int] = {}
    for l in range(L):
        for b, v, k, r in _head_layer(A[:, l], roles, variants, tol, input_ids, l):
            nk[(b, v)] = k
            res[(b, v)].append(r)
    return _head_table([(input_ids[b], v, nk[(b, v)], res[(b, v)]) for b in range(B) for v in variants
                        if (b, v) in res], model=model, weights=weights, H=H)


class HeadSink:
    """A layer sink (``dobrushin.capture.hooks.layer_sink``) testing each captured layer's per-head attention
    ``(B, H, n, n)`` of the first ``k`` inputs at once, so per-head attention is held for one layer only.  Without
    announced roles the layers are kept until :meth:`rows` gets them.  ``layers``: layers seen (0: the extractor
    does not capture through the hooks)."""

    def __init__(self, k: int, input_ids: Sequence[str], *, model: str, weights: str,
                 variants: Sequence[str] = ("content",), tol: float = DEFAULT_TOL, atol: float = 1e-4,
                 on_layer=None):
        self.k, self.ids, self.model, self.weights = int(k), list(input_ids), model, weights
        self.variants, self.tol, self.atol = tuple(variants), tol, atol
        self.layers = 0
        self.seconds = 0.0  # spent on the heads (inside the forward pass)
        self.H = None
        self.results: Dict[tuple, list] = defaultdict(list)
        self.nk: Dict[tuple, int] = {}
        self.pending: List[torch.Tensor] = []
        self.on_layer = on_layer

    def __call__(self, w: torch.Tensor) -> None:
        from ..capture.hooks import announced_roles

        if self.on_layer is not None:
            self.on_layer(self.layers)
        t0 = time.perf_counter()
        if self.k > 0:
            W = w[: self.k].detach().to("cpu", torch.float32)
            self.H = int(W.shape[1])
            roles = announced_roles(int(W.shape[-1]))
            if roles is None:
                self.pending.append(W.clone())
            else:
                self._layer(W, roles, self.layers)
        self.layers += 1
        self.seconds += time.perf_counter() - t0

    def _layer(self, W: torch.Tensor, roles, layer: int) -> None:
        check_captured(W, self.atol)  # once per captured tensor
        for b, v, k, r in _head_layer(W, roles, self.variants, self.tol, self.ids, layer):
            self.nk[(b, v)] = k
            self.results[(b, v)].append(r)

    def rows(self, roles) -> pd.DataFrame:
        """The per-head table (:data:`~dobrushin.store.results.HEAD_COLUMNS`) of the layers seen."""
        t0 = time.perf_counter()
        for layer, W in enumerate(self.pending):  # kept from the first layer on (no roles were announced)
            self._layer(W, roles, layer)
        self.pending = []
        table = _head_table([(self.ids[b], v, self.nk[(b, v)], self.results[(b, v)])
                             for b in range(min(self.k, len(self.ids))) for v in self.variants
                             if (b, v) in self.results], model=self.model, weights=self.weights, H=self.H)
        self.seconds += time.perf_counter() - t0
        return table
