"""The results store (``ResultStore``): table schemas, manifests, atomic writes, checksums and a
parameter-keyed cache.

Each notebook writes ``results/<notebook>/<slug>.parquet`` (``SCHEMA``), ``<slug>.heads.parquet`` and
``<slug>.rollout.parquet``, and a ``manifest.json``.  A table is reused only when the manifest records
the same parameter key and the file's SHA-256; else it is recomputed.  On a miss, an intact entry with
the same key in the published folder (read only) is copied in.  Every file is written to a temporary
name and renamed, so an interrupted run never leaves a half-written file.
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

from .code import code_digest

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
    # decision margins: how far each decision is from flipping (dobrushin.math.kernel.Margins)
    "kappa_gap": "float64",
    "self_margin_i": "float64",
    "self_margin_j": "float64",
    # trace of the restricted matrix = mean A_ii / (1/n): 1 for uniform attention, n for the identity;
    # float32, the precision of the captured attention
    "trace": "float32",
}
#: the decision margins among the SCHEMA columns (NaN in tables written before they existed)
MARGIN_COLUMNS = ("kappa_gap", "self_margin_i", "self_margin_j")
#: the SCHEMA columns added after the first tables were written: NaN (unknown) in a table without them
LATER_COLUMNS = MARGIN_COLUMNS + ("trace",)
def _bound(df: pd.DataFrame) -> pd.Series:
    return 0.5 * (1.0 + df["kappa"])


#: SCHEMA columns a stored table leaves out: they follow bit for bit from others (the float64 operations
#: of ``analyse``); ``conform`` puts them back
DERIVED = {"bound": _bound, "slack": lambda df: _bound(df) - df["kappa_factor"]}


def _derived(df: pd.DataFrame) -> dict:
    """The ``DERIVED`` columns computed from ``df`` (none when it lacks ``kappa`` or ``kappa_factor``)."""
    return {c: f(df) for c, f in DERIVED.items()} if {"kappa", "kappa_factor"} <= set(df.columns) else {}


VARIANTS = ("content", "with_special")
WEIGHTS = ("pretrained", "untrained")

#: columns of ``<slug>.heads.parquet``: the condition per input x layer x head (head attention, not averaged)
HEAD_COLUMNS = {
    "model": "string", "weights": "string", "input_id": "string", "layer": "int64", "head": "int64",
    "variant": "string", "n_tokens": "int64", "kappa": "float64", "slack": "float64", "holds": "bool",
}
#: columns of ``<slug>.rollout.parquet``: per input x variant, κ of the rollout of the restricted
#: per-layer matrices vs the product of the per-factor coefficients and the product of the layer bounds
ROLLOUT_COLUMNS = {
    "model": "string", "weights": "string", "input_id": "string", "variant": "string",
    "n_layers": "int64", "n_tokens": "int64", "kappa_rollout": "float64", "factor_product": "float64",
    "bound": "float64", "layers_holding": "int64",
}
#: the tables of one model: name -> (file suffix, columns); "table" is the main table
TABLES = {"table": (".parquet", SCHEMA), "heads": (".heads.parquet", HEAD_COLUMNS),
          "rollout": (".rollout.parquet", ROLLOUT_COLUMNS)}


def slugify(name: str) -> str:
    """``facebook/dinov2-small`` -> ``facebook--dinov2-small`` (safe as a file name)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", name.replace("/", "--")).strip("-")
    if not s:
        raise ValueError(f"cannot make a file name from {name!r}")
    return s


def atomic_write(path, write: Callable[[Path], None]) -> None:
    """Write ``path`` atomically: ``write(tmp)`` fills a temporary file beside it, which is flushed and
    renamed into place (an interrupted write leaves no partial file)."""
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
    atomic_write(path, lambda p: p.write_bytes(data))


