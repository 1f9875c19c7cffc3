"""The inputs of the measurements: photographs for vision models, English sentences for text models.

:func:`load_images` and :func:`load_texts` return an :class:`InputSet`: ``n`` items with stable ids, loaded
lazily, and a ``source`` line.  Selection: ids sorted, shuffled with ``default_rng(seed)``, the first ``n``
taken, so a smaller ``n`` is a prefix of a larger one; ``n=None`` takes everything.

Image ``source``: None (auto): the 100 canonical ImageNet photos (:mod:`.canonical`; with no data folder and
a failed download, the embedded set, the reason in ``notes``); a folder path (its image files, not
recursive); ``"embedded"``: the photographs bundled with scikit-image and scikit-learn;
``"hf:<dataset id>[:<split>]"``: the first ``n`` rows streamed from the hub (``DataUnavailable`` when offline).
Images are RGB ``PIL.Image``.

Text ``source``: None (auto): GLUE's SST-2 ``dev.tsv`` (:mod:`.canonical`; with no data folder and a failed
download, the hub's GLUE SST-2 validation split, else the embedded sentences, the reasons in ``notes``); a
``.tsv`` path (GLUE-style, ``sentence`` column, no quote processing); ``"glue"``: the hub only;
``"embedded"``: sentences of the Python documentation (:func:`embedded_sentences`).
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from ..math.validation import check_integer
from ..store.paths import data_dir
from .availability import DataUnavailable, hub_offline
from .canonical import IMAGE_SUFFIXES, IMAGENET_SAMPLES_SOURCE, SST2_SOURCE, photo_folder, sst2_file
from .texts import embedded_sentences, read_sst2_tsv

#: photographs bundled with scikit-image 0.2x (no download needed); names of ``skimage.data`` functions
SKIMAGE_PHOTOS = (
    "astronaut", "brick", "camera", "cell", "chelsea", "clock", "coffee", "coins", "grass", "gravel",
    "hubble_deep_field", "immunohistochemistry", "moon", "motorcycle_left", "motorcycle_right", "page",
    "retina", "rocket", "text",
)
#: photographs bundled with scikit-learn (``sklearn.datasets.load_sample_images``)
SKLEARN_PHOTOS = ("china.jpg", "flower.jpg")


@dataclass
class InputSet:
    """A deterministic selection of inputs.

    ``kind``: ``"image"`` | ``"text"``; ``available``: how many items the source had; ``_digest(i)``: the
    SHA-256 of the ``i``-th item's content (so the cache key changes when a file changes under the same
    name), or None where the ``source`` line pins the content (the embedded sets).
    """

    kind: str
    ids: List[str]
    source: str
    available: int
    seed: int
    _load: Callable[[int], Any] = field(repr=False)
    notes: str = ""
    _digest: Optional[Callable[[int], str]] = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int):
        """The ``i``-th item (an RGB ``PIL.Image`` or a ``str``)."""
        if not -len(self) <= i < len(self):
            raise IndexError(f"input {i} out of range for {len(self)} inputs")
        return self._load(i % len(self))

    def items(self, start: int = 0, stop: Optional[int] = None) -> list:
        """Items ``start:stop`` (loaded now)."""
        stop = len(self) if stop is None else min(stop, len(self))
        return [self._load(i) for i in range(start, stop)]

    def head(self, n: int) -> "InputSet":
        """The first ``n`` inputs (a prefix of this selection), same source."""
        n = check_integer("the number of inputs", n, 1, optional=True)
        k = len(self) if n is None else min(n, len(self))
        return InputSet(self.kind, self.ids[:k], self.source, self.available, self.seed, self._load,
                        self.notes, self._digest)

    def subset(self, indices: Sequence[int]) -> "InputSet":
        """The inputs at ``indices`` (distinct positions in this selection, in the order given), same source:
        ids, items and content digests are this selection's (an item loads from the same file or sentence).
        IndexError for a position outside ``0 … len − 1``, ValueError for a repeated or non-integer one."""
        idx = [check_integer("an input position", i) for i in indices]
        bad = [i for i in idx if not 0 <= i < len(self)]
        if bad:
            raise IndexError(f"input positions {bad} out of range for {len(self)} inputs")
        if len(set(idx)) != len(idx):
            raise ValueError(f"input positions repeat: {sorted({i for i in idx if idx.count(i) > 1})}")
        digest = None if self._digest is None else (lambda k: self._digest(idx[k]))
        return InputSet(self.kind, [self.ids[i] for i in idx], self.source, self.available, self.seed,
                        lambda k: self._load(idx[k]), self.notes, digest)

    def content_sha256(self, start: int = 0, stop: Optional[int] = None) -> Optional[str]:
        """One SHA-256 over the content digests of items ``start:stop``, in order; None when the items have
        none."""
        if self._digest is None:
            return None
        stop = len(self) if stop is None else min(stop, len(self))
        h = hashlib.sha256()
        for i in range(start, stop):
            h.update(self._digest(i).encode() + b"\n")
        return h.hexdigest()

    def key(self, start: Optional[int] = None, stop: Optional[int] = None) -> dict:
        """What identifies the selection, for cache keys: kind, source, seed and ids plus, where the items have
        content digests, ``content_sha256``.  With ``start``/``stop`` (a sweep's shard): the range's ids,
        ``shard`` = ``[start, stop]`` and the content digest of those items only."""
        k = {"kind": self.kind, "source": self.source, "seed": self.seed, "ids": list(self.ids)}
        if start is None and stop is None:
            c = self.content_sha256()
        else:
            start = 0 if start is None else start
            stop = len(self) if stop is None else stop
            k["ids"], k["shard"] = list(self.ids[start:stop]), [start, stop]
            c = self.content_sha256(start, stop)
        if c is not None:
            k["content_sha256"] = c
        return k

    def describe(self) -> str:
        """One sentence for the notebooks."""
        what = "images" if self.kind == "image" else "sentences"
        s = f"{len(self)} {what} from {self.source} ({self.available} available, selection seed {self.seed})"
        return s + (f". {self.notes}" if self.notes else "")


def select(ids: Sequence[str], n: Optional[int], seed: int) -> List[int]:
    """Indices into ``ids`` of the selection: sort by id, shuffle with ``seed``, take the first ``n``.

    Ids must be unique.  The result for ``n`` is a prefix of the result for any larger ``n``.
    """
    n, seed = check_integer("the number of inputs", n, 1, optional=True), check_integer("seed", seed, 0)
    ids = [str(i) for i in ids]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:3]
        raise ValueError(f"input ids are not unique (e.g. {dup})")
    order = sorted(range(len(ids)), key=lambda i: ids[i])
    perm = np.random.default_rng(seed).permutation(len(ids))
    chosen = [order[p] for p in perm]
    return chosen if n is None else chosen[:n]


# ------------------------------------------------------------------------------------------------
# images


def to_rgb(img):
    """An RGB ``PIL.Image`` of ``img`` (a PIL image of any mode or an array): greyscale is repeated,
    transparency is composed on white, other arrays are scaled to 0..255."""
    from PIL import Image

    if not isinstance(img, Image.Image):
        arr = np.asarray(img)
        if arr.dtype == bool:
            arr = arr.astype(np.uint8) * 255
        elif arr.dtype != np.uint8:
            lo, hi = float(arr.min()), float(arr.max())
            arr = ((arr - lo) / (hi - lo if hi > lo else 1.0) * 255).round().astype(np.uint8)
        img = Image.fromarray(arr)
    if img.mode == "RGB":
        return img
    if img.mode in ("RGBA", "LA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        bg = Image.new("RGB", rgba.size, (255, 255, 255))
        bg.paste(rgba, mask=rgba.getchannel("A"))
        return bg
    return img.convert("RGB")


def _open_image(path: Path):
    from PIL import Image

    try:
        with Image.open(path) as im:
            im.load()
            return to_rgb(im)
    except Exception as e:  # noqa: BLE001 - name the file
        raise ValueError(f"{path}: cannot read as an image: {e}") from None


def image_files(folder) -> List[Path]:
    """The image files directly inside ``folder`` (by suffix), sorted by name."""
    p = Path(folder).expanduser()
    if not p.is_dir():
        raise ValueError(f"image folder {str(folder)!r} does not exist or is not a folder")
    files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES
                   and not f.name.startswith("."))
    if not files:
        raise ValueError(f"image folder {str(p)!r} holds no image files ({', '.join(IMAGE_SUFFIXES)})")
    return files


def file_digests(paths: Sequence[Path]) -> Callable[[int], str]:
    """``d(i)``: the SHA-256 of the bytes of ``paths[i]``, recomputed when the file's size, modification
    time or inode changes (a photo replaced while the selection is held gets a new digest)."""
    memo: dict = {}

    def d(i: int) -> str:
        st = os.stat(paths[i])
        stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
        if i not in memo or memo[i][0] != stamp:
            memo[i] = (stamp, hashlib.sha256(Path(paths[i]).read_bytes()).hexdigest())
        return memo[i][1]

    return d


def text_digests(texts: Sequence[str]) -> Callable[[int], str]:
    """``d(i)``: the SHA-256 of the UTF-8 of ``texts[i]``."""
    return lambda i: hashlib.sha256(texts[i].encode("utf-8")).hexdigest()


def _folder_images(folder, n, seed, label: Optional[str] = None, notes: str = "") -> InputSet:
    files = image_files(folder)
    ids = [f.name for f in files]
    idx = select(ids, n, seed)
    chosen = [files[i] for i in idx]
    return InputSet("image", [f.name for f in chosen], label or f"image folder {Path(folder)}",
                    len(files), seed, lambda i: _open_image(chosen[i]), notes, _digest=file_digests(chosen))


def embedded_image_names() -> List[str]:
    """Ids of the embedded photographs: ``skimage:<name>`` and ``sklearn:<file>``."""
    return [f"skimage:{n}" for n in SKIMAGE_PHOTOS] + [f"sklearn:{n}" for n in SKLEARN_PHOTOS]


def _embedded_image(name: str):
    lib, what = name.split(":", 1)
    if lib == "skimage":
        import skimage.data

        if what.startswith("motorcycle_"):  # the stereo pair: (left, right, disparity)
            left, right, _ = skimage.data.stereo_motorcycle()
            return to_rgb(left if what == "motorcycle_left" else right)
        return to_rgb(getattr(skimage.data, what)())
    from sklearn.datasets import load_sample_images

    data = load_sample_images()
    names = [os.path.basename(f) for f in data.filenames]
    return to_rgb(data.images[names.index(what)])


def _embedded_images(n, seed, notes: str = "") -> InputSet:
    ids = embedded_image_names()
    idx = select(ids, n, seed)
    chosen = [ids[i] for i in idx]
    import skimage
    import sklearn

    src = (f"the photographs bundled with scikit-image {skimage.__version__} (skimage.data) and "
           f"scikit-learn {sklearn.__version__} (load_sample_images)")
    return InputSet("image", chosen, src, len(ids), seed, lambda i: _embedded_image(chosen[i]), notes)


def _hf_rows(dataset: str, split: str, n: Optional[int], config: Optional[str] = None):
    """The first ``n`` rows of a hub dataset split (streaming) or DataUnavailable."""
    what = f"{dataset}" + (f" ({config})" if config else "") + f", split {split}"
    if hub_offline(datasets=True):
        raise DataUnavailable(f"Hugging Face dataset {what}: HF_HUB_OFFLINE is set, so nothing is downloaded")
    try:
        import datasets  # noqa: F401
    except ImportError:
        raise DataUnavailable(f"Hugging Face dataset {what}: the 'datasets' package is not installed") from None
    try:
        ds = datasets.load_dataset(dataset, config, split=split, streaming=True)
        rows = []
        for row in ds:
            rows.append(row)
            if n is not None and len(rows) >= n:
                break
    except Exception as e:  # noqa: BLE001 - network/hub errors of every kind
        raise DataUnavailable(f"Hugging Face dataset {what}: {type(e).__name__}: {str(e)[:200]}") from None
    return rows, ds


def _image_digests(images: Sequence[Any]) -> Callable[[int], str]:
    """``d(i)``: the SHA-256 of the mode, size and pixels of the in-memory image ``images[i]`` (remembered:
    the images are held, never reloaded)."""
    memo: dict = {}

    def d(i: int) -> str:
        if i not in memo:
            im = images[i]
            memo[i] = hashlib.sha256(f"{im.mode} {im.size}\n".encode() + im.tobytes()).hexdigest()
        return memo[i]

    return d


def _hf_images(spec: str, n, seed) -> InputSet:
    parts = spec.split(":")
    dataset, split = parts[1], (parts[2] if len(parts) > 2 else "validation")
    if not dataset:
        raise ValueError(f"image source {spec!r}: expected 'hf:<dataset id>[:<split>]'")
    rows, ds = _hf_rows(dataset, split, n)
    col = None
    feats = getattr(ds, "features", None) or {}
    for name, f in feats.items():
        if type(f).__name__ == "Image":
            col = name
            break
    if col is None:
        col = next((c for c in ("image", "img", "pixel_values") if rows and c in rows[0]), None)
    if col is None:
        raise DataUnavailable(f"Hugging Face dataset {dataset}: no image column found")
    images = [to_rgb(r[col]) for r in rows]
    # streaming gives the split's own order; the selection is its first n rows (seed unused)
    ids = [f"{dataset}:{split}:{i}" for i in range(len(images))]
    return InputSet("image", ids, f"Hugging Face dataset {dataset} (split {split}, first rows)",
                    len(images), seed, lambda i: images[i],
                    notes="streamed from the hub: the first rows of the split, not a seeded shuffle",
                    _digest=_image_digests(images))


def load_images(source: Optional[str] = None, n: Optional[int] = None, *, seed: int = 0) -> InputSet:
    """Select ``n`` images (see the module docstring for ``source``)."""
    n, seed = check_integer("the number of inputs", n, 1, optional=True), check_integer("seed", seed, 0)
    if source is None or source == "auto":
        try:
            folder, where = photo_folder()
        except DataUnavailable as e:
            if data_dir() is not None:  # a data folder that lacks or alters a photo is an error, not a substitution
                raise
            return _embedded_images(n, seed, notes=f"The canonical ImageNet sample photos were not used: {e.reason}")
        return _folder_images(folder, n, seed, IMAGENET_SAMPLES_SOURCE, notes=f"Photos {where}")
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"image source must be a folder, 'embedded', 'hf:<dataset id>' or None, got {source!r}")
    source = os.fspath(source)
    if source == "embedded":
        return _embedded_images(n, seed)
    if source.startswith("hf:"):
        return _hf_images(source, n, seed)
    return _folder_images(source, n, seed)


# ------------------------------------------------------------------------------------------------
# text

def text_set(sentences: Sequence[str], ids: Sequence[str], n, seed, source, notes="") -> InputSet:
    """The seeded selection of ``n`` of ``sentences`` (named by ``ids``) as an input set."""
    idx = select(ids, n, seed)
    chosen_ids = [ids[i] for i in idx]
    chosen = [sentences[i] for i in idx]
    return InputSet("text", chosen_ids, source, len(ids), seed, lambda i: chosen[i], notes,
                    text_digests(chosen))


def row_ids(prefix: str, count: int) -> List[str]:
    """``<prefix>:<row>`` for each row, zero-padded so that the ids sort in row order."""
    width = len(str(max(count - 1, 0)))
    return [f"{prefix}:{i:0{width}d}" for i in range(count)]


def _sst2_file(path, n, seed, label=None, notes: str = "") -> InputSet:
    sents = read_sst2_tsv(path)
    return text_set(sents, row_ids("sst2-dev", len(sents)), n, seed,
                     label or f"SST-2 validation file {Path(path)}", notes)


def _glue_sst2(n, seed, notes: str = "") -> InputSet:
    rows, _ = _hf_rows("nyu-mll/glue", "validation", None, config="sst2")
    sents = [r["sentence"].strip() for r in rows]
    return text_set(sents, row_ids("sst2-dev", len(sents)), n, seed,
                     "GLUE SST-2 validation split (Hugging Face hub, nyu-mll/glue)", notes)


def _embedded_texts(n, seed, notes="") -> InputSet:
    import platform

    sents = embedded_sentences()
    return text_set(sents, row_ids("pydoc", len(sents)), n, seed,
                     f"sentences of the Python {platform.python_version()} documentation (pydoc_data.topics)",
                     notes)


def load_texts(source: Optional[str] = None, n: Optional[int] = None, *, seed: int = 0) -> InputSet:
    """Select ``n`` sentences (see the module docstring for ``source``)."""
    n, seed = check_integer("the number of inputs", n, 1, optional=True), check_integer("seed", seed, 0)
    if source is None or source == "auto":
        try:
            f, where = sst2_file()
        except DataUnavailable as e:
            if data_dir() is not None:  # a data folder that lacks or alters dev.tsv is an error, not a substitution
                raise
            try:
                return _glue_sst2(n, seed, notes=f"GLUE's dev.tsv was not used: {e.reason}")
            except DataUnavailable as e2:
                return _embedded_texts(n, seed, notes=f"SST-2 was not used: {e.reason}; {e2.reason}")
        return _sst2_file(f, n, seed, SST2_SOURCE, notes=f"The file was {where}")
    if not isinstance(source, (str, os.PathLike)):
        raise ValueError(f"text source must be a .tsv path, 'glue', 'embedded' or None, got {source!r}")
    source = os.fspath(source)
    if source == "embedded":
        return _embedded_texts(n, seed)
    if source == "glue":
        return _glue_sst2(n, seed)
    return _sst2_file(source, n, seed)


def load_inputs(kind: str, source: Optional[str] = None, n: Optional[int] = None, *, seed: int = 0) -> InputSet:
    """``load_images`` for ``kind="image"``/``"vision"``, ``load_texts`` for ``"text"``."""
    if kind in ("image", "vision"):
        return load_images(source, n, seed=seed)
    if kind == "text":
        return load_texts(source, n, seed=seed)
    raise ValueError(f"unknown input kind {kind!r}; expected 'image' or 'text'")
