"""The ``"ft-transformer"`` adapter: ``rtdl_revisiting_models.FTTransformer``.

Tokens: ``[CLS]`` (prepended by rtdl: role ``cls`` at 0), then one per numeric and one per categorical
feature.  Each block's post-softmax probabilities are read at the input of its attention dropout (an absent
one is stood in for while capturing), with the block's attention input.  The last block computes only the
CLS query, so its full ``n x n`` matrix is recomputed from that block's input (:func:`recompute_attention`);
for earlier blocks the recomputation equals the hooked attention, for the last its CLS row (tested).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, List, Optional

import torch
import torch.nn.functional as F

from .extract import Extraction
from .hooks import HookPoint, recording

#: position of the [CLS] token in rtdl_revisiting_models.FTTransformer (it is prepended)
CLS_POSITION = 0


def matches(model) -> bool:
    """An ``rtdl_revisiting_models.FTTransformer`` (rtdl is imported only for models from it)."""
    if not type(model).__module__.startswith("rtdl_revisiting_models"):
        return False
    import rtdl_revisiting_models as rtdl

    return isinstance(model, rtdl.FTTransformer)


def _attention_modules(model) -> List[Any]:
    if not matches(model):
        raise ValueError(f"expected an rtdl_revisiting_models.FTTransformer, got {type(model).__name__}")
    mods = [blk["attention"] for blk in model.backbone.blocks]
    for i, m in enumerate(mods):
        if m.key_compression is not None:
            raise ValueError(f"block {i} uses Linformer key compression: its attention is not square (n x n)")
    return mods


def recompute_attention(attn_module, x: torch.Tensor) -> torch.Tensor:
    """Post-softmax attention ``(B, H, n, n)`` of ``attn_module`` for **all** queries of ``x`` ``(B, n, d)``.

    The same operations as ``rtdl_revisiting_models.MultiheadAttention.forward`` with ``x_q = x_kv = x``:
    ``softmax(W_q(x) W_k(x)ᵀ / √d_head)`` per head (no dropout).
    """
    if x.ndim != 3:
        raise ValueError(f"attention input must be (B, n, d), got shape {tuple(x.shape)}")
    if attn_module.key_compression is not None:
        raise ValueError("Linformer key compression: attention is not square")
    q, k = attn_module.W_q(x), attn_module.W_k(x)
    d_head_key = k.shape[-1] // attn_module._n_heads
    q, k = attn_module._reshape(q), attn_module._reshape(k)
    logits = q @ k.transpose(1, 2) / math.sqrt(d_head_key)
    probs = F.softmax(logits, dim=-1)
    B, n = x.shape[0], x.shape[1]
    return probs.reshape(B, attn_module._n_heads, n, n)


@dataclass
class Capture:
    """What :func:`capture` saw in one forward pass (float32, CPU).

    ``hooked[l]``: ``(B, H, n_q, n)`` attention computed by block ``l`` (``n_q = n`` except the last
    block, where ``n_q = 1``: the CLS query); ``inputs[l]``: ``(B, n, d)`` the block's attention input;
    ``recomputed[l]``: ``(B, H, n, n)`` :func:`recompute_attention` of that input; ``outputs``: model output.
    """

    hooked: List[torch.Tensor]
    inputs: List[torch.Tensor]
    recomputed: List[torch.Tensor]
    outputs: torch.Tensor

    def full(self) -> torch.Tensor:
        """``(B, L, H, n, n)``: hooked attention for the blocks that compute every query, the
        recomputation for the last block (which computes only the CLS query)."""
        layers = [h if h.shape[-2] == h.shape[-1] else r for h, r in zip(self.hooked, self.recomputed)]
        return torch.stack(layers, dim=1)


def _split_inputs(inputs):
    if isinstance(inputs, dict) or hasattr(inputs, "items"):
        unknown = set(inputs) - {"x_num", "x_cat", "x_cont"}
        if unknown:
            raise ValueError(f"FT-Transformer inputs: unknown key(s) {sorted(unknown)}; expected 'x_num', 'x_cat'")
        return inputs.get("x_num", inputs.get("x_cont")), inputs.get("x_cat")
    if isinstance(inputs, (tuple, list)) and len(inputs) == 2:
        return inputs[0], inputs[1]
    raise ValueError("FT-Transformer inputs must be (x_num, x_cat) or {'x_num': ..., 'x_cat': ...} "
                     f"(None for an absent kind), got {type(inputs).__name__}")


def hook_points(model) -> List[HookPoint]:
    """The named hook points of an FT-Transformer: per block, the input of the attention's dropout
    (the post-softmax probabilities ``(B·H, n_q, n)``) and the key/value input of the attention
    module (its second positional argument, the normalised token states ``(B, n, d)``)."""
    points = []
    for i in range(len(_attention_modules(model))):
        points += [HookPoint(f"backbone.blocks.{i}.attention.dropout", "input", 0),
                   HookPoint(f"backbone.blocks.{i}.attention", "input", 1)]
    return points


@torch.no_grad()
def capture(model, x_num: Optional[torch.Tensor], x_cat: Optional[torch.Tensor]) -> Capture:
    """One eval-mode forward pass of ``model`` recording every block's attention (see :class:`Capture`)."""
    mods = _attention_modules(model)
    points = hook_points(model)
    was = model.training
    model.eval()
    try:
        with recording(model, points) as rec:
            out = model(x_num, x_cat)
    finally:
        model.train(was)
    seen = rec.per_point(type(model).__name__)
    probs, inputs = seen[0::2], seen[1::2]
    hooked, recomputed = [], []
    for m, p, x in zip(mods, probs, inputs):
        B = x.shape[0]
        hooked.append(p.reshape(B, m._n_heads, p.shape[-2], p.shape[-1]).float().cpu())
        recomputed.append(recompute_attention(m, x).float().cpu())
    return Capture(hooked=hooked, inputs=[x.float().cpu() for x in inputs], recomputed=recomputed, outputs=out)


def roles_for(model, n_tokens: int) -> List[str]:
    """Token roles of one FT-Transformer input: ``cls`` at :data:`CLS_POSITION`, ``content`` elsewhere."""
    r = ["content"] * n_tokens
    r[CLS_POSITION] = "cls"
    return r


def extract(model, inputs, average_heads: bool = True) -> Extraction:
    """:class:`~dobrushin.capture.extract.Extraction` of an FT-Transformer on ``inputs`` = ``(x_num, x_cat)``
    or ``{"x_num": ..., "x_cat": ...}``: attention ``(B, L, n, n)`` (``(B, L, H, n, n)`` with
    ``average_heads=False``), the last block recomputed for all queries; roles ``cls``/``content``."""
    x_num, x_cat = _split_inputs(inputs)
    cap = capture(model, x_num, x_cat)
    A = cap.full()
    if average_heads:
        A = A.mean(2)
    B, n = A.shape[0], A.shape[-1]
    roles = [roles_for(model, n) for _ in range(B)]
    return Extraction(attention=A.contiguous(), roles=roles, lengths=None, outputs=cap.outputs,
                      adapter="ft-transformer")
