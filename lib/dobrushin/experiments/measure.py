"""From captured attention to the results tables: the tidy per-(input, layer, variant) table and each input's
rollout in one pass (:class:`BatchMeasure` layer by layer as captured, or :func:`measure_batch` on a stack;
:func:`measure` is its table only).  The per-head table is in :mod:`dobrushin.experiments.heads`.

Streaming: the ``(B, L, n, n)`` stack is never held.  Captured float32 layers are validated once per block
(:func:`check_captured`); per variant, inputs with the same kept-token layout form a group; the kept submatrix
is copied to float64 and renormalised (at most :data:`CHUNK_BYTES` at a time), tested, and multiplied into the
running rollout R ← ½(I + Ã_l) R.  The numbers are bit for bit those of the per-input path
(tests/test_streaming.py).
"""
from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pandas as pd
import torch

from ..capture.roles import keep_indices
from ..math.coefficient import DEFAULT_TOL, analyse, kappa
from ..math.validation import check_stochastic
from ..store.results import ROLLOUT_COLUMNS, VARIANTS, conform, frame

#: bytes of float64 restricted attention processed at a time (a layer at least)
CHUNK_BYTES = 64 * 2**20


def keep_slice(keep: np.ndarray) -> Optional[slice]:
    """``slice(a, b)`` when ``keep`` is the contiguous ascending run a, a+1, …, b−1; else None."""
    keep = np.asarray(keep)
    if keep.size == 0:
        return None
    a, b = int(keep[0]), int(keep[-1]) + 1
    if b - a == keep.size and (keep.size == 1 or bool(np.all(np.diff(keep) == 1))):
        return slice(a, b)
    return None


class Scratch:
    """One reusable float64 buffer (grown on demand) for restricted copies, so fresh pages are not mapped and
    zeroed per block.  It is an ordinary tensor even when grown inside ``torch.inference_mode``, so it can be
    written in place in and out of that mode."""

    def __init__(self):
        self.buf: Optional[torch.Tensor] = None

    def take(self, shape) -> torch.Tensor:
        """A contiguous float64 tensor of ``shape`` (uninitialised) in the buffer; valid until the next take."""
        size = int(np.prod(shape, dtype=np.int64))
        if self.buf is None or self.buf.numel() < size:
            self.buf = None  # let the old buffer go before the larger one is allocated
            with torch.inference_mode(False):
                self.buf = torch.empty(size, dtype=torch.float64)
        return self.buf[:size].view(tuple(shape))

    def release(self) -> None:
        """Let the buffer go (the next :meth:`take` allocates afresh)."""
        self.buf = None


_THREAD = threading.local()


def thread_scratch() -> Scratch:
    """The calling thread's :class:`Scratch`, kept for the thread's life and shared by :class:`BatchMeasure` and
    the per-head tables.  Safe because each user takes, fills, reads and drops its piece within one call without
    calling another user meanwhile.  It holds the largest piece asked for (up to 240 MB for DINOv2-L at 518 px)
    until :meth:`Scratch.release`."""
    s = getattr(_THREAD, "scratch", None)
    if s is None:
        s = _THREAD.scratch = Scratch()
    return s


def restrict_checked(A: torch.Tensor, keep: np.ndarray, scratch: Optional[Scratch] = None) -> torch.Tensor:
    """The kept submatrix of validated ``A`` ``(..., n, n)`` in float64, rows renormalised, with the arithmetic of
    :func:`dobrushin.restrict`.  With ``scratch`` the result lives in its buffer (valid until its next use)."""
    sl = keep_slice(keep)
    if sl is not None:
        view = A[..., sl, sl]
    else:
        ti = torch.as_tensor(np.asarray(keep, dtype=np.int64))
        view = A.index_select(-2, ti).index_select(-1, ti)
    S = torch.empty(view.shape, dtype=torch.float64) if scratch is None else scratch.take(view.shape)
    S.copy_(view)
    sums = S.sum(-1, keepdim=True)
    zero = sums <= 0
    if bool(zero.any()):
        bad = np.argwhere(zero.numpy()[..., 0])[0]
        raise NoMassError(f"row {int(np.asarray(keep)[bad[-1]])} puts no mass on the kept tokens; "
                          "it cannot be renormalised", tuple(int(i) for i in bad[:-1]))
    return S.div_(sums)


class NoMassError(ValueError):
    """A kept row with no mass on the kept tokens; ``index``: the leading index of its matrix in the stack, so a
    caller can name the input, layer or head."""

    def __init__(self, message: str, index: tuple = ()):
        super().__init__(message)
        self.index = index


def check_captured(A: torch.Tensor, atol: float) -> None:
    """:func:`dobrushin.check_stochastic` (``convert=False``) of captured attention ``(..., n, n)``."""
    check_stochastic(A, atol=atol, convert=False)