def atomic_write_text(path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path, obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def atomic_write_parquet(path, df: pd.DataFrame) -> None:
    """Write ``df`` as zstd-compressed Parquet, atomically."""
    atomic_write(path, lambda p: df.to_parquet(p, index=False, compression="zstd"))


def write_stored(path, df: pd.DataFrame) -> None:
    """Write a store's table compactly and atomically (lossless): ``DERIVED`` columns dropped when they
    follow bit for bit, float columns byte-stream-split before zstd; ``conform`` reads the same values."""
    drop = [c for c, v in _derived(df).items() if c in df.columns and df[c].astype("float64").equals(v.astype("float64"))]
    df = df.drop(columns=drop)
    floats = [c for c in df.columns if pd.api.types.is_float_dtype(df[c])]
    # pandas hands the last two options to pyarrow's writer
    atomic_write(path, lambda p: df.to_parquet(p, index=False, compression="zstd", use_byte_stream_split=floats or False,
                                              use_dictionary=[c for c in df.columns if c not in floats]))


def atomic_write_csv(path, df: pd.DataFrame) -> None:
    atomic_write(path, lambda p: df.to_csv(p, index=False))


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path) -> str:
    """Hex SHA-256 of the file at ``path`` (read in 1 MiB chunks)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def params_key(params: Mapping[str, Any]) -> str:
    """Stable hash of a JSON-serialisable parameter mapping."""
    blob = json.dumps(params, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def frame(rows_or_frames, columns: Mapping[str, str]) -> pd.DataFrame:
    """A table with exactly ``columns`` (name -> dtype), from row tuples, a frame or a list of frames;
    an empty input gives an empty table of that schema.  ValueError when a column is missing."""
    if isinstance(rows_or_frames, pd.DataFrame):
        df = rows_or_frames
    elif len(rows_or_frames) and isinstance(rows_or_frames[0], pd.DataFrame):
        df = pd.concat(rows_or_frames, ignore_index=True)
    else:
        df = pd.DataFrame(list(rows_or_frames), columns=list(columns))
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"table lacks columns {missing}")
    return df[list(columns)].astype(dict(columns)).reset_index(drop=True)


def empty(what: str = "table") -> pd.DataFrame:
    """An empty table of the schema ``what`` (``"table"``, ``"heads"`` or ``"rollout"``)."""
    return conform_as(what, frame([], TABLES[what][1]))


def conform_as(what: str, df: pd.DataFrame) -> pd.DataFrame:
    """``conform`` for the main table, ``frame`` with the schema for the others."""
    if what not in TABLES:
        raise ValueError(f"unknown table {what!r}; expected one of {tuple(TABLES)}")
    return conform(df) if what == "table" else frame(df, TABLES[what][1])


def conform(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with exactly the ``SCHEMA`` columns, cast; ValueError otherwise.  Missing ``LATER_COLUMNS``
    become NaN (unknown); missing ``DERIVED`` columns are computed again."""
    absent = [c for c in LATER_COLUMNS if c not in df.columns]
    if absent:
        df = df.assign(**{c: float("nan") for c in absent})
    derive = {c: v for c, v in _derived(df).items() if c not in df.columns}
    if derive:
        df = df.assign(**derive)
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


