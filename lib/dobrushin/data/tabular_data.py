"""Tabular benchmarks for the FT-Transformer study: California Housing, Adult and breast cancer.

Sources: with ``DOBRUSHIN_DATA`` set, ``california_housing/cal_housing.data.gz`` and
``adult/adult.{data,test}.gz`` are read in place after checking ``$DOBRUSHIN_DATA/SHA256SUMS``; otherwise
scikit-learn downloads California (its own checksum) and Adult comes from UCI, checked against
:data:`ADULT_SHA256`.  Breast cancer ships inside scikit-learn.  What cannot be obtained raises
``DataUnavailable``; nothing is substituted.

Protocol (Gorishniy et al. 2021): splits fixed by ``split_seed``, independent of the model seed (20 % test,
then 20 % of the rest validation; Adult's test split is its test file).  Numeric features quantile-normalised
(with the paper's small noise), categorical ones ordinal codes (missing is a category, an unseen value one
extra code), both fit on the training split; regression targets standardised, metrics in original units.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import socket
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
import pandas as pd

from ..store.paths import data_dir
from ..store.results import sha256_bytes, sha256_file
from .availability import DataUnavailable

PARTS = ("train", "val", "test")

CALIFORNIA_FEATURES = ["MedInc", "HouseAge", "AveRooms", "AveBedrms", "Population", "AveOccup", "Latitude",
                       "Longitude"]
CALIFORNIA_TARGET = "MedHouseVal"

ADULT_COLUMNS = ["age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
                 "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
                 "income"]
ADULT_NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
ADULT_CATEGORICAL = ["workclass", "education", "marital-status", "occupation", "relationship", "race", "sex",
                     "native-country"]
ADULT_N_TRAIN, ADULT_N_TEST = 32561, 16281

#: canonical download locations (used only when ``DOBRUSHIN_DATA`` is unset)
ADULT_URLS = {
    "train": "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/adult.data",
    "test": "https://archive.ics.uci.edu/ml/machine-learning-databases/adult/adult.test",
}
#: SHA-256 of the original, uncompressed UCI files (identical to the local copies' contents)
ADULT_SHA256 = {
    "train": "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
    "test": "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
}
DOWNLOAD_TIMEOUT_S = 20

DATASETS = ("california", "adult", "breast_cancer")
#: display names
TITLES = {"california": "California Housing", "adult": "Adult", "breast_cancer": "Breast cancer"}
#: headline metric per dataset
METRICS = {"california": "rmse", "adult": "accuracy", "breast_cancer": "accuracy"}


# -------------------------------------------------------------------------------------------------
# raw sources


def _sums(root: Path) -> Dict[str, str]:
    p = root / "SHA256SUMS"
    if not p.exists():
        raise DataUnavailable(f"{p} is missing, so the local data files cannot be verified")
    out = {}
    for line in p.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        digest, _, name = line.partition(" ")
        out[name.strip().lstrip("*")] = digest.lower()
    return out


def _root() -> Optional[Path]:
    """``DOBRUSHIN_DATA`` as a folder, None when unset; a set but missing folder is :class:`DataUnavailable`
    (never a silent download)."""
    try:
        return data_dir()
    except FileNotFoundError as e:
        raise DataUnavailable(str(e)) from e


def local_file(rel: str) -> Tuple[Path, str]:
    """``$DOBRUSHIN_DATA/<rel>`` after checking it against ``SHA256SUMS``; returns (path, sha256).

    Raises :class:`DataUnavailable` when the file is missing, unlisted or its checksum differs.
    """
    root = _root()
    if root is None:
        raise DataUnavailable("DOBRUSHIN_DATA is not set")
    path = root / rel
    if not path.is_file():
        raise DataUnavailable(f"{path} does not exist")
    expected = _sums(root).get(rel)
    if expected is None:
        raise DataUnavailable(f"{rel} is not listed in {root / 'SHA256SUMS'}")
    got = sha256_file(path)
    if got != expected:
        raise DataUnavailable(f"{path}: sha256 {got} does not match SHA256SUMS ({expected})")
    return path, got


@contextmanager
def _socket_timeout(seconds: float):
    old = socket.getdefaulttimeout()
    socket.setdefaulttimeout(seconds)
    try:
        yield
    finally:
        socket.setdefaulttimeout(old)


def california_from_raw(raw: np.ndarray) -> pd.DataFrame:
    """The scikit-learn frame (8 features + ``MedHouseVal``) from the raw StatLib array ``(20640, 9)``,
    as ``sklearn.datasets.fetch_california_housing`` derives it."""
    raw = np.asarray(raw, dtype=np.float64)
    if raw.ndim != 2 or raw.shape[1] != 9:
        raise ValueError(f"the raw California Housing array must have 9 columns, got shape {raw.shape}")
    a = raw[:, [8, 7, 2, 3, 4, 5, 6, 1, 0]].copy()
    target, data = a[:, 0], a[:, 1:]
    data[:, 2] /= data[:, 5]  # AveRooms = totalRooms / households
    data[:, 3] /= data[:, 5]  # AveBedrms = totalBedrooms / households
    data[:, 5] = data[:, 4] / data[:, 5]  # AveOccup = population / households
    target = target / 100000.0
    df = pd.DataFrame(data, columns=CALIFORNIA_FEATURES)
    df[CALIFORNIA_TARGET] = target
    return df


def load_california() -> Tuple[pd.DataFrame, dict]:
    """California Housing as scikit-learn's frame (20 640 rows) and a provenance dict."""
    if _root() is not None:
        path, digest = local_file("california_housing/cal_housing.data.gz")
        with gzip.open(path, "rt") as f:
            raw = np.loadtxt(f, delimiter=",")
        return california_from_raw(raw), {"source": str(path), "sha256": {path.name: digest}}
    try:
        from sklearn.datasets import fetch_california_housing

        with _socket_timeout(DOWNLOAD_TIMEOUT_S):
            bunch = fetch_california_housing(as_frame=True, n_retries=1, delay=0.1)
    except Exception as e:  # no network, checksum mismatch, ...
        raise DataUnavailable(f"DOBRUSHIN_DATA is unset and sklearn.datasets.fetch_california_housing "
                              f"failed: {type(e).__name__}: {e}") from e
    df = bunch.frame.astype("float64")
    return df, {"source": "sklearn.datasets.fetch_california_housing", "sha256": {}}


