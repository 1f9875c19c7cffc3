"""What every loader returns (:class:`LoadedModel`) and what every loader does: seed the initialisation
in a forked RNG, keep transformers quiet while loading, put the model in eval mode."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

import torch

#: ``LoadedModel.kind`` (the modality) -> ``InputSet.kind`` of the inputs it reads
INPUT_KIND = {"vision": "image", "text": "text"}


def input_kind(model_kind: str) -> str:
    """The inputs' kind (``"image"`` | ``"text"``) for a model of kind ``model_kind`` (``"vision"`` | ``"text"``)."""
    try:
        return INPUT_KIND[model_kind]
    except KeyError:
        raise ValueError(f"unknown model kind {model_kind!r}; expected one of {sorted(INPUT_KIND)}") from None


@dataclass
class LoadedModel:
    """A model ready for ``dobrushin.extract_attention``.

    ``model``: eval mode, eager (softmax-forming) attention, on the CPU.  ``preprocess``: vision
    ``list[PIL.Image] -> Tensor (B, 3, S, S)``; text ``list[str] -> dict`` of ``(B, T)`` tensors padded to
    the longest and truncated at ``max_length``, including ``special_tokens_mask``, which the extractor
    reads roles from and strips before the forward pass.  ``kind``: ``"vision"`` | ``"text"``; ``weights``:
    ``"pretrained"`` | ``"untrained"``; ``status``: ``"ok"`` (a loader that cannot load raises instead);
    ``seed``: the init seed (untrained) or None; ``notes``: how weights, tokenizer and processor were
    obtained; ``provenance``: where the weights came from (``weights_provenance``), part of the results'
    cache key and of the manifest.
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
