"""Preprocessing: images to the tensor a vision model takes, texts to the tokenizer's tensors.

Images (converted to RGB): the model's own processor (rescaled when ``image_size`` is not its crop size;
timm's data config), else the embedded description of the published ``preprocessor_config.json``.  Texts:
padded to the longest (``attention_mask`` marks the padding), truncated at ``max_length``, with the
special-tokens mask the extractor reads the roles from.
"""
from __future__ import annotations

import inspect
from typing import Callable, Dict, Optional, Tuple

import torch

from ..data.inputs import to_rgb
from .configs import IMAGENET

# ----------------------------------------------------------------------------------------------
# images


def standard_transform(proc: dict, image_size: int):
    """torchvision transform from a processor description, output ``image_size`` x ``image_size``.

    ``proc``: ``resize`` (``"square"`` | ``"shortest_edge"``), ``size``, ``crop_size`` (centre crop, or None),
    ``resample``, ``image_mean``, ``image_std``; all lengths are scaled by ``image_size / (crop_size or size)``.
    """
    from torchvision import transforms as T

    interp = {"bicubic": T.InterpolationMode.BICUBIC, "bilinear": T.InterpolationMode.BILINEAR}[proc["resample"]]
    crop = proc.get("crop_size")
    size = int(round(proc["size"] * image_size / (crop or proc["size"])))
    steps = [T.Resize((size, size) if proc["resize"] == "square" else size, interpolation=interp)]
    if crop:
        steps.append(T.CenterCrop(image_size))
    steps += [T.ToTensor(), T.Normalize(proc["image_mean"], proc["image_std"])]
    return T.Compose(steps)


def rgb_images(images) -> list:
    """The RGB versions of a non-empty list of PIL images (ValueError for anything else)."""
    from PIL import Image

    if not isinstance(images, (list, tuple)) or not images:
        raise ValueError("preprocess expects a non-empty list of PIL images")
    bad = [type(im).__name__ for im in images if not isinstance(im, Image.Image)]
    if bad:
        raise ValueError(f"expected PIL images, got {bad[0]}")
    return [to_rgb(im) for im in images]


def batch_transform(tf) -> Callable:
    def preprocess(images):
        return torch.stack([tf(im) for im in rgb_images(images)])

    return preprocess


_RESAMPLE = {2: "bilinear", 3: "bicubic"}


def processor_description(p) -> Optional[dict]:
    """Processor parameters of an HF image processor as a :func:`standard_transform` description."""
    try:
        size = dict(p.size) if p.size is not None else {}
        crop = dict(p.crop_size) if getattr(p, "crop_size", None) is not None and getattr(p, "do_center_crop", False) else None
        res = p.resample
        res = _RESAMPLE.get(int(getattr(res, "value", res)), "bicubic") if res is not None else "bilinear"
        desc = {"resample": res, "image_mean": list(p.image_mean), "image_std": list(p.image_std),
                "crop_size": int(crop["height"]) if crop else None}
        if size.get("shortest_edge"):
            desc.update(resize="shortest_edge", size=int(size["shortest_edge"]))
        else:
            desc.update(resize="square", size=int(size["height"]))
        return desc
    except Exception:
        return None


def hf_image_preprocess(source: Optional[str], fallback: Optional[dict], image_size: int) -> Tuple[Callable, str]:
    """The model's own processor (from ``source``, a cached id or a folder), else the embedded description."""
    proc = None
    if source is not None:
        try:
            from transformers import AutoImageProcessor

            proc = AutoImageProcessor.from_pretrained(source, local_files_only=True)
        except Exception:
            proc = None
    if proc is not None:
        desc = processor_description(proc)
        target = (desc or {}).get("crop_size") or (desc or {}).get("size")
        if desc is not None and target == image_size:
            def preprocess(images):
                return proc(images=rgb_images(images), return_tensors="pt")["pixel_values"]

            return preprocess, f"processor: {type(proc).__name__} (model's own)"
        if desc is not None:
            return batch_transform(standard_transform(desc, image_size)), \
                f"processor: {type(proc).__name__} parameters rescaled to {image_size} px"
    if fallback is None:
        fallback = {"resize": "shortest_edge", "size": 256, "crop_size": 224, "resample": "bicubic", **IMAGENET}
        note = "processor: not available; standard ImageNet transform (resize 256/224, centre crop, ImageNet mean/std)"
    else:
        note = "processor: embedded description of the published preprocessor_config"
    return batch_transform(standard_transform(fallback, image_size)), note


def timm_preprocess(model, image_size: int) -> Callable:
    import timm.data

    cfg = timm.data.resolve_model_data_config(model)
    cfg["input_size"] = (3, image_size, image_size)
    tf = timm.data.create_transform(**cfg, is_training=False)
    return batch_transform(tf)


# ----------------------------------------------------------------------------------------------
# texts


def text_preprocess(tokenizer, model, max_length: int, remap: Optional[Dict[int, int]] = None) -> Callable:
    params = set(inspect.signature(model.forward).parameters)

    def preprocess(texts):
        if isinstance(texts, str) or not isinstance(texts, (list, tuple)) or not texts:
            raise ValueError("preprocess expects a non-empty list of strings")
        if not all(isinstance(t, str) for t in texts):
            raise ValueError("preprocess expects strings")
        enc = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt", return_special_tokens_mask=True)
        out = {k: v for k, v in enc.items() if k in params or k == "special_tokens_mask"}
        if remap:
            ids = out["input_ids"].clone()
            for a, b in remap.items():
                ids[out["input_ids"] == a] = b
            out["input_ids"] = ids
        return out

    return preprocess