def _read_adult(data: bytes, part: str) -> pd.DataFrame:
    df = pd.read_csv(io.BytesIO(data), header=None, names=ADULT_COLUMNS, skiprows=1 if part == "test" else 0,
                     skipinitialspace=True, na_values="?", keep_default_na=False)
    df["income"] = df["income"].astype(str).str.rstrip(".")
    return df


def load_adult() -> Tuple[Dict[str, pd.DataFrame], dict]:
    """UCI Adult: ``{"train": 32 561 rows, "test": 16 281 rows}`` with :data:`ADULT_COLUMNS`, and provenance."""
    files = {"train": "adult/adult.data.gz", "test": "adult/adult.test.gz"}
    out, sha, source = {}, {}, {}
    if _root() is not None:
        for part, rel in files.items():
            path, digest = local_file(rel)
            out[part] = _read_adult(gzip.decompress(path.read_bytes()), part)
            sha[path.name], source[part] = digest, str(path)
    else:
        for part, url in ADULT_URLS.items():
            try:
                with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as r:
                    data = r.read()
            except Exception as e:
                raise DataUnavailable(f"DOBRUSHIN_DATA is unset and downloading {url} failed: "
                                      f"{type(e).__name__}: {e}") from e
            digest = sha256_bytes(data)
            if digest != ADULT_SHA256[part]:
                raise DataUnavailable(f"{url}: sha256 {digest} differs from the known {ADULT_SHA256[part]}")
            out[part] = _read_adult(data, part)
            sha[url.rsplit("/", 1)[-1]], source[part] = digest, url
    for part, n in (("train", ADULT_N_TRAIN), ("test", ADULT_N_TEST)):
        if len(out[part]) != n:
            raise DataUnavailable(f"Adult {part}: expected {n} rows, read {len(out[part])}")
    return out, {"source": source, "sha256": sha}


