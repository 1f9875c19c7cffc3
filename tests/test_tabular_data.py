"""Tabular loaders: scikit-learn's California Housing features, the UCI Adult files, the paper's splits.

The reference numbers are published by independent sources: the California means are those of
``sklearn.datasets.fetch_california_housing`` (recorded in the data folder's README), the Adult
counts are those of the UCI files, and the split sizes are Table 1 of Gorishniy et al. (2021).
Tests that need the real files skip when ``DOBRUSHIN_DATA`` is unset or missing (CI sets it).
"""
from __future__ import annotations

import gzip
import hashlib
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dobrushin.data import tabular_data as td


def _data_root():
    env = os.environ.get("DOBRUSHIN_DATA")
    if not env:
        return None, "DOBRUSHIN_DATA is not set (CI sets it to ../shared/data)"
    if not Path(env).is_dir():
        return None, f"DOBRUSHIN_DATA={env} is not a folder"
    return Path(env), ""


ROOT, WHY = _data_root()
needs_data = pytest.mark.skipif(ROOT is None, reason=f"real data unavailable: {WHY}")

# sklearn.datasets.fetch_california_housing().frame.mean(), as published in the data README
SKLEARN_MEANS = {"MedInc": 3.870671, "HouseAge": 28.639486, "AveRooms": 5.429000, "AveBedrms": 1.096675,
                 "Population": 1425.476744, "AveOccup": 3.070655, "Latitude": 35.631861,
                 "Longitude": -119.569704, "MedHouseVal": 2.068558}
SKLEARN_ROW0 = [8.3252, 41, 6.984127, 1.02381, 322, 2.555556, 37.88, -122.23, 4.526]


@pytest.fixture(scope="module")
def california_frame():
    if ROOT is None:
        pytest.skip(f"real data unavailable: {WHY}")
    return td.load_california()


@needs_data
def test_california_matches_sklearn(california_frame):
    df, prov = california_frame
    assert list(df.columns) == [*td.CALIFORNIA_FEATURES, td.CALIFORNIA_TARGET]
    assert df.shape == (20640, 9)
    assert not df.isna().any().any()
    for col, mean in SKLEARN_MEANS.items():
        assert abs(df[col].mean() - mean) < 5e-7, col  # published to 6 decimals
    np.testing.assert_allclose(df.iloc[0].to_numpy(), SKLEARN_ROW0, atol=5e-7)
    assert df["MedHouseVal"].min() == pytest.approx(0.14999) and df["MedHouseVal"].max() == pytest.approx(5.00001)
    assert prov["sha256"]["cal_housing.data.gz"] == \
        "9ec0c7920a28267aa6fd23b11fab174e134d9dff83e17c1d19674a7650834755"


@needs_data
def test_adult_row_counts_and_labels():
    raw, _ = td.load_adult()
    assert len(raw["train"]) == 32561 and len(raw["test"]) == 16281
    assert list(raw["train"].columns) == td.ADULT_COLUMNS
    assert raw["train"]["income"].value_counts().to_dict() == {"<=50K": 24720, ">50K": 7841}
    assert raw["test"]["income"].value_counts().to_dict() == {"<=50K": 12435, ">50K": 3846}
    # rows with a '?' anywhere (counted in the data README from the raw text)
    assert raw["train"].isna().any(axis=1).sum() == 2399 and raw["test"].isna().any(axis=1).sum() == 1221


@needs_data
def test_paper_split_sizes_and_preprocessing():
    cal = td.california()
    # Gorishniy et al. (2021), Table 1
    assert [cal.size(p) for p in td.PARTS] == [13209, 3303, 4128]
    ad = td.adult()
    assert [ad.size(p) for p in td.PARTS] == [26048, 6513, 16281]
    assert len(ad.num_names) == 6 and len(ad.cat_names) == 8 and ad.n_tokens == 15
    # the splits partition the source rows
    assert sorted(np.concatenate([cal.index[p] for p in td.PARTS]).tolist()) == list(range(20640))
    assert sorted(np.concatenate([ad.index["train"], ad.index["val"]]).tolist()) == list(range(32561))
    # standardised target: train mean 0, std 1; undoing it gives back MedHouseVal of the same rows
    df, _ = td.load_california()
    assert abs(cal.y["train"].mean()) < 1e-5 and abs(cal.y["train"].std() - 1) < 1e-5
    for p in td.PARTS:
        np.testing.assert_allclose(cal.y[p] * cal.y_std + cal.y_mean, df["MedHouseVal"].to_numpy()[cal.index[p]],
                                   rtol=1e-5)
    # quantile normalisation is monotone in each raw feature (fit on train, applied to test)
    raw_test = df[td.CALIFORNIA_FEATURES].to_numpy()[cal.index["test"]]
    for j in range(8):
        o = np.argsort(raw_test[:, j], kind="stable")
        assert np.all(np.diff(cal.X_num["test"][o, j]) >= -1e-6), td.CALIFORNIA_FEATURES[j]
    # categorical codes lie inside the cardinalities
    for p in td.PARTS:
        assert (ad.X_cat[p] >= 0).all() and (ad.X_cat[p] < np.array(ad.cat_cardinalities)).all()
    # same inputs, same arrays
    assert td.california().checksum == cal.checksum


