"""Token roles (one of :data:`ROLES` per token) and the tokens each variant keeps (:func:`keep_indices`:
``content`` keeps content tokens, ``with_special`` all but padding).

* vision: ``cls`` at 0; DeiT's distillation token (HF ``model_type == "deit"``, timm ``dist_token``) ``distillation`` at 1;
  DINOv2's registers (``num_register_tokens``, timm ``reg_token``) ``register`` next; patches ``content``.
* text: ``pad`` where ``attention_mask == 0``; of the rest, tokens flagged in ``special_tokens_mask`` are
  ``cls`` when first (``[CLS]``, ``<s>``), else ``sep``.  Without that mask, the config's cls/bos id in first
  position gives ``cls`` and its sep/eos ids ``sep``; without those, the first real token is ``cls`` and the
  last ``sep``, with a warning.
* FT-Transformer: ``cls`` at 0 (rtdl prepends it), every feature token ``content``.
"""
from __future__ import annotations

import warnings
from typing import Any, List, Optional, Sequence

import numpy as np
import torch

ROLES = ("cls", "register", "distillation", "sep", "pad", "content")
_ROLE_SET = frozenset(ROLES)


def keep_indices(roles: Sequence[str], variant: str) -> np.ndarray:
    """Token indices kept by a variant: ``content`` keeps content tokens only; ``with_special``
    keeps every token except padding."""
    r = np.asarray(roles)
    unknown = set(roles) - _ROLE_SET
    if unknown:
        # as plain strings: a numpy array of roles has np.str_ elements, which print as np.str_('…')
        raise ValueError(f"unknown token role(s) {sorted(str(u) for u in unknown)}; expected {ROLES}")
    if variant == "content":
        return np.flatnonzero(r == "content")
    if variant == "with_special":
        return np.flatnonzero(r != "pad")
    raise ValueError(f"unknown variant {variant!r}; expected 'content' or 'with_special'")


def vision_roles(n_tokens: int, *, n_cls: int = 1, n_distillation: int = 0, n_registers: int = 0,
                 order: Sequence[str] = ("cls", "distillation", "register")) -> List[str]:
    """Roles of one image sequence: the prefix tokens in ``order`` then ``content`` patches."""
    counts = {"cls": n_cls, "distillation": n_distillation, "register": n_registers}
    if sorted(order) != sorted(counts):
        raise ValueError(f"order must be a permutation of {tuple(counts)}, got {tuple(order)}")
    prefix: List[str] = []
    for role in order:
        c = counts[role]
        if c < 0:
            raise ValueError(f"negative number of {role} tokens: {c}")
        prefix += [role] * c
    if len(prefix) > n_tokens:
        raise ValueError(f"{len(prefix)} prefix tokens but only {n_tokens} tokens")
    return prefix + ["content"] * (n_tokens - len(prefix))


def _config_ids(config, *names) -> set:
    out = set()
    for nm in names:
        v = getattr(config, nm, None) if config is not None else None
        if isinstance(v, int):
            out.add(v)
    return out


def text_roles(input_ids: torch.Tensor, attention_mask: Optional[torch.Tensor],
               special_tokens_mask: Optional[torch.Tensor] = None, config: Any = None) -> List[List[str]]:
    """Roles of a batch of token sequences (see the module docstring for the rules)."""
    ids = torch.as_tensor(input_ids).cpu()
    if ids.ndim != 2:
        raise ValueError(f"input_ids must be (B, T), got shape {tuple(ids.shape)}")
    mask = torch.ones_like(ids) if attention_mask is None else torch.as_tensor(attention_mask).cpu()
    if mask.shape != ids.shape:
        raise ValueError(f"attention_mask shape {tuple(mask.shape)} differs from input_ids {tuple(ids.shape)}")
    stm = None if special_tokens_mask is None else torch.as_tensor(special_tokens_mask).cpu()
    if stm is not None and stm.shape != ids.shape:
        raise ValueError(f"special_tokens_mask shape {tuple(stm.shape)} differs from input_ids {tuple(ids.shape)}")
    cls_ids = _config_ids(config, "cls_token_id", "bos_token_id")
    sep_ids = _config_ids(config, "sep_token_id", "eos_token_id")
    warned = False
    out: List[List[str]] = []
    reals, rows = (mask != 0).tolist(), ids.tolist()  # Python lists once (indexing a tensor per token is slow)
    stms = None if stm is None else stm.tolist()
    for b in range(ids.shape[0]):
        real, row = reals[b], rows[b]
        roles = ["pad" if not r else "content" for r in real]
        pos = [t for t, r in enumerate(real) if r]
        if not pos:
            raise ValueError(f"input {b} has no real token (attention_mask is all zero)")
        if stm is not None:
            for t in pos:
                if int(stms[b][t]):
                    roles[t] = "cls" if t == pos[0] else "sep"
        elif cls_ids or sep_ids:
            for t in pos:
                if row[t] in cls_ids and t == pos[0]:
                    roles[t] = "cls"
                elif row[t] in sep_ids:
                    roles[t] = "sep"
        else:
            if not warned:
                warnings.warn("no special_tokens_mask and no special token ids in the config: taking the "
                              "first real token as [CLS] and the last as [SEP]", UserWarning, stacklevel=3)
                warned = True
            roles[pos[0]] = "cls"
            if len(pos) > 1:
                roles[pos[-1]] = "sep"
        out.append(roles)
    return out
