"""Post-softmax attention of every layer, one call for every supported model family.

:func:`extract_attention` is the single entry point (in the spirit of timm's ``AttentionExtract``):
it finds an *adapter* for the model (:func:`register_adapter`), runs one forward pass in eval mode
under ``torch.inference_mode`` and returns an :class:`Extraction`.

Built-in adapters
-----------------
``"hf"``
    Hugging Face ``transformers`` encoders whose attention modules return ``(output, weights)``
    (ViT, DeiT incl. distilled, DINOv2, DINOv2-with-registers, BERT/MiniLM, RoBERTa, DistilBERT and
    any other model listing its attention class in ``_can_record_outputs["attentions"]``).  Forward
    hooks on those modules read the post-softmax weights ``(B, H, n, n)`` and average the heads at
    once, so memory stays ``O(B·L·n²)``.  A model under SDPA/flash/flex attention returns no weights;
    it is switched to eager attention (``model.set_attn_implementation("eager")``) with a
    :class:`UserWarning` saying so.
``"timm"``
    timm Vision Transformers (``VisionTransformer`` and subclasses such as ``VisionTransformerDistilled``):
    a forward hook on each block's ``attn.attn_drop`` reads the softmax output.  Fused attention
    (``F.scaled_dot_product_attention``) never forms the softmax, so every ``Attention`` module with
    ``fused_attn=True`` is switched to ``fused_attn=False`` with a :class:`UserWarning`.

Token roles
-----------
Each token gets one role from :data:`ROLES`:

* vision, HF: ``cls`` at 0; DeiT (``model_type == "deit"``) ``distillation`` at 1; DINOv2-with-registers
  ``register`` at 1..R (``config.num_register_tokens``); patches ``content``.
* vision, timm: ``cls`` at 0 (when ``cls_token`` exists); ``distillation`` at 1 (``dist_token``);
  then ``reg_token``'s R tokens ``register``; patches ``content``.
* text: ``pad`` where ``attention_mask == 0``; among the rest, tokens flagged by a
  ``special_tokens_mask`` entry of ``inputs`` (what :func:`dobrushin.models.load_model`'s text
  preprocess adds; it is removed before the forward pass) are ``cls`` when first in the sequence
  (``[CLS]``, RoBERTa ``<s>``) and ``sep`` otherwise (``[SEP]``, ``</s>``).  Without a
  ``special_tokens_mask``, ids equal to ``config.cls_token_id``/``bos_token_id`` → ``cls`` and
  ``config.sep_token_id``/``eos_token_id`` → ``sep`` when the config names them; otherwise the first
  real token is ``cls`` and the last real token ``sep`` (the BERT-family layout), with a warning.

Padding: pad tokens stay in the returned tensor with role ``pad`` (their columns carry zero
attention because the mask is applied before the softmax; their rows are meaningless).  Use
:meth:`Extraction.unpadded` or the roles (``dobrushin.measure.keep_indices``) to remove them; a
sentence alone and the same sentence in a padded batch then give the same content attention up to
float rounding.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, List, Optional, Sequence

import torch

#: the token roles, in the order used by :mod:`dobrushin.measure`
ROLES = ("cls", "register", "distillation", "sep", "pad", "content")


class AttentionUnavailable(RuntimeError):
    """The model cannot expose post-softmax attention (no adapter, or the capture came back empty)."""


@dataclass
class Extraction:
    """Result of :func:`extract_attention`.

    ``attention``: float32 CPU tensor ``(B, L, n, n)`` (head-averaged) or ``(B, L, H, n, n)``
    (``average_heads=False``): post-softmax attention of every layer (layer 0 first), eval mode.
    ``roles``: ``roles[b][t]`` is the role of token ``t`` of input ``b`` (from :data:`ROLES`).
    ``lengths``: real (unpadded) length of each input for text; ``None`` for images.
    ``outputs``: the model's own forward output (on the model's device).
    ``adapter``: the name of the adapter that produced it.
    """

    attention: torch.Tensor
    roles: List[List[str]]
    lengths: Optional[List[int]]
    outputs: Any = None
    adapter: str = ""

    def unpadded(self, b: int):
        """``(attention, roles)`` of input ``b`` with pad rows and columns removed
        (``(L, n_b, n_b)`` or ``(L, H, n_b, n_b)``)."""
        raise NotImplementedError

    def keep(self, b: int, variant: str = "content"):
        """Token indices of input ``b`` kept by ``variant`` (see ``dobrushin.measure.keep_indices``)."""
        raise NotImplementedError


@dataclass
class Adapter:
    name: str
    matches: Callable[[Any], bool]
    run: Callable[[Any, Any, bool], Extraction]


_ADAPTERS: List[Adapter] = []


def register_adapter(name: str, matches: Callable[[Any], bool],
                     run: Callable[[Any, Any, bool], Extraction], *, first: bool = True) -> None:
    """Register an adapter: ``matches(model) -> bool`` and ``run(model, inputs, average_heads) -> Extraction``.

    Adapters are tried in order and the first match wins; ``first=True`` (default) puts the new
    adapter before the built-in ones so it can override them.  Re-registering a name replaces it.
    """
    raise NotImplementedError


def adapters() -> List[str]:
    """Names of the registered adapters, in the order they are tried."""
    raise NotImplementedError


def find_adapter(model) -> Adapter:
    """The first registered adapter matching ``model``; :class:`AttentionUnavailable` if none."""
    raise NotImplementedError


def extract_attention(model, inputs, *, average_heads: bool = True) -> Extraction:
    """Post-softmax attention of every layer of ``model`` on ``inputs`` (one forward pass).

    ``inputs`` is what the model's forward takes: a dict of tensors for HF models (``input_ids``,
    ``attention_mask``, ... or ``pixel_values``; a bare pixel tensor is accepted too) and a pixel
    tensor for timm (a dict with ``pixel_values`` is accepted too).  Tensors are moved to the
    model's device.  The model is put in eval mode; the pass runs under ``torch.inference_mode``.
    Returns an :class:`Extraction` (attention on the CPU in float32).

    Raises :class:`AttentionUnavailable` when no adapter matches or a layer returned no attention,
    ``ValueError`` for malformed inputs.  Models whose attention would be silently skipped (HF
    SDPA/flash, timm fused attention) are switched to eager attention with a ``UserWarning``.
    """
    raise NotImplementedError


def ensure_eager(model) -> bool:
    """Switch ``model`` to an attention implementation that forms the softmax (HF: ``"eager"``;
    timm: ``fused_attn = False`` on every attention module).  Returns True when something was
    switched (and warns), False when it already was eager."""
    raise NotImplementedError


def text_roles(input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
               special_tokens_mask: Optional[torch.Tensor] = None, config: Any = None) -> List[List[str]]:
    """Roles of a batch of token sequences (see the module docstring for the rules)."""
    raise NotImplementedError


def vision_roles(n_tokens: int, *, n_cls: int = 1, n_distillation: int = 0, n_registers: int = 0,
                 order: Sequence[str] = ("cls", "distillation", "register")) -> List[str]:
    """Roles of one image sequence: the prefix tokens in ``order`` then ``content`` patches."""
    raise NotImplementedError


__all__ = [
    "ROLES", "Adapter", "AttentionUnavailable", "Extraction", "adapters", "ensure_eager",
    "extract_attention", "find_adapter", "register_adapter", "text_roles", "vision_roles",
]