def test_breast_cancer_always_available():
    d = td.breast_cancer()
    assert [d.size(p) for p in td.PARTS] == [364, 91, 114]
    assert d.n_tokens == 31 and d.task == "binclass" and d.n_classes == 2
    assert sum(int(d.y[p].sum()) for p in td.PARTS) == 357  # benign cases in sklearn's copy
    assert d.checksum == td.breast_cancer().checksum


def test_ordinal_encode_missing_and_unseen():
    C = {"train": pd.DataFrame({"c": ["a", "b", None, "a"]}), "val": pd.DataFrame({"c": ["b", "z"]}),
         "test": pd.DataFrame({"c": [None, "a"]})}
    codes, cards = td.ordinal_encode(C)
    assert cards == [4]  # a, b, missing + one code for unseen values
    assert codes["train"][:, 0].tolist()[0] == codes["train"][:, 0].tolist()[3]
    assert codes["val"][1, 0] == 3  # unseen 'z'
    assert codes["test"][0, 0] == codes["train"][2, 0]  # missing is its own category


def test_subsample_is_seeded_and_changes_checksum():
    d = td.breast_cancer()
    s1, s2 = d.subsample("train", 100, seed=0), d.subsample("train", 100, seed=0)
    assert s1.size("train") == 100 and np.array_equal(s1.index["train"], s2.index["train"])
    assert s1.checksum == s2.checksum != d.checksum
    assert d.subsample("train", None) is d
    with pytest.raises(ValueError, match="positive"):
        d.subsample("train", 0)


def test_unknown_dataset_is_a_value_error():
    with pytest.raises(ValueError, match="unknown tabular data set"):
        td.load("mnist")


def _fake_data_dir(tmp_path, content: bytes, listed_digest: str):
    (tmp_path / "california_housing").mkdir()
    gz = gzip.compress(content)
    (tmp_path / "california_housing" / "cal_housing.data.gz").write_bytes(gz)
    digest = listed_digest or hashlib.sha256(gz).hexdigest()
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  california_housing/cal_housing.data.gz\n")
    return tmp_path


def test_checksum_mismatch_is_data_unavailable(tmp_path, monkeypatch):
    root = _fake_data_dir(tmp_path, b"1,2,3,4,5,6,7,8,9\n", "0" * 64)
    monkeypatch.setenv("DOBRUSHIN_DATA", str(root))
    with pytest.raises(td.DataUnavailable, match="does not match SHA256SUMS") as e:
        td.load_california()
    assert e.value.status.startswith("data unavailable: ")


def test_verified_local_file_is_read_with_the_sklearn_transform(tmp_path, monkeypatch):
    # two raw rows: longitude, latitude, age, rooms, bedrooms, population, households, income, value
    rows = b"-122.23,37.88,41,880,129,322,126,8.3252,452600\r\n-122.22,37.86,21,7099,1106,2401,1138,8.3014,358500"
    monkeypatch.setenv("DOBRUSHIN_DATA", str(_fake_data_dir(tmp_path, rows, "")))
    df, _ = td.load_california()
    np.testing.assert_allclose(df.iloc[0].to_numpy(), [8.3252, 41, 880 / 126, 129 / 126, 322, 322 / 126, 37.88,
                                                       -122.23, 4.526])
    assert len(df) == 2


def test_missing_data_folder_is_data_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("DOBRUSHIN_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(td.DataUnavailable, match="not a folder"):
        td.load_california()


def test_missing_file_and_unset_sources_fail_fast(tmp_path, monkeypatch):
    (tmp_path / "SHA256SUMS").write_text("")
    monkeypatch.setenv("DOBRUSHIN_DATA", str(tmp_path))
    with pytest.raises(td.DataUnavailable, match="does not exist"):
        td.load_adult()
    # no local data: the canonical downloads are tried; make them fail without touching the network
    monkeypatch.delenv("DOBRUSHIN_DATA")

    def no_network(*a, **k):
        raise OSError("network disabled in this test")

    monkeypatch.setattr(td.urllib.request, "urlopen", no_network)
    with pytest.raises(td.DataUnavailable, match="downloading .*adult.data failed: OSError"):
        td.load_adult()
    import sklearn.datasets

    monkeypatch.setattr(sklearn.datasets, "fetch_california_housing", no_network)
    with pytest.raises(td.DataUnavailable, match="fetch_california_housing failed"):
        td.load_california()
