"""What every loader returns (:class:`LoadedModel`) and the three things every loader does: seed the
initialisation in a forked RNG, keep transformers quiet while loading, and put the model in eval mode.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

import torch

#: the kind of inputs a model of each ``LoadedModel.kind`` reads (:attr:`dobrushin.data.inputs.InputSet.kind`):
#: a model's kind names its modality (``"vision"``), its inputs' kind the data (``"image"``); this is the one
#: place that maps the first to the second
INPUT_KIND = {"vision": "image", "text": "text"}


def input_kind(model_kind: str) -> str:
    """The inputs' kind (``"image"`` | ``"text"``) for a model of kind ``model_kind`` (``"vision"`` | ``"text"``)."""
    try:
        return INPUT_KIND[model_kind]
    except KeyError:
        raise ValueError(f"unknown model kind {model_kind!r}; expected one of {sorted(INPUT_KIND)}") from None


@dataclass
class LoadedModel:
    """A model ready for :func:`dobrushin.extract_attention`.

    ``model``: ``torch.nn.Module`` in eval mode with eager (softmax-forming) attention, on the CPU.
    ``preprocess``: vision — ``preprocess(list[PIL.Image]) -> Tensor (B, 3, S, S)``; text —
    ``preprocess(list[str]) -> dict`` of ``(B, T)`` tensors padded to the longest (``input_ids``,
    ``attention_mask``, maybe ``token_type_ids``, and ``special_tokens_mask`` which the extractor
    uses for roles and strips before the forward pass); truncation at ``max_length``.
    ``kind``: ``"vision"`` | ``"text"``, the modality (its inputs' kind is :func:`input_kind`); ``source``: ``"hf"`` | ``"timm"``;
    ``weights``: ``"pretrained"`` | ``"untrained"``; ``status``: ``"ok"`` (a loader that cannot load raises
    instead; the manifest's per-weights ``runs[w]["status"]`` and the entry's ``status``, which is the trained
    weights' one, record that);
    ``model_id``: the id asked for; ``family``: e.g. ``"dinov2"``, ``"dinov2-registers"``, ``"vit"``,
    ``"deit"``, ``"deit-distilled"``, ``"bert"``, ``"roberta"``, ``"distilbert"``;
    ``seed``: the init seed (untrained) or None; ``notes``: how weights/tokenizer/processor were
    obtained (e.g. the RoBERTa tokenizer fallback), for the manifest; ``provenance``: where the
    weights came from, machine-readable (:func:`weights_provenance`): ``{"source": "hub" | "cache",
    "revision": <snapshot commit or None>, "proxy_for": None}`` for the Hugging Face hub and cache,
    ``{"source": "package", "package", "version", "file", "sha256", "proxy_for"}`` for packaged weights,
    ``{"source": ..., "file", "sha256"}`` for a timm checkpoint file, ``{"source": "untrained", "seed"}``
    for the untrained control; it is part of the results' cache key and of the manifest.
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
    provenance: Dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def seeded(seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' loading chatter (info logs, the per-tensor progress bar) while loading."""
    from transformers.utils import logging as hf_logging

    verbosity, bar = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bar:
            hf_logging.enable_progress_bar()


def finish_model(model):
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model
