"""Where the project keeps things: results, caches and the data directory.

* ``DOBRUSHIN_RESULTS`` overrides the results folder (default ``<project root>/results``).
* ``DOBRUSHIN_CACHE`` overrides the cache folder for trained checkpoints etc.
  (default ``<project root>/.cache/dobrushin``, else ``~/.cache/dobrushin``).
* ``DOBRUSHIN_PUBLISHED`` names a folder of *published* results (``published/<profile>``, laid out as
  ``results/``) that the results store reads as a read-only cache layer (unset: none).
* ``DOBRUSHIN_DATA`` points at a local copy of the data files (see the book's reproducibility
  chapter); when it is unset, loaders download from the canonical source.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Optional


def project_root(start: Optional[Path] = None) -> Optional[Path]:
    """The nearest folder at or above ``start`` (default: cwd) holding ``_config.yml`` and ``lib/dobrushin``."""
    p = Path(start or Path.cwd()).resolve()
    for q in (p, *p.parents):
        if (q / "_config.yml").exists() and (q / "lib" / "dobrushin").is_dir():
            return q
    here = Path(__file__).resolve().parents[3]  # lib/dobrushin/store/paths.py in a checkout
    return here if (here / "_config.yml").exists() and (here / "lib" / "dobrushin").is_dir() else None


def results_dir() -> Path:
    env = os.environ.get("DOBRUSHIN_RESULTS")
    if env:
        return Path(env)
    root = project_root()
    return (root / "results") if root else Path.cwd() / "results"


def cache_dir() -> Path:
    env = os.environ.get("DOBRUSHIN_CACHE")
    if env:
        return Path(env)
    root = project_root()
    return (root / ".cache" / "dobrushin") if root else Path.home() / ".cache" / "dobrushin"


def data_dir() -> Optional[Path]:
    """The local data folder named by ``DOBRUSHIN_DATA``, or None when unset.

    A set but missing folder is an error rather than a silent download.
    """
    env = os.environ.get("DOBRUSHIN_DATA")
    if not env:
        return None
    p = Path(env).expanduser()
    if not p.is_dir():
        raise FileNotFoundError(f"DOBRUSHIN_DATA={env!r} is not a folder")
    return p


def published_dir() -> Optional[Path]:
    """The published results folder named by ``DOBRUSHIN_PUBLISHED`` (laid out like ``results/``), or None
    when unset or empty.  A set but missing folder is treated as none: there is nothing published yet."""
    env = os.environ.get("DOBRUSHIN_PUBLISHED")
    if not env:
        return None
    p = Path(env).expanduser()
    return p if p.is_dir() else None


def published_counterpart(path) -> Optional[Path]:
    """Where ``path`` (a file under :func:`results_dir`) lies in the published folder, or None (no published
    folder, or ``path`` is not under the results folder)."""
    pub = published_dir()
    if pub is None:
        return None
    try:
        rel = Path(path).resolve().relative_to(results_dir().resolve())
    except ValueError:
        return None
    return pub / rel