def load_breast_cancer_frame() -> Tuple[pd.DataFrame, dict]:
    """scikit-learn's bundled breast cancer data (569 rows, 30 numeric features, ``target``)."""
    from sklearn.datasets import load_breast_cancer

    b = load_breast_cancer(as_frame=True)
    return b.frame, {"source": "sklearn.datasets.load_breast_cancer (bundled)", "sha256": {}}


# -------------------------------------------------------------------------------------------------
# protocol: splits and preprocessing


@dataclass
class TabularData:
    """A preprocessed benchmark, arrays per split (``train``/``val``/``test``).

    ``X_num[part]``: float32 ``(n, n_num)`` or None; ``X_cat[part]``: int64 ``(n, n_cat)`` ordinal codes or
    None; ``y[part]``: float32 standardised targets or int64 labels; ``index[part]``: row numbers in the
    source table(s); ``checksum``: SHA-256 of every array (it keys the checkpoint cache).
    """

    name: str
    task: str
    num_names: List[str]
    cat_names: List[str]
    cat_cardinalities: List[int]
    X_num: Optional[Dict[str, np.ndarray]]
    X_cat: Optional[Dict[str, np.ndarray]]
    y: Dict[str, np.ndarray]
    index: Dict[str, np.ndarray]
    y_mean: float = 0.0
    y_std: float = 1.0
    n_classes: Optional[int] = None
    provenance: dict = field(default_factory=dict)
    checksum: str = ""

    @property
    def n_tokens(self) -> int:
        """Tokens per row in FT-Transformer: [CLS] + one per feature."""
        return 1 + len(self.num_names) + len(self.cat_names)

    def size(self, part: str) -> int:
        return len(self.y[part])

    def subsample(self, part: str, n: Optional[int], seed: int = 0) -> "TabularData":
        """A copy with at most ``n`` rows of ``part`` (seeded choice, original order kept)."""
        if n is None or n >= self.size(part):
            return self
        if n <= 0:
            raise ValueError(f"subsample size must be positive, got {n}")
        keep = np.sort(np.random.default_rng(seed).choice(self.size(part), size=int(n), replace=False))
        pick = lambda d: None if d is None else {**d, part: d[part][keep]}  # noqa: E731
        out = TabularData(**{**self.__dict__, "X_num": pick(self.X_num), "X_cat": pick(self.X_cat),
                             "y": pick(self.y), "index": pick(self.index)})
        out.checksum = _checksum(out)
        return out


def _split_indices(n: int, seed: int, test: bool = True) -> Dict[str, np.ndarray]:
    from sklearn.model_selection import train_test_split

    idx = np.arange(n)
    out = {}
    if test:
        idx, out["test"] = train_test_split(idx, test_size=0.2, random_state=seed)
    out["train"], out["val"] = train_test_split(idx, test_size=0.2, random_state=seed)
    return out


