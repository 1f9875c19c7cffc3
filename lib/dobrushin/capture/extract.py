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
from dataclasses import dataclass
from typing import Any, Callable, List, Optional, Sequence

import torch

from ..experiments.measure import ROLES, keep_indices  # one definition of the roles and of the kept tokens

#: keys a tokenizer may return that are not forward arguments (removed before the forward pass)
_NON_FORWARD_KEYS = ("special_tokens_mask", "offset_mapping", "length", "overflowing_tokens",
                     "num_truncated_tokens")


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
    """``matches(model) -> bool``; ``run(model, inputs, average_heads) -> Extraction``."""

    name: str
    matches: Callable[[Any], bool]
    run: Callable[[Any, Any, bool], Extraction]


_ADAPTERS: List[Adapter] = []


def register_adapter(name: str, matches: Callable[[Any], bool],
                     run: Callable[[Any, Any, bool], Extraction], *, first: bool = True) -> None:
    """Register an adapter: ``matches(model) -> bool`` and ``run(model, inputs, average_heads) -> Extraction``.

    Adapters are tried in order and the first match wins; ``first=True`` (default) puts the new
    adapter before the built-in ones so it can override them.  Re-registering a name replaces it.
    The ``run`` callable is called in eval mode under ``torch.inference_mode`` with inputs
    already moved to the model's device; it should return attention as float32 on the CPU.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("adapter name must be a non-empty string")
    if not callable(matches) or not callable(run):
        raise ValueError(f"adapter {name!r}: matches and run must be callables")
    _ADAPTERS[:] = [a for a in _ADAPTERS if a.name != name]
    a = Adapter(name, matches, run)
    if first:
        _ADAPTERS.insert(0, a)
    else:
        _ADAPTERS.append(a)


def adapters() -> List[str]:
    """Names of the registered adapters, in the order they are tried."""
    return [a.name for a in _ADAPTERS]


def find_adapter(model) -> Adapter:
    """The first registered adapter matching ``model``; :class:`AttentionUnavailable` if none."""
    if type(model).__module__.startswith("rtdl_revisiting_models"):
        from ..models import ft_transformer  # noqa: F401  (registers the FT-Transformer adapter on import)
    for a in _ADAPTERS:
        try:
            ok = a.matches(model)
        except Exception:  # a broken matcher must not hide the other adapters
            ok = False
        if ok:
            return a
    raise AttentionUnavailable(
        f"no attention adapter for {type(model).__module__}.{type(model).__name__}; registered: {adapters()}")


def _model_device(model) -> torch.device:
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    return torch.device("cpu")


def _to_device(inputs, device):
    if isinstance(inputs, torch.Tensor):
        return inputs.to(device)
    if isinstance(inputs, dict) or hasattr(inputs, "items"):
        return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in inputs.items()}
    if isinstance(inputs, (tuple, list)):  # positional inputs, e.g. FT-Transformer's (x_num, x_cat)
        return type(inputs)(v.to(device) if isinstance(v, torch.Tensor) else v for v in inputs)
    raise ValueError(f"inputs must be a tensor, a dict of tensors or a tuple of tensors, got {type(inputs).__name__}")


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
    adapter = find_adapter(model)
    model.eval()
    inputs = _to_device(inputs, _model_device(model))
    with torch.inference_mode():
        ex = adapter.run(model, inputs, bool(average_heads))
    if not isinstance(ex, Extraction):
        raise AttentionUnavailable(f"adapter {adapter.name!r} returned {type(ex).__name__}, not an Extraction")
    if not ex.adapter:
        ex.adapter = adapter.name
    return ex


# ----------------------------------------------------------------------------------------------
# roles


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
    for b in range(ids.shape[0]):
        real = (mask[b] != 0).tolist()
        row = ids[b].tolist()
        roles = ["pad" if not r else "content" for r in real]
        pos = [t for t, r in enumerate(real) if r]
        if not pos:
            raise ValueError(f"input {b} has no real token (attention_mask is all zero)")
        if stm is not None:
            for t in pos:
                if int(stm[b, t]):
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


# ----------------------------------------------------------------------------------------------
# switching to eager attention


def _is_hf(model) -> bool:
    try:
        from transformers import PreTrainedModel
    except ImportError:  # pragma: no cover
        return False
    return isinstance(model, PreTrainedModel)


def _timm_attn_modules(model):
    return [m for m in model.modules() if hasattr(m, "fused_attn") and type(m).__module__.startswith("timm.")]


def ensure_eager(model, *, _stacklevel: int = 2) -> bool:
    """Switch ``model`` to an attention implementation that forms the softmax (HF: ``"eager"``;
    timm: ``fused_attn = False`` on every attention module).  Returns True when something was
    switched (and warns), False when it already was eager."""
    if _is_hf(model):
        impl = getattr(model.config, "_attn_implementation", None)
        if impl in (None, "eager"):
            return False
        try:
            model.set_attn_implementation("eager")
        except Exception as e:  # older transformers: set the config field
            try:
                model.config._attn_implementation = "eager"
            except Exception:
                raise AttentionUnavailable(
                    f"model uses {impl!r} attention, which returns no attention weights, and cannot be "
                    f"switched to eager attention ({e}); load it with attn_implementation='eager'") from e
        warnings.warn(f"{type(model).__name__} used {impl!r} attention, which returns no attention weights; "
                      "switched it to eager attention", UserWarning, stacklevel=_stacklevel)
        return True
    mods = [m for m in _timm_attn_modules(model) if bool(getattr(m, "fused_attn"))]
    for m in mods:
        m.fused_attn = False
    if mods:
        warnings.warn(f"{type(model).__name__}: {len(mods)} attention module(s) used fused attention, which "
                      "never forms the softmax; switched them to fused_attn=False", UserWarning, stacklevel=_stacklevel)
    return bool(mods)


# ----------------------------------------------------------------------------------------------
# capture helper


class _Capture:
    """Forward hooks that store one (head-averaged) attention tensor per call, on the CPU."""

    def __init__(self, average_heads: bool):
        self.average_heads = average_heads
        self.store: List[Optional[torch.Tensor]] = []
        self.handles = []

    def add(self, w: Optional[torch.Tensor]):
        if w is None:
            self.store.append(None)
            return
        if w.ndim != 4:
            raise AttentionUnavailable(f"captured attention has shape {tuple(w.shape)}, expected (B, H, n, n)")
        w = w.float()
        w = w.mean(1) if self.average_heads else w
        self.store.append(w.to("cpu"))

    def hook_output(self, module, pick: Callable[[Any], Optional[torch.Tensor]]):
        self.handles.append(module.register_forward_hook(lambda m, a, out: self.add(pick(out))))

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []

    def stacked(self, expected: int, what: str) -> torch.Tensor:
        if len(self.store) != expected:
            raise AttentionUnavailable(f"{what}: captured {len(self.store)} attention maps for {expected} layers")
        missing = [i for i, w in enumerate(self.store) if w is None]
        if missing:
            raise AttentionUnavailable(f"{what}: layer(s) {missing} returned no attention weights")
        return torch.stack(self.store, dim=1)


# ----------------------------------------------------------------------------------------------
# HF transformers adapter


def _hf_attention_specs(model):
    """(target classes, class-name suffixes, tuple index) of the modules recording "attentions"."""
    classes, names, index = [], [], 1
    for m in model.modules():
        rec = getattr(type(m), "_can_record_outputs", None) if _is_hf(m) else None
        if not rec or "attentions" not in rec:
            continue
        specs = rec["attentions"]
        specs = specs if isinstance(specs, list) else [specs]
        for sp in specs:
            if isinstance(sp, type):
                classes.append(sp)
            elif isinstance(sp, str):
                names.append(sp)
            else:  # OutputRecorder
                if getattr(sp, "target_class", None) is not None:
                    classes.append(sp.target_class)
                if getattr(sp, "class_name", None):
                    names.append(sp.class_name)
                index = getattr(sp, "index", 1)
    return tuple(classes), names, index


def _hf_attention_modules(model):
    classes, names, index = _hf_attention_specs(model)
    mods = [m for nm, m in model.named_modules()
            if (classes and isinstance(m, classes)) or any(nm.endswith(s) for s in names)]
    return mods, index


def _hf_forward_kwargs(model, inputs):
    import inspect

    if isinstance(inputs, torch.Tensor):
        inputs = {"pixel_values": inputs}
    kw = {k: v for k, v in inputs.items() if k not in _NON_FORWARD_KEYS}
    if "pixel_values" in kw:
        px = kw["pixel_values"]
        if px.ndim != 4:
            raise ValueError(f"pixel_values must be (B, C, H, W), got shape {tuple(px.shape)}")
        size = getattr(model.config, "image_size", None)
        size = (size, size) if isinstance(size, int) else tuple(size) if size else None
        if size and tuple(px.shape[-2:]) != size and "interpolate_pos_encoding" not in kw:
            if "interpolate_pos_encoding" in inspect.signature(model.forward).parameters:
                kw["interpolate_pos_encoding"] = True
    elif "input_ids" not in kw and "inputs_embeds" not in kw:
        raise ValueError(f"HF inputs need 'input_ids' or 'pixel_values'; got keys {sorted(inputs)}")
    return inputs, kw


def _hf_vision_roles(model, pixel_values: torch.Tensor, n: int) -> List[List[str]]:
    cfg = model.config
    patch = getattr(cfg, "patch_size", None)
    patch = (patch, patch) if isinstance(patch, int) else tuple(patch) if patch else None
    n_dist = 1 if getattr(cfg, "model_type", "") == "deit" else 0
    n_reg = int(getattr(cfg, "num_register_tokens", 0) or 0)
    if patch:
        n_patches = (pixel_values.shape[-2] // patch[0]) * (pixel_values.shape[-1] // patch[1])
        if n - n_patches != 1 + n_dist + n_reg:
            raise AttentionUnavailable(
                f"cannot assign token roles: {n} tokens, {n_patches} patches, but the layout predicts "
                f"{1 + n_dist + n_reg} prefix tokens (cls + {n_dist} distillation + {n_reg} registers)")
    r = vision_roles(n, n_cls=1, n_distillation=n_dist, n_registers=n_reg)
    return [list(r) for _ in range(pixel_values.shape[0])]


def _hf_matches(model) -> bool:
    return _is_hf(model)


def _hf_run(model, inputs, average_heads: bool) -> Extraction:
    ensure_eager(model, _stacklevel=4)
    inputs, kw = _hf_forward_kwargs(model, inputs)
    mods, index = _hf_attention_modules(model)
    cap = _Capture(average_heads)
    if mods:
        for m in mods:
            cap.hook_output(m, lambda out: out[index] if isinstance(out, tuple) and len(out) > index else None)
        try:
            outputs = model(**kw)
        finally:
            cap.remove()
        A = cap.stacked(len(mods), type(model).__name__)
    else:  # older-style model: ask for the attentions tuple (memory O(B·L·H·n²) for one pass)
        outputs = model(**kw, output_attentions=True)
        atts = getattr(outputs, "attentions", None)
        if not atts or any(a is None for a in atts):
            raise AttentionUnavailable(f"{type(model).__name__} returned no attentions")
        for a in atts:
            cap.add(a)
        A = cap.stacked(len(atts), type(model).__name__)
    n = A.shape[-1]
    if "input_ids" in kw:
        am = kw.get("attention_mask")
        roles = text_roles(kw["input_ids"], am, inputs.get("special_tokens_mask"), model.config)
        if len(roles[0]) != n:
            raise AttentionUnavailable(f"{n} attention tokens but {len(roles[0])} input tokens")
        lengths = [sum(r != "pad" for r in rr) for rr in roles]
    elif "pixel_values" in kw:
        roles = _hf_vision_roles(model, kw["pixel_values"], n)
        lengths = None
    else:
        roles = [["content"] * n for _ in range(A.shape[0])]
        lengths = None
    return Extraction(attention=A, roles=roles, lengths=lengths, outputs=outputs, adapter="hf")


# ----------------------------------------------------------------------------------------------
# timm adapter


def _timm_blocks(model):
    blocks = getattr(model, "blocks", None)
    if blocks is None:
        return None
    blocks = list(blocks)
    if not blocks or not all(hasattr(getattr(b, "attn", None), "attn_drop") for b in blocks):
        return None
    return blocks


def _timm_matches(model) -> bool:
    return type(model).__module__.startswith("timm.") and _timm_blocks(model) is not None


def _timm_roles(model, B: int, n: int) -> List[List[str]]:
    n_cls = 1 if getattr(model, "cls_token", None) is not None else 0
    n_dist = 1 if getattr(model, "dist_token", None) is not None else 0
    n_reg = int(getattr(model, "num_reg_tokens", 0) or 0) if getattr(model, "reg_token", None) is not None else 0
    n_prefix = getattr(model, "num_prefix_tokens", None)
    if n_prefix is not None and n_prefix != n_cls + n_dist + n_reg:
        raise AttentionUnavailable(f"cannot assign token roles: num_prefix_tokens={n_prefix} but cls={n_cls}, "
                                   f"distillation={n_dist}, registers={n_reg}")
    r = vision_roles(n, n_cls=n_cls, n_distillation=n_dist, n_registers=n_reg)
    return [list(r) for _ in range(B)]


def _timm_run(model, inputs, average_heads: bool) -> Extraction:
    if isinstance(inputs, dict) or hasattr(inputs, "items"):
        if "pixel_values" not in inputs:
            raise ValueError(f"timm inputs: expected a pixel tensor or a dict with 'pixel_values', got keys {sorted(inputs)}")
        inputs = inputs["pixel_values"]
    if not isinstance(inputs, torch.Tensor) or inputs.ndim != 4:
        raise ValueError(f"timm inputs must be a pixel tensor (B, C, H, W), got {getattr(inputs, 'shape', type(inputs))}")
    ensure_eager(model, _stacklevel=4)
    blocks = _timm_blocks(model)
    cap = _Capture(average_heads)
    for blk in blocks:
        cap.hook_output(blk.attn.attn_drop, lambda out: out)
    try:
        outputs = model(inputs)
    finally:
        cap.remove()
    A = cap.stacked(len(blocks), type(model).__name__)
    roles = _timm_roles(model, A.shape[0], A.shape[-1])
    return Extraction(attention=A, roles=roles, lengths=None, outputs=outputs, adapter="timm")


register_adapter("timm", _timm_matches, _timm_run, first=False)
register_adapter("hf", _hf_matches, _hf_run, first=False)


__all__ = [
    "ROLES", "Adapter", "AttentionUnavailable", "Extraction", "adapters", "ensure_eager",
    "extract_attention", "find_adapter", "register_adapter", "text_roles", "vision_roles",
]
