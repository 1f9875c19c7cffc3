"""timm models: trained weights from the checkpoint file ``resolve_timm_weights`` names, or the untrained
control from timm's registry."""
from __future__ import annotations

from typing import Any, Dict

from ..capture import prepare_for_capture
from .base import LoadedModel, finish_model, seeded
from .configs import model_family
from .errors import ArchitectureUnavailable, WeightsUnavailable
from .preprocessing import timm_preprocess
from .provenance import resolve_timm_weights

def _timm_create(name: str, pretrained: bool, image_size: int, **kw):
    import timm

    if not timm.is_model(name):
        raise ArchitectureUnavailable(f"{name!r} is not in timm's registry (timm {timm.__version__})")
    return timm.create_model(name, pretrained=pretrained, img_size=image_size, **kw)


def load_timm(model_id: str, name: str, pretrained: bool, seed: int, image_size: int,
               hub_timeout: float) -> LoadedModel:
    import timm

    notes = []
    provenance: Dict[str, Any] = {"source": "untrained", "seed": int(seed)}
    with seeded(seed):
        if not pretrained:
            model = _timm_create(name, False, image_size)
            notes += [f"weights: untrained control (seeded random init, seed={seed})",
                      f"architecture: timm registry (timm {timm.__version__})"]
        else:
            res = resolve_timm_weights(name, hub_timeout)  # the one decision; the provenance recorded is its answer
            if res.where == "unavailable":
                raise WeightsUnavailable(res.reason)
            model = _timm_create(name, True, image_size, pretrained_cfg_overlay={"file": res.path})
            notes.append({"hub-cache": "weights: local Hugging Face cache",
                          "hub-download": "weights: downloaded from the Hugging Face hub",
                          "torch-hub-cache": "weights: torch hub cache"}[res.where])
            provenance = dict(res.provenance)
    model = finish_model(model)
    prepare_for_capture(model)  # through the adapter registry: timm's fused attention never forms the softmax
    preprocess = timm_preprocess(model, image_size)
    notes.append("processor: timm resolve_data_config + create_transform")
    return LoadedModel(model=model, preprocess=preprocess, kind="vision", source="timm",
                       weights="pretrained" if pretrained else "untrained", model_id=model_id, status="ok",
                       family=model_family(name), seed=None if pretrained else int(seed),
                       notes="; ".join(notes), image_size=image_size, max_length=None, provenance=provenance)
