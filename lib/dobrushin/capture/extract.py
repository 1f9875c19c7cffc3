"""Post-softmax attention of every layer, one call for every supported model family.

:func:`extract_attention` finds the first registered adapter matching the model (:func:`register_adapter`),
runs one forward pass in eval mode under ``torch.inference_mode`` and returns an :class:`Extraction`.  An
adapter may name a ``prepare(model)`` step (switching to eager attention) that loaders call through
:func:`prepare_for_capture`.

Padding: pad tokens stay in the tensor with role ``pad``; their columns carry zero attention, their rows
are meaningless.  :meth:`Extraction.unpadded` removes them (a sentence alone and in a padded batch then
give the same content attention up to float rounding).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, List, Optional

import torch

from .errors import AttentionUnavailable
from .roles import ROLES, keep_indices


@dataclass
class Extraction:
    """Result of :func:`extract_attention`.

    ``attention``: float32 CPU ``(B, L, n, n)`` (head-averaged) or ``(B, L, H, n, n)``, layer 0 first;
    ``roles[b][t]``: the role of token ``t`` of input ``b`` (:data:`ROLES`); ``lengths``: unpadded length of
    each text input, None for images; ``outputs``: the model's own forward output (on its device).
    """

    attention: torch.Tensor
    roles: List[List[str]]
    lengths: Optional[List[int]]
    outputs: Any = None
    adapter: str = ""

    def __post_init__(self):
        A = self.attention
        if not isinstance(A, torch.Tensor) or A.ndim not in (4, 5) or A.shape[-1] != A.shape[-2]:
            raise ValueError("attention must be a tensor (B, L, n, n) or (B, L, H, n, n), got "
                             f"{type(A).__name__} of shape {tuple(getattr(A, 'shape', ()))}")
        B, n = A.shape[0], A.shape[-1]
        if len(self.roles) != B:
            raise ValueError(f"{len(self.roles)} role lists for {B} inputs")
        for b, r in enumerate(self.roles):
            if len(r) != n:
                raise ValueError(f"input {b}: {len(r)} roles for {n} tokens")
            bad = set(r) - set(ROLES)
            if bad:
                raise ValueError(f"input {b}: unknown role(s) {sorted(bad)}; expected {ROLES}")
        if self.lengths is not None and len(self.lengths) != B:
            raise ValueError(f"{len(self.lengths)} lengths for {B} inputs")

    @property
    def n_layers(self) -> int:
        return int(self.attention.shape[1])

    def keep(self, b: int, variant: str = "content"):
        """Token indices of input ``b`` kept by ``variant``: ``"content"`` (content tokens only),
        ``"with_special"`` (all but padding) or ``"unpadded"`` (same as ``with_special``)."""
        if variant not in ("content", "with_special", "unpadded"):
            raise ValueError(f"unknown variant {variant!r}; expected 'content', 'with_special' or 'unpadded'")
        return keep_indices(self.roles[b], "content" if variant == "content" else "with_special")

    def unpadded(self, b: int):
        """``(attention, roles)`` of input ``b`` with pad rows and columns removed
        (``(L, n_b, n_b)`` or ``(L, H, n_b, n_b)``)."""
        idx = torch.as_tensor(self.keep(b, "unpadded"), dtype=torch.long)
        A = self.attention[b].index_select(-2, idx).index_select(-1, idx)
        return A, [self.roles[b][i] for i in idx.tolist()]


@dataclass
class Adapter:
    """``matches(model) -> bool``; ``run(model, inputs, average_heads) -> Extraction``; optional
    ``prepare(model)``: make the model capturable ahead of time (e.g. switch to eager attention)."""

    name: str
    matches: Callable[[Any], bool]
    run: Callable[[Any, Any, bool], Extraction]
    prepare: Optional[Callable[[Any], Any]] = None


_ADAPTERS: List[Adapter] = []


def register_adapter(name: str, matches: Callable[[Any], bool],
                     run: Callable[[Any, Any, bool], Extraction], *, first: bool = True,
                     prepare: Optional[Callable[[Any], Any]] = None) -> None:
    """Register an adapter: ``matches(model) -> bool`` and ``run(model, inputs, average_heads) -> Extraction``.

    The first match wins; ``first=True`` puts it before the built-in ones.  Re-registering a name replaces
    it.  ``run`` is called in eval mode under ``torch.inference_mode`` with inputs on the model's device;
    it should return float32 attention on the CPU.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("adapter name must be a non-empty string")
    if not callable(matches) or not callable(run) or (prepare is not None and not callable(prepare)):
        raise ValueError(f"adapter {name!r}: matches, run (and prepare) must be callables")
    _ADAPTERS[:] = [a for a in _ADAPTERS if a.name != name]
    a = Adapter(name, matches, run, prepare)
    if first:
        _ADAPTERS.insert(0, a)
    else:
        _ADAPTERS.append(a)


def adapters() -> List[str]:
    """Names of the registered adapters, in the order they are tried."""
    return [a.name for a in _ADAPTERS]


def find_adapter(model) -> Adapter:
    """The first registered adapter matching ``model``; :class:`AttentionUnavailable` if none."""
    for a in _ADAPTERS:
        try:
            ok = a.matches(model)
        except Exception:  # a broken matcher must not hide the other adapters
            ok = False
        if ok:
            return a
    raise AttentionUnavailable(
        f"no attention adapter for {type(model).__module__}.{type(model).__name__}; registered: {adapters()}")


def prepare_for_capture(model) -> None:
    """Run the ``prepare`` step of the adapter matching ``model`` (e.g. switch timm's fused attention
    off), silently; :class:`AttentionUnavailable` when no adapter matches.  For loaders."""
    a = find_adapter(model)
    if a.prepare is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            a.prepare(model)


def model_device(model) -> torch.device:
    """The device of the model's first parameter (or buffer); the CPU for a model with neither."""
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return torch.device("cpu")


def to_device(inputs, device):
    """``inputs`` (a tensor, a dict of tensors or a tuple/list of tensors) on ``device``; other values as they are."""
    if isinstance(inputs, torch.Tensor):
        return inputs.to(device)
    if isinstance(inputs, dict) or hasattr(inputs, "items"):
        return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):  # positional inputs, e.g. FT-Transformer's (x_num, x_cat)
        return type(inputs)(v.to(device) if isinstance(v, torch.Tensor) else v for v in inputs)
    raise ValueError(f"inputs must be a tensor, a dict of tensors or a tuple of tensors, got {type(inputs).__name__}")


def extract_attention(model, inputs, *, average_heads: bool = True) -> Extraction:
    """Post-softmax attention of every layer of ``model`` on ``inputs`` (one eval-mode forward pass under
    ``torch.inference_mode``, tensors moved to the model's device), as an :class:`Extraction`.

    ``inputs``: what the forward takes (HF: a dict of tensors or a pixel tensor; timm: a pixel tensor or a
    dict with ``pixel_values``).  Raises :class:`AttentionUnavailable` when no adapter matches or a layer
    returned no attention, ``ValueError`` for malformed inputs.  HF SDPA/flash and timm fused attention
    form no softmax, so such models are switched to eager attention with a ``UserWarning``.
    """
    adapter = find_adapter(model)
    model.eval()
    inputs = to_device(inputs, model_device(model))
    with torch.inference_mode():
        ex = adapter.run(model, inputs, bool(average_heads))
    if not isinstance(ex, Extraction):
        raise AttentionUnavailable(f"adapter {adapter.name!r} returned {type(ex).__name__}, not an Extraction")
    if not ex.adapter:
        ex.adapter = adapter.name
    return ex
