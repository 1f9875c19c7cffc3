"""From captured attention to the tables of the results schema: the tidy per-(input, layer, variant)
table and the rollout of each input in one pass over the batch (:class:`BatchMeasure`, layer by layer as
the forward pass captures them, or :func:`measure_batch` on a stack; :func:`measure` is its first
half); the per-head table is :mod:`dobrushin.experiments.heads`'s.

How a batch is processed (the streaming path). The measurement loop hands each layer's head-averaged
attention to a :class:`BatchMeasure` as it is captured (:func:`dobrushin.capture.hooks.map_sink`), so the
``(B, L, n, n)`` stack of the whole forward pass is never held. The captured attention stays float32 (the
kernel reads float32 exactly); each block of layers is validated once (:func:`check_captured`:
:func:`dobrushin.check_stochastic`'s outcome in two passes); per variant the inputs with the same kept-token
layout form a group; a contiguous run of kept tokens is a *slice* (no gather); the kept submatrix is copied
to float64 and renormalised (at most :data:`CHUNK_BYTES` at a time), tested (:func:`dobrushin.analyse` with
the decision margins) and multiplied into the running rollout of each input (R ← ½(I + Ã_l) R, in place), so
every input is restricted once, for the tidy table and the rollout alike, and no float64 copy of the whole
stack is ever held. The arithmetic is the one of the per-input path it replaces (the same casts, row sums,
divisions and matrix products on matrices of the same shapes), so the numbers are the same bits
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
    """One float64 buffer lent out again and again (grown when a larger piece is asked for): the restricted
    copies of a batch go into the same memory instead of a fresh allocation per block.  At 518 px a batch
    restricts gigabytes in blocks of :data:`CHUNK_BYTES`; each fresh block is new pages for the kernel to
    map and zero before the copy can write them, which cost as much as the copy itself.  The buffer is an
    ordinary tensor even when it is grown inside ``torch.inference_mode`` (the forward pass), so that it can
    be written in place in that mode and out of it."""

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
    """The calling thread's :class:`Scratch`, kept for the life of the thread: every batch's restricted
    copies (:class:`BatchMeasure`; :mod:`dobrushin.experiments.heads`'s per-head tables) reuse one buffer, so that only the
    first batch of a process (or a larger piece later) maps and zeroes fresh pages for it.  Timed on
    DINOv2-S at 224 px and batch 8, restricting a batch into a fresh 50 MB buffer took 15 ms, into a reused
    one 4.3 ms; a buffer per batch, as before, paid the difference on every batch.  Every user takes its
    piece, fills it, reads it and drops it within one call (a block of layers, one layer's heads), and none
    of them calls another while it holds a piece, so one buffer per thread serves them all; threads (a
    threaded sweep) each get their own.  It holds the largest piece asked for until
    :meth:`Scratch.release` or the thread's end: one layer of a batch when that is more than
    :data:`CHUNK_BYTES` (120 MB for DINOv2 at 518 px and batch 8), or one input's heads of a layer (240 MB
    for DINOv2-L's 16 heads at 518 px); the measurement's peak is no higher than when the table and the
    per-head table each had a buffer of their own for the batch."""
    s = getattr(_THREAD, "scratch", None)
    if s is None:
        s = _THREAD.scratch = Scratch()
    return s


def restrict_checked(A: torch.Tensor, keep: np.ndarray, scratch: Optional[Scratch] = None) -> torch.Tensor:
    """The kept submatrix of ``A`` (``(..., n, n)``, float32 or float64, already validated) in float64,
    rows renormalised — the arithmetic of :func:`dobrushin.restrict` (cast, row sums, division), with a
    slice instead of a gather for a contiguous run, and no second validation.  With ``scratch`` the result
    lives in its buffer (valid until its next use); else in a fresh tensor."""
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
    """A kept row with no mass on the kept tokens (:func:`restrict_checked`); ``index``: the leading index
    of its matrix in the stack restricted, so that a caller can name the input, layer or head."""

    def __init__(self, message: str, index: tuple = ()):
        super().__init__(message)
        self.index = index


def check_captured(A: torch.Tensor, atol: float) -> None:
    """:func:`dobrushin.check_stochastic` (``convert=False``) of captured attention ``(..., n, n)``: two
    passes a block of matrices at a time, float32 row sums settling what they can (its docstring)."""
    check_stochastic(A, atol=atol, convert=False)


def as_cpu(attention) -> torch.Tensor:
    """``attention`` as a CPU tensor, float32 or float64 as captured (other dtypes: float64)."""
    A = attention if isinstance(attention, torch.Tensor) else torch.as_tensor(np.asarray(attention))
    A = A.detach().to("cpu")
    return A if A.dtype in (torch.float32, torch.float64) else A.to(torch.float64)


def kept_groups(roles, variant: str, n: int) -> Dict[tuple, List[int]]:
    """``{kept token indices: [inputs]}``: the inputs of a batch (their ``roles``, ``n`` tokens each) grouped by the
    tokens ``variant`` keeps, so that each group is restricted and tested together."""
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
    """The tidy table and the rollout of one batch, fed a block of consecutive layers at a time
    (:meth:`add`, ``(B, l, n, n)``) or one layer at a time as the forward pass captures it (:meth:`layer`,
    ``(B, n, n)``, the consumer of :func:`dobrushin.capture.hooks.map_sink`); :meth:`finish` returns
    ``(table, rollout)``, the same tables, bit for bit, as :func:`measure_batch` on the stacked layers.

    Captured layers are held (float32, as captured) only until the float64 size of the held layers
    (B · l · n² · 8 bytes, unrestricted) reaches ``hold_bytes`` (:data:`CHUNK_BYTES`): at 518 px
    (n = 1 370, batch 8) every layer is restricted, tested and multiplied into the running rollouts as
    soon as it is captured, so the ``(B, L, n, n)`` stack of
    the whole forward pass is never held; at 224 px or for text the layers of a batch accumulate up to
    that size (all 12 layers of ViT-S/B at batch 8) and are processed together; what remains is processed
    by :meth:`finish`.  Each held block is validated once (:func:`check_captured`; an error names the
    layers of the batch).  The roles are needed to restrict: given to the constructor, or
    announced by the adapter (:func:`dobrushin.capture.hooks.announced_roles`) when the first layer
    arrives; without either, the layers are held until :meth:`finish` gets them."""

    def __init__(self, roles: Optional[Sequence[Sequence[str]]] = None, *, model: str,
                 input_ids: Sequence[str], weights: str, variants: Sequence[str] = VARIANTS,
                 tol: float = DEFAULT_TOL, atol: float = 1e-4, rollout: bool = True, validate: bool = True,
                 clock: Optional[dict] = None, hold_bytes: int = CHUNK_BYTES):
        self.model, self.ids, self.weights = model, list(input_ids), weights
        self.variants, self.tol, self.atol = tuple(variants), tol, atol
        self.rollout, self.validate, self.hold_bytes = bool(rollout), bool(validate), int(hold_bytes)
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
        # under inference mode whether or not the caller is: a batch processed partly during the forward
        # pass (extract_attention runs it in inference mode) and partly in finish() keeps its running
        # rollouts inference tensors throughout, which in-place products outside that mode would refuse
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
            if self.validate:
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
                # fewer than two kept tokens: no pair exists, so the condition is vacuous (κ = 0 and
                # the test would count a "failure" that says nothing); such inputs are left out
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
        """R[i] ← F R[i] with F = ½(I + sub[i, l]) for each layer of the block, in place: F is formed in
        ``sub`` (no longer needed: the test has read it), the product goes to one scratch matrix that
        then swaps places with R[i], so the rollout of a batch allocates nothing per layer (at n = 1 370
        fresh 15 MB temporaries per product fragmented the heap by a gigabyte while the forward pass
        allocated beside them).  The same numbers as ``0.5 * (sub + I) @ R`` (adding 0.0 off the
        diagonal and halving are exact; the product is the same matrix product)."""
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
                  weights: str, variants: Sequence[str] = VARIANTS, tol: float = DEFAULT_TOL,
                  atol: float = 1e-4, rollout: bool = True, validate: bool = True,
                  clock: Optional[dict] = None) -> Tuple[pd.DataFrame, Optional[pd.DataFrame]]:
    """The tidy table (:data:`~dobrushin.store.results.SCHEMA`) and, with ``rollout=True``, the rollout
    table (:data:`~dobrushin.store.results.ROLLOUT_COLUMNS`) of one batch, in one pass (module docstring;
    :class:`BatchMeasure` fed the whole stack at once).

    ``attention``: ``(B, L, n, n)`` head-averaged post-softmax attention (numpy or torch, float32 kept);
    ``roles[b]``: the role of each token of input b; ``atol``: tolerance on the captured row sums.  An
    input that keeps fewer than two tokens in a variant has no pair to test and contributes no rows.
    ``clock``: a dict to which the seconds of the stages ``restrict`` (validation included), ``test`` and
    ``rollout`` are added."""
    A = as_cpu(attention)
    if A.ndim != 4:
        raise ValueError(f"attention must be (B, L, n, n), got shape {tuple(A.shape)}")
    B = A.shape[0]
    if len(roles) != B or len(input_ids) != B:
        raise ValueError(f"got {B} inputs but {len(roles)} role lists and {len(input_ids)} input ids")
    bm = BatchMeasure(roles, model=model, input_ids=input_ids, weights=weights, variants=variants, tol=tol,
                      atol=atol, rollout=rollout, validate=validate, clock=clock, hold_bytes=0)
    bm.add(A)
    return bm.finish()


def _rollout_table(table: pd.DataFrame, krs: dict, *, model, input_ids, weights, variants, L, roles) -> pd.DataFrame:
    """The rollout rows from κ(R) per (input, variant) and the per-layer numbers of ``table`` (the
    products of ``kappa_factor`` and ``bound`` over the layers, as sums of logs)."""
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
    """Test the equality condition on every input x layer x variant (the tidy table of
    :func:`measure_batch`, without the rollout).  ``attention``: ``(B, L, n, n)`` head-averaged
    post-softmax attention (numpy or torch); ``roles[b]``: the role of each of the n tokens of input b.
    The kept tokens' submatrix is renormalised before the test (``atol`` is the tolerance on the row
    sums of the captured float32 attention).  Inputs with the same kept-token layout are analysed as
    one batch; an input that keeps fewer than two tokens in a variant contributes no rows to it."""
    return measure_batch(attention, roles, model=model, input_ids=input_ids, weights=weights, variants=variants,
                         tol=tol, atol=atol, rollout=False)[0]