def _entry_digest(params: Mapping[str, Any]) -> str:
    """The code digest a manifest entry records: the one in its key, else ``code_digest()`` now."""
    return str(params.get("code_digest") or code_digest())


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

    def _put(self, slug: str, entry: dict) -> dict:
        """Set the manifest entry of ``slug`` (one atomic write of the manifest); return it."""
        m = self.manifest()
        m["entries"][slugify(slug)] = entry
        atomic_write_json(self.manifest_path, m)
        return entry

    def path(self, slug: str, suffix: str = ".parquet") -> Path:
        return self.dir / f"{slugify(slug)}{suffix}"

    # tables -------------------------------------------------------------------------------
    def read(self, entry: Mapping[str, Any], what: str = "table") -> Optional[pd.DataFrame]:
        """The table ``what`` of a manifest entry when its file exists, matches the recorded SHA-256
        and has the schema; None otherwise (missing, partial, modified or corrupt)."""
        name, digest = (("file", "sha256") if what == "table" else (f"{what}_file", f"{what}_sha256"))
        f = entry.get(name)
        if what not in TABLES or not f:
            return None
        p = self.dir / f
        if not p.exists() or entry.get(digest) != sha256_file(p):
            return None
        try:
            return conform_as(what, pd.read_parquet(p))
        except Exception:  # noqa: BLE001 - corrupt parquet or schema drift
            return None

    def entry(self, slug: str, params: Optional[Mapping[str, Any]] = None) -> Optional[dict]:
        """The manifest entry of ``slug`` (None when absent or, with ``params``, computed with others)."""
        e = self.manifest()["entries"].get(slugify(slug))
        if e is None or (params is not None and e.get("params_key") != params_key(params)):
            return None
        return e

    def _published(self) -> Optional["ResultStore"]:
        """The same notebook's store in the published folder (read only), or None."""
        from .paths import published_dir

        pub = published_dir()
        if pub is None or not (pub / self.notebook / "manifest.json").exists():
            return None
        if (pub / self.notebook).resolve() == self.dir.resolve():
            return None
        other = ResultStore.__new__(ResultStore)  # no mkdir: the published folder is never written
        other.dir, other.notebook = pub / self.notebook, self.notebook
        other.manifest_path = other.dir / "manifest.json"
        return other

    def adopt_published(self, slug: str, params: Mapping[str, Any]) -> Optional[dict]:
        """Copy the published entry of ``slug`` computed with ``params`` (same parameter key, every file
        intact) into this store and return it; None when there is none."""
        pub = self._published()
        entry = pub.entry(slug, params) if pub else None
        if entry is None:
            return None
        names = [(n, d) for n, d in (("file", "sha256"), ("heads_file", "heads_sha256"),
                                     ("rollout_file", "rollout_sha256")) if entry.get(n)]
        for name, digest in names:
            src = pub.dir / entry[name]
            if not src.exists() or sha256_file(src) != entry.get(digest):
                return None
        for name, _ in names:
            atomic_write_bytes(self.dir / entry[name], (pub.dir / entry[name]).read_bytes())
        return self._put(slug, {**entry, "published_from": str(pub.dir)})

    def load_all(self, slug: str, params: Mapping[str, Any]) -> Optional[dict]:
        """``{"table", "heads", "rollout", "entry"}`` of ``slug`` when computed with ``params`` and all three
        files are intact (here or in the published folder); None otherwise."""
        entry = self.entry(slug, params)
        if entry is None or any(entry.get(n) and self.read(entry, w) is None
                                for n, w in (("file", "table"), ("heads_file", "heads"), ("rollout_file", "rollout"))):
            entry = self.adopt_published(slug, params) or entry
        if entry is None:
            return None
        out = {"entry": entry}
        for what in TABLES:
            out[what] = self.read(entry, what)
            if out[what] is None:
                return None
        return out

    def save(self, slug: str, params: Mapping[str, Any], df: pd.DataFrame,
             secondary: Optional[Mapping[str, pd.DataFrame]] = None, **info) -> dict:
        """Write the ``secondary`` tables (``{"heads": ..., "rollout": ...}``), then the table, atomically,
        and record them in the manifest."""
        for what, extra in (secondary or {}).items():
            sp = self.path(slug, f".{what}.parquet")
            write_stored(sp, extra)
            info[f"{what}_file"] = sp.name
            info[f"{what}_sha256"] = sha256_file(sp)
        df = conform(df)
        p = self.path(slug)
        write_stored(p, df)
        entry = {
            "file": p.name,
            "params_key": params_key(params),
            "params": dict(params),
            "sha256": sha256_file(p),
            "rows": len(df),
            "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "code_digest": _entry_digest(params),
            **info,
        }
        return self._put(slug, entry)

    def record(self, slug: str, params: Mapping[str, Any], **info) -> dict:
        """Record an entry with no table (e.g. ``status='weights unavailable: ...'``)."""
        return self._put(slug, {"file": None, "params_key": params_key(params), "params": dict(params),
                                "code_digest": _entry_digest(params), **info})

    def keyed(self, name: str, params: Mapping[str, Any], compute: Callable[[], Any]) -> Any:
        """A JSON-able analysis that is not a model table: ``compute()``, kept in ``<name>.analysis.json`` keyed
        by ``params`` and the code digest, and reused from here or the published folder when the key matches."""
        key = params_key({**params, "code_digest": _entry_digest(params)})
        p = self.dir / f"{slugify(name)}.analysis.json"
        pub = self._published()
        for f in (p, pub.dir / p.name if pub else None):
            try:  # a missing or unreadable record is a miss
                rec = json.loads(f.read_text()) if f is not None and f.is_file() else None
            except ValueError:
                rec = None
            if isinstance(rec, dict) and rec.get("key") == key and "value" in rec:
                if f != p:
                    atomic_write_json(p, {**rec, "published_from": str(pub.dir)})
                return rec["value"]
        value = compute()
        atomic_write_json(p, {"key": key, "params": dict(params), "code_digest": _entry_digest(params),
                              "saved": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "value": value})
        return json.loads(p.read_text())["value"]  # as a reuse would return it (tuples as lists, …)

    def tables(self, what: str = "table", entries: Optional[Mapping[str, dict]] = None) -> pd.DataFrame:
        """All intact tables ``what`` of the manifest (or ``entries``) concatenated; empty table if none."""
        entries = self.manifest()["entries"] if entries is None else entries
        frames = [df for df in (self.read(e, what) for e in entries.values()) if df is not None]
        return pd.concat(frames, ignore_index=True) if frames else empty(what)
