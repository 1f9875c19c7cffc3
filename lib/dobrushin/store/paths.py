"""Where the project keeps things; each folder can be overridden by an environment variable:
``DOBRUSHIN_RESULTS`` (results), ``DOBRUSHIN_CACHE`` (trained checkpoints etc.), ``DOBRUSHIN_PUBLISHED``
(published results, laid out like ``results/``, read as a read-only cache layer; unset: none) and
``DOBRUSHIN_DATA`` (a local copy of the data files; unset: loaders download them)."""
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
    """The folder named by ``DOBRUSHIN_DATA``, or None when unset; FileNotFoundError when it is missing."""
    env = os.environ.get("DOBRUSHIN_DATA")
    if not env:
        return None
    p = Path(env).expanduser()
    if not p.is_dir():
        raise FileNotFoundError(f"DOBRUSHIN_DATA={env!r} is not a folder")
    return p


def published_dir() -> Optional[Path]:
    """The folder named by ``DOBRUSHIN_PUBLISHED``, or None when unset or missing (nothing published yet)."""
    env = os.environ.get("DOBRUSHIN_PUBLISHED")
    if not env:
        return None
    p = Path(env).expanduser()
    return p if p.is_dir() else None


def published_counterpart(path) -> Optional[Path]:
    """Where ``path`` (under ``results_dir()``) lies in the published folder, or None."""
    pub = published_dir()
    if pub is None:
        return None
    try:
        rel = Path(path).resolve().relative_to(results_dir().resolve())
    except ValueError:
        return None
    return pub / rel