def quantile_normalise(X: Dict[str, np.ndarray], seed: int, noise: float = 1e-3) -> Dict[str, np.ndarray]:
    """The paper's quantile normalisation, fit on ``X['train']`` (plus the paper's small noise)."""
    from sklearn.preprocessing import QuantileTransformer

    X_train = X["train"].astype(np.float64)
    qt = QuantileTransformer(output_distribution="normal", n_quantiles=max(min(len(X_train) // 30, 1000), 10),
                             subsample=10**9, random_state=seed)
    if noise:
        stds = np.std(X_train, axis=0, keepdims=True)
        X_train = X_train + noise / np.maximum(stds, noise) * np.random.default_rng(seed).standard_normal(
            X_train.shape)
    qt.fit(X_train)
    return {k: qt.transform(v.astype(np.float64)).astype(np.float32) for k, v in X.items()}


def ordinal_encode(C: Dict[str, pd.DataFrame]) -> Tuple[Dict[str, np.ndarray], List[int]]:
    """Ordinal codes fit on ``C['train']``; missing values are a category; unseen values get one extra code."""
    codes, cards = {k: np.empty((len(v), v.shape[1]), dtype=np.int64) for k, v in C.items()}, []
    for j, col in enumerate(C["train"].columns):
        cats = sorted(C["train"][col].fillna("__missing__").astype(str).unique())
        lut = {c: i for i, c in enumerate(cats)}
        for part, df in C.items():
            vals = df[col].fillna("__missing__").astype(str)
            codes[part][:, j] = vals.map(lut).fillna(len(cats)).to_numpy(dtype=np.int64)
        cards.append(len(cats) + 1)
    return codes, cards


def _checksum(d: TabularData) -> str:
    h = hashlib.sha256()
    h.update(f"{d.name}|{d.task}|{d.num_names}|{d.cat_names}|{d.cat_cardinalities}|{d.y_mean!r}|{d.y_std!r}".encode())
    for group in (d.X_num, d.X_cat, d.y, d.index):
        for part in PARTS:
            if group is not None:
                a = np.ascontiguousarray(group[part])
                h.update(f"{part}{a.dtype}{a.shape}".encode())
                h.update(a.tobytes())
    return h.hexdigest()


def _numeric_dataset(name: str, df: pd.DataFrame, features: List[str], target: str, task: str, seed: int,
                     provenance: dict) -> TabularData:
    idx = _split_indices(len(df), seed)
    X = {p: df[features].to_numpy(np.float64)[idx[p]] for p in PARTS}
    y_raw = {p: df[target].to_numpy()[idx[p]] for p in PARTS}
    if task == "regression":
        mean, std = float(y_raw["train"].mean()), float(y_raw["train"].std())
        y = {p: ((v - mean) / std).astype(np.float32) for p, v in y_raw.items()}
        n_classes = None
    else:
        mean, std = 0.0, 1.0
        y = {p: v.astype(np.int64) for p, v in y_raw.items()}
        n_classes = int(max(v.max() for v in y.values()) + 1)
    d = TabularData(name=name, task=task, num_names=list(features), cat_names=[], cat_cardinalities=[],
                    X_num=quantile_normalise(X, seed), X_cat=None, y=y, index=idx, y_mean=mean, y_std=std,
                    n_classes=n_classes, provenance=provenance)
    d.checksum = _checksum(d)
    return d


def california(split_seed: int = 0) -> TabularData:
    """California Housing under the paper protocol (regression; 9 tokens)."""
    df, prov = load_california()
    return _numeric_dataset("california", df, CALIFORNIA_FEATURES, CALIFORNIA_TARGET, "regression", split_seed,
                            prov)


def breast_cancer(split_seed: int = 0) -> TabularData:
    """scikit-learn's breast cancer data under the same protocol (binary; 31 tokens)."""
    df, prov = load_breast_cancer_frame()
    feats = [c for c in df.columns if c != "target"]
    return _numeric_dataset("breast_cancer", df, feats, "target", "binclass", split_seed, prov)


def adult(split_seed: int = 0) -> TabularData:
    """UCI Adult under the paper protocol (binary ``>50K``; 15 tokens)."""
    raw, prov = load_adult()
    sp = _split_indices(len(raw["train"]), split_seed, test=False)
    frames = {"train": raw["train"].iloc[sp["train"]], "val": raw["train"].iloc[sp["val"]], "test": raw["test"]}
    index = {"train": sp["train"], "val": sp["val"], "test": np.arange(len(raw["test"]))}
    X = {p: f[ADULT_NUMERIC].to_numpy(np.float64) for p, f in frames.items()}
    codes, cards = ordinal_encode({p: f[ADULT_CATEGORICAL] for p, f in frames.items()})
    labels = {p: f["income"].to_numpy() for p, f in frames.items()}
    bad = {p: sorted(set(v) - {"<=50K", ">50K"}) for p, v in labels.items()}
    if any(bad.values()):
        raise ValueError(f"unexpected Adult income labels: {bad}")
    y = {p: (v == ">50K").astype(np.int64) for p, v in labels.items()}
    d = TabularData(name="adult", task="binclass", num_names=list(ADULT_NUMERIC), cat_names=list(ADULT_CATEGORICAL),
                    cat_cardinalities=cards, X_num=quantile_normalise(X, split_seed), X_cat=codes, y=y, index=index,
                    n_classes=2, provenance=prov)
    d.checksum = _checksum(d)
    return d


def from_splits(name: str, task: str, y: Dict[str, np.ndarray], X_num: Optional[Dict[str, np.ndarray]] = None,
                X_cat: Optional[Dict[str, np.ndarray]] = None, cat_cardinalities: Optional[List[int]] = None,
                y_mean: float = 0.0, y_std: float = 1.0) -> TabularData:
    """A :class:`TabularData` from already preprocessed split arrays (e.g. synthetic data in tests)."""
    if task not in ("regression", "binclass", "multiclass"):
        raise ValueError(f"unknown task {task!r}; expected 'regression', 'binclass' or 'multiclass'")
    for nm, g in (("y", y), ("X_num", X_num), ("X_cat", X_cat)):
        if g is not None and set(g) != set(PARTS):
            raise ValueError(f"{nm} must have exactly the parts {PARTS}, got {sorted(g)}")
    if X_num is None and X_cat is None:
        raise ValueError("need numeric or categorical features")
    n_num = 0 if X_num is None else X_num["train"].shape[1]
    n_cat = 0 if X_cat is None else X_cat["train"].shape[1]
    if X_cat is not None and (cat_cardinalities is None or len(cat_cardinalities) != n_cat):
        raise ValueError(f"need one cardinality per categorical feature ({n_cat}), got {cat_cardinalities}")
    for p in PARTS:
        n = len(y[p])
        for nm, g in (("X_num", X_num), ("X_cat", X_cat)):
            if g is not None and len(g[p]) != n:
                raise ValueError(f"{nm}[{p!r}] has {len(g[p])} rows but y[{p!r}] has {n}")
    y = {p: np.asarray(v, dtype=np.float32 if task == "regression" else np.int64) for p, v in y.items()}
    d = TabularData(
        name=name, task=task, num_names=[f"num{i}" for i in range(n_num)], cat_names=[f"cat{i}" for i in range(n_cat)],
        cat_cardinalities=list(cat_cardinalities or []),
        X_num=None if X_num is None else {p: np.asarray(v, dtype=np.float32) for p, v in X_num.items()},
        X_cat=None if X_cat is None else {p: np.asarray(v, dtype=np.int64) for p, v in X_cat.items()},
        y=y, index={p: np.arange(len(y[p])) for p in PARTS}, y_mean=y_mean, y_std=y_std,
        n_classes=None if task == "regression" else int(max(v.max() for v in y.values()) + 1))
    d.checksum = _checksum(d)
    return d


LOADERS = {"california": california, "adult": adult, "breast_cancer": breast_cancer}


def load(name: str, split_seed: int = 0) -> TabularData:
    """One of :data:`DATASETS` by name; :class:`DataUnavailable` when its source cannot be obtained."""
    if name not in LOADERS:
        raise ValueError(f"unknown tabular data set {name!r}; expected one of {DATASETS}")
    return LOADERS[name](split_seed)
