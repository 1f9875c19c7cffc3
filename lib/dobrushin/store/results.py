"""The results store: tidy tables, manifests, atomic writes and a parameter-keyed cache.

Each notebook writes ``results/<notebook>/<model-slug>.parquet`` (one row per input x layer x
variant, columns :data:`SCHEMA`) and ``results/<notebook>/manifest.json``.  A table is reused only when
the manifest records the same parameter key *and* the file's SHA-256; a missing, partial or corrupt
file is recomputed.  Every file is written to a temporary name and renamed into place, so an
interrupted run never leaves a half-written file under the final name.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

import pandas as pd

#: columns of every per-model result table, with their dtypes
SCHEMA = {
    "model": "string",
    "input_id": "string",
    "layer": "int64",
    "n_tokens": "int64",
    "kappa": "float64",
    "kappa_factor": "float64",
    "bound": "float64",
    "slack": "float64",
    "holds": "bool",
    "variant": "string",
    "weights": "string",
}
VARIANTS = ("content", "with_special")
WEIGHTS = ("pretrained", "untrained")


def slugify(name: str) -> str:
    """``facebook/dinov2-small`` -> ``facebook--dinov2-small`` (safe as a file name)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", name.replace("/", "--")).strip("-")
    if not s:
        raise ValueError(f"cannot make a file name from {name!r}")
    return s


def _atomic(path: Path, write: Callable[[Path], None]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; results are meant to be shared
        with open(tmp, "rb") as f:  # flush to disk before the rename makes the file visible
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_bytes(path, data: bytes) -> None:
    _atomic(Path(path), lambda p: p.write_bytes(data))


def atomic_write_text(path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_parquet(path, df: pd.DataFrame) -> None:
    _atomic(Path(path), lambda p: df.to_parquet(p, index=False))


def atomic_write_csv(path, df: pd.DataFrame) -> None:
    _atomic(Path(path), lambda p: df.to_csv(p, index=False))


def sha256_file(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def params_key(params: Mapping[str, Any]) -> str:
    """Stable hash of a JSON-serialisable parameter mapping."""
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def conform(df: pd.DataFrame) -> pd.DataFrame:
    """Check ``df`` has exactly the :data:`SCHEMA` columns and cast them; ValueError otherwise."""
    missing = [c for c in SCHEMA if c not in df.columns]
    extra = [c for c in df.columns if c not in SCHEMA]
    if missing or extra:
        raise ValueError(f"result table does not match the schema: missing {missing}, unexpected {extra}")
    out = df[list(SCHEMA)].astype(SCHEMA)
    bad = set(out["variant"].unique()) - set(VARIANTS)
    if bad:
        raise ValueError(f"unknown variant(s) {sorted(bad)}; expected one of {VARIANTS}")
    bad = set(out["weights"].unique()) - set(WEIGHTS)
    if bad:
        raise ValueError(f"unknown weights value(s) {sorted(bad)}; expected one of {WEIGHTS}")
    return out.reset_index(drop=True)


class ResultStore:
    """Per-notebook results folder with a manifest and a parameter-keyed cache."""

    def __init__(self, root, notebook: str):
        self.dir = Path(root) / notebook
        self.dir.mkdir(parents=True, exist_ok=True)
        self.manifest_path = self.dir / "manifest.json"
        self.notebook = notebook

    # manifest -----------------------------------------------------------------------------
    def manifest(self) -> dict:
        try:
            m = json.loads(self.manifest_path.read_text())
            if not isinstance(m, dict):
                raise ValueError
        except (FileNotFoundError, ValueError):
            m = {}
        m.setdefault("notebook", self.notebook)
        m.setdefault("entries", {})
        return m

    def update_manifest(self, **fields) -> dict:
        m = self.manifest()
        m.update(fields)
        atomic_write_json(self.manifest_path, m)
        return m

    def path(self, slug: str, suffix: str = ".parquet") -> Path:
        return self.dir / f"{slugify(slug)}{suffix}"

    # tables -------------------------------------------------------------------------------
    def load(self, slug: str, params: Mapping[str, Any]):
        """Cached table for ``slug`` if it was computed with ``params`` and is intact, else None.

        Returns ``(df, entry)`` where ``entry`` is the manifest record (status, wall time, ...).
        """
        entry = self.manifest()["entries"].get(slugify(slug))
        p = self.path(slug)
        if not entry or entry.get("params_key") != params_key(params) or not p.exists():
            return None
        if entry.get("sha256") != sha256_file(p):
            return None  # partial or modified file
        try:
            return conform(pd.read_parquet(p)), entry
        except Exception:  # corrupt parquet or schema drift
            return None

    def save(self, slug: str, params: Mapping[str, Any], df: pd.DataFrame,
             secondary: Optional[Mapping[str, pd.DataFrame]] = None, **info) -> dict:
        """Write the table atomically, then record it (params key, sha256, ``info``) in the manifest.

        ``secondary``: extra tables of the same model (e.g. ``{"heads": ..., "rollout": ...}``), each
        written first to ``<slug>.<name>.parquet`` and recorded as ``<name>_file`` / ``<name>_sha256``.
        """
        for what, extra in (secondary or {}).items():
            sp = self.path(slug, f".{what}.parquet")
            atomic_write_parquet(sp, extra)
            info[f"{what}_file"] = sp.name
            info[f"{what}_sha256"] = sha256_file(sp)
        df = conform(df)
        p = self.path(slug)
        atomic_write_parquet(p, df)
        entry = {
            "file": p.name,
            "params_key": params_key(params),
            "params": dict(params),
            "sha256": sha256_file(p),
            "rows": len(df),
            "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **info,
        }
        m = self.manifest()
        m["entries"][slugify(slug)] = entry
        atomic_write_json(self.manifest_path, m)
        return entry

    def record(self, slug: str, params: Mapping[str, Any], **info) -> dict:
        """Record an entry with no table (e.g. ``status='weights unavailable: ...'``)."""
        m = self.manifest()
        entry = {"file": None, "params_key": params_key(params), "params": dict(params), **info}
        m["entries"][slugify(slug)] = entry
        atomic_write_json(self.manifest_path, m)
        return entry

    def tables(self) -> pd.DataFrame:
        """All intact tables listed in the manifest, concatenated (empty frame if none)."""
        frames = []
        for slug, e in self.manifest()["entries"].items():
            f = e.get("file")
            if f and (self.dir / f).exists() and e.get("sha256") == sha256_file(self.dir / f):
                frames.append(conform(pd.read_parquet(self.dir / f)))
        if not frames:
            return conform(pd.DataFrame({c: pd.Series(dtype=t) for c, t in SCHEMA.items()}))
        return pd.concat(frames, ignore_index=True)