def as_cpu(attention) -> torch.Tensor:
    """``attention`` as a CPU tensor, float32 or float64 as captured (other dtypes: float64)."""
    A = attention if isinstance(attention, torch.Tensor) else torch.as_tensor(np.asarray(attention))
    A = A.detach().to("cpu")
    return A if A.dtype in (torch.float32, torch.float64) else A.to(torch.float64)


def kept_groups(roles, variant: str, n: int) -> Dict[tuple, List[int]]:
    """``{kept token indices: [inputs]}``: a batch's inputs (``roles``, ``n`` tokens each) grouped by the tokens
    ``variant`` keeps."""
    groups: dict = defaultdict(list)
    for b, r in enumerate(roles):
        if len(r) != n:
            raise ValueError(f"input {b}: {len(r)} roles for {n} tokens")
        groups[tuple(keep_indices(r, variant).tolist())].append(b)
    return groups


def gather_members(A: torch.Tensor, members: List[int]) -> torch.Tensor:
    """The inputs ``members`` of ``A`` (a view when they are a contiguous run, else a copy)."""
    m0, m1 = members[0], members[-1] + 1
    if m1 - m0 == len(members):  # a contiguous run of inputs: a view
        return A[m0:m1]
    return A.index_select(0, torch.as_tensor(members))


class BatchMeasure:
    """The tidy table and rollout of one batch, fed blocks of layers (:meth:`add`, ``(B, l, n, n)``) or one layer
    at a time as captured (:meth:`layer`, ``(B, n, n)``); :meth:`finish` returns ``(table, rollout)``, bit for bit
    those of :func:`measure_batch` on the stack.  Layers are held (float32) until their float64 size
    B · l · n² · 8 reaches ``hold_bytes``, then validated once and processed.  Roles come from the constructor,
    the adapter's announcement, or :meth:`finish`; layers are held until they are known."""

    def __init__(self, roles: Optional[Sequence[Sequence[str]]] = None, *, model: str,
                 input_ids: Sequence[str], weights: str, variants: Sequence[str] = VARIANTS,
                 tol: float = DEFAULT_TOL, atol: float = 1e-4, rollout: bool = True,
                 clock: Optional[dict] = None, hold_bytes: int = CHUNK_BYTES):
        self.model, self.ids, self.weights = model, list(input_ids), weights
        self.variants, self.tol, self.atol = tuple(variants), tol, atol
        self.rollout, self.hold_bytes = bool(rollout), int(hold_bytes)
        self.clock = {} if clock is None else clock
        self.roles = None if roles is None else [list(r) for r in roles]
        self.layers = 0  # layers received
        self.n: Optional[int] = None
        self._pending: List[torch.Tensor] = []  # captured layers not yet processed, (B, 1, n, n) or blocks
        self._pending_layers = 0
        self._done_layers = 0  # layers validated and processed
        self._groups: Optional[List[tuple]] = None  # (variant, keep, members) in table order
        self._cols: Dict[int, List[dict]] = defaultdict(list)  # group index -> per-block columns
        self._R: Dict[int, List[Optional[torch.Tensor]]] = {}

    def _add_time(self, stage: str, t0: float) -> None:
        self.clock[stage] = self.clock.get(stage, 0.0) + (time.perf_counter() - t0)

    def _check_shape(self, A: torch.Tensor) -> None:
        B, n = A.shape[0], A.shape[-1]
        if B != len(self.ids):
            raise ValueError(f"got {B} inputs but {len(self.ids)} input ids")
        if self.n is None:
            self.n = int(n)
        elif n != self.n:
            raise ValueError(f"layer {self.layers}: {n} tokens, earlier layers {self.n}")

    def layer(self, m: torch.Tensor) -> None:
        """One captured layer's head-averaged attention ``(B, n, n)`` (any device; copied to the CPU)."""
        self.add(m.detach().to("cpu").unsqueeze(1))

    def add(self, A) -> None:
        """A block of consecutive layers ``(B, l, n, n)`` (numpy or torch; float32 is kept)."""
        A = as_cpu(A)
        if A.ndim != 4:
            raise ValueError(f"attention must be (B, L, n, n), got shape {tuple(A.shape)}")
        self._check_shape(A)
        if self.roles is None:
            from ..capture.hooks import announced_roles

            self.roles = announced_roles(int(A.shape[-1]))
        self._pending.append(A)
        self._pending_layers += int(A.shape[1])
        self.layers += int(A.shape[1])
        if self.roles is not None and self._pending_layers * len(self.ids) * A.shape[-1] ** 2 * 8 >= self.hold_bytes:
            self._flush()

    def _flush(self) -> None:
        # always inference mode: the running rollouts, begun during the forward pass (inference mode), stay
        # inference tensors, which in-place products outside that mode would refuse
        with torch.inference_mode():
            self._flush_pending()

    def _flush_pending(self) -> None:
        if not self._pending:
            return
        t0 = time.perf_counter()
        A = self._pending[0] if len(self._pending) == 1 else torch.cat(self._pending, dim=1)
        first = self._done_layers
        self._pending, self._pending_layers = [], 0
        self._done_layers += int(A.shape[1])
        try:
            check_captured(A, self.atol)  # once per captured block
        except ValueError as e:  # name the layers of the batch, not the index within the block
            raise ValueError(f"layers {first}–{self._done_layers - 1} of the batch: {e}") from None
        self._add_time("restrict", t0)
        if self._groups is None:
            if len(self.roles) != len(self.ids):
                raise ValueError(f"got {len(self.ids)} inputs but {len(self.roles)} role lists")
            self._groups = [(v, keep, members) for v in self.variants
                            for keep, members in kept_groups(self.roles, v, self.n).items()]
        for g, (variant, keep, members) in enumerate(self._groups):
            if len(keep) < 2:
                # fewer than two kept tokens: no pair, the condition is vacuous; left out
                continue
            self._group_block(g, np.asarray(keep, dtype=np.int64), members, A, first)

    def _group_block(self, g: int, keep: np.ndarray, members: List[int], A: torch.Tensor, first: int) -> None:
        k, nm, L = len(keep), len(members), A.shape[1]
        X = gather_members(A, members)
        # within a block, at most CHUNK_BYTES of float64 restricted attention at a time (whatever hold_bytes)
        step = max(1, min(L, CHUNK_BYTES // max(1, nm * k * k * 8)))
        R = self._R.setdefault(g, [None] * nm)
        for l0 in range(0, L, step):
            l1 = min(L, l0 + step)
            t0 = time.perf_counter()
            try:
                sub = restrict_checked(X[:, l0:l1], keep, thread_scratch())  # (nm, l1 − l0, k, k) float64
            except NoMassError as e:  # name the input and layer of the batch
                i, l = e.index
                raise ValueError(f"input {self.ids[members[i]]}, layer {first + l0 + l}, "
                                 f"variant {self._groups[g][0]}: {e}") from None
            self._add_time("restrict", t0)
            t0 = time.perf_counter()
            res = analyse(sub, self.tol, validate=False, margins=True)
            block = {c: np.asarray(getattr(res, c)) for c in _TABLE_NUMBERS}
            block["holds"] = np.asarray(res.holds, dtype=bool)
            block["trace"] = sub.diagonal(dim1=-2, dim2=-1).sum(-1).numpy()  # before _roll overwrites sub
            self._cols[g].append(block)
            self._add_time("test", t0)
            if self.rollout:
                t0 = time.perf_counter()
                self._roll(R, sub)
                self._add_time("rollout", t0)
            del sub

    def _roll(self, R: List[Optional[torch.Tensor]], sub: torch.Tensor) -> None:
        """R[i] ← F R[i] with F = ½(I + sub[i, l]) per layer, in place: F is formed in ``sub`` (already tested)
        and the product swaps with one scratch matrix, so nothing is allocated per layer.  Bitwise equal to
        ``0.5 * (sub + I) @ R``."""
        scratch = None
        for i in range(sub.shape[0]):
            for l in range(sub.shape[1]):
                F = sub[i, l]
                F.diagonal().add_(1.0)
                F.mul_(0.5)
                if R[i] is None:
                    R[i] = F.clone()
                    continue
                if scratch is None:
                    scratch = torch.empty_like(F)
                torch.mm(F, R[i], out=scratch)
                R[i], scratch = scratch, R[i]

    def finish(self, roles: Optional[Sequence[Sequence[str]]] = None) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
        """``(table, rollout)`` of the layers received (``rollout`` None when built with ``rollout=False``);
        ``roles``: the batch's roles, when neither the constructor nor the adapter gave them."""
        if not self.layers:
            raise ValueError("no attention layer was received")
        if self.roles is None:
            if roles is None:
                raise ValueError("the token roles of the batch are needed to restrict the attention")
            self.roles = [list(r) for r in roles]
        elif roles is not None and [list(r) for r in roles] != self.roles:
            raise ValueError("the roles given to finish() differ from those the layers were restricted with")
        self._flush()
        L = self.layers
        frames, krs = [], {}
        for g, (variant, keep, members) in enumerate(self._groups):
            if len(keep) < 2:
                continue
            cols = {c: np.concatenate([b[c] for b in self._cols[g]], axis=1) for c in _TABLE_NUMBERS + ("holds", "trace")}
            nm = len(members)
            if self.rollout:
                t0 = time.perf_counter()
                for i, b in enumerate(members):
                    krs[(b, variant)] = float(kappa(self._R[g][i], validate=False))
                self._add_time("rollout", t0)
            frames.append(pd.DataFrame({  # conform() puts the columns in the schema's order
                "model": self.model, "input_id": np.repeat([str(self.ids[b]) for b in members], L),
                "layer": np.tile(np.arange(L), nm), "n_tokens": len(keep), "variant": variant,
                "weights": self.weights, **{c: v.ravel() for c, v in cols.items()},
            }))
        self._R, self._cols = {}, defaultdict(list)
        if not frames:
            raise ValueError("no input kept two or more tokens")
        table = conform(pd.concat(frames, ignore_index=True))
        if not self.rollout:
            return table, None
        return table, _rollout_table(table, krs, model=self.model, input_ids=self.ids, weights=self.weights,
                                     variants=self.variants, L=L, roles=self.roles)


#: the number columns of the tidy table that :func:`dobrushin.analyse` gives per matrix
_TABLE_NUMBERS = ("kappa", "kappa_factor", "bound", "slack", "kappa_gap", "self_margin_i", "self_margin_j")


def measure_batch(attention, roles: Sequence[Sequence[str]], *, model: str, input_ids: Sequence[str],
                  weights: str, variants: Sequence[str] = VARIANTS, tol: float = DEFAULT_TOL, atol: float = 1e-4,
                  rollout: bool = True, clock: Optional[dict] = None) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
    """``(table, rollout)`` of one batch (``rollout`` None unless ``rollout=True``).  ``attention``:
    ``(B, L, n, n)`` head-averaged post-softmax attention; ``roles[b]``: the role of each token of input b;
    ``atol``: tolerance on the captured row sums.  Inputs keeping fewer than two tokens in a variant give no
    rows.  ``clock``: seconds of ``restrict``, ``test`` and ``rollout`` are added to it."""
    A = as_cpu(attention)
    if A.ndim != 4:
        raise ValueError(f"attention must be (B, L, n, n), got shape {tuple(A.shape)}")
    B = A.shape[0]
    if len(roles) != B or len(input_ids) != B:
        raise ValueError(f"got {B} inputs but {len(roles)} role lists and {len(input_ids)} input ids")
    bm = BatchMeasure(roles, model=model, input_ids=input_ids, weights=weights, variants=variants, tol=tol,
                      atol=atol, rollout=rollout, clock=clock, hold_bytes=0)
    bm.add(A)
    return bm.finish()


def _rollout_table(table: pd.DataFrame, krs: dict, *, model, input_ids, weights, variants, L, roles) -> pd.DataFrame:
    """The rollout rows: κ(R) per (input, variant) and the products over layers of ``kappa_factor`` and
    ``bound`` (as sums of logs)."""
    prods = (table.assign(lk=np.log(table["kappa_factor"].to_numpy(float)),
                          lb=np.log(table["bound"].to_numpy(float)))
             .groupby(["input_id", "variant"], observed=True)
             .agg(lk=("lk", "sum"), lb=("lb", "sum"), layers_holding=("holds", "sum"), L=("layer", "count")))
    # the groups as a dict (a MultiIndex .loc per input cost more than the rest at 128 tokens)
    by = dict(zip(prods.index, zip(prods["lk"], prods["lb"], prods["layers_holding"], prods["L"])))
    rows = []
    for b, iid in enumerate(input_ids):
        for v in variants:
            if (b, v) not in krs:
                continue
            lk, lb, holding, nl = by[(str(iid), v)]
            if int(nl) != L:
                raise ValueError(f"input {iid}, variant {v}: table has {int(nl)} layers, attention {L}")
            nk = int(keep_indices(roles[b], v).size)
            rows.append((model, weights, str(iid), v, L, nk, krs[(b, v)], float(np.exp(lk)),
                         float(np.exp(lb)), int(holding)))
    return frame(rows, ROLLOUT_COLUMNS)


def measure(attention, roles: Sequence[Sequence[str]], *, model: str, input_ids: Sequence[str], weights: str,
            variants: Sequence[str] = ("content", "with_special"), tol: float = DEFAULT_TOL,
            atol: float = 1e-4) -> pd.DataFrame:
    """The tidy table of :func:`measure_batch` (no rollout): the equality condition on every input x layer x
    variant of ``attention`` ``(B, L, n, n)``, kept tokens renormalised."""
    return measure_batch(attention, roles, model=model, input_ids=input_ids, weights=weights, variants=variants,
                         tol=tol, atol=atol, rollout=False)[0]
