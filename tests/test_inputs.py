"""Inputs: image folders (incl. greyscale), the embedded photos, SST-2 files, the embedded sentences,
deterministic prefix-consistent selection, offline failures and bad-input errors."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from dobrushin.data.inputs import (
    DataUnavailable,
    embedded_image_names,
    embedded_sentences,
    load_images,
    load_inputs,
    load_texts,
    read_sst2_tsv,
    select,
)

SHARED = Path(os.environ.get("DOBRUSHIN_TEST_DATA", "/work/shared/data"))


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch, tmp_path):
    # each test decides about DOBRUSHIN_DATA itself; never touch the hub, GitHub or GLUE (a closed local port
    # refuses the canonical downloads at once; tests/test_canonical_inputs.py serves them locally)
    import dobrushin.data.canonical as C

    monkeypatch.delenv("DOBRUSHIN_DATA", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("DOBRUSHIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_URL", "http://127.0.0.1:9/{file}")
    monkeypatch.setattr(C, "SST2_URL", "http://127.0.0.1:9/SST-2.zip")


def _folder(tmp_path: Path, k: int = 7, grey: bool = True) -> Path:
    d = tmp_path / "imgs"
    d.mkdir()
    rng = np.random.default_rng(1)
    for i in range(k):
        arr = rng.integers(0, 256, size=(20 + i, 30, 3), dtype=np.uint8)
        Image.fromarray(arr).save(d / f"img_{i:02d}.png")
    if grey:
        g = rng.integers(0, 256, size=(25, 17), dtype=np.uint8)
        Image.fromarray(g, mode="L").save(d / "grey.JPEG", format="JPEG")
    (d / "notes.txt").write_text("not an image")
    (d / "sub").mkdir()
    Image.fromarray(np.zeros((4, 4, 3), np.uint8)).save(d / "sub" / "nested.png")
    return d


def test_folder_ids_are_file_names_and_greyscale_becomes_rgb(tmp_path):
    d = _folder(tmp_path)
    s = load_images(str(d))
    assert s.kind == "image" and s.available == 8 and len(s) == 8
    assert sorted(s.ids) == sorted([f"img_{i:02d}.png" for i in range(7)] + ["grey.JPEG"])
    img = s[s.ids.index("grey.JPEG")]
    assert img.mode == "RGB" and img.size == (17, 25)
    arr = np.asarray(img)
    # a greyscale photo converted to RGB has three equal channels, equal to the decoded grey values
    ref = np.asarray(Image.open(d / "grey.JPEG"))
    assert np.array_equal(arr[..., 0], ref) and np.array_equal(arr[..., 1], ref) and np.array_equal(arr[..., 2], ref)
    # items are the files' pixels
    i = s.ids.index("img_03.png")
    assert np.array_equal(np.asarray(s[i]), np.asarray(Image.open(d / "img_03.png")))


def test_selection_is_deterministic_prefix_consistent_and_seeded(tmp_path):
    d = _folder(tmp_path)
    full = load_images(d, seed=3)
    for n in (1, 3, 8, 50):
        s = load_images(d, n, seed=3)
        assert s.ids == full.ids[: min(n, 8)]
        assert load_images(d, n, seed=3).ids == s.ids
    assert len(load_images(d, 50)) == 8  # more than available: everything, available says how many
    others = {tuple(load_images(d, seed=k).ids) for k in range(6)}
    assert len(others) > 1  # the seed changes the order
    assert set(load_images(d, seed=5).ids) == set(full.ids)
    assert full.head(2).ids == full.ids[:2]


def test_select_is_a_seeded_permutation_of_sorted_ids():
    ids = ["c", "a", "d", "b"]
    perm = np.random.default_rng(7).permutation(4)
    order = sorted(range(4), key=lambda i: ids[i])
    assert select(ids, None, 7) == [order[p] for p in perm]
    assert select(ids, 2, 7) == [order[p] for p in perm][:2]
    with pytest.raises(ValueError, match="not unique"):
        select(["a", "a"], None, 0)


@pytest.mark.parametrize("bad", [0, -3, 2.5, "10", True])
def test_bad_number_of_inputs(tmp_path, bad):
    with pytest.raises(ValueError, match="number of inputs"):
        load_images(_folder(tmp_path), bad)


def test_bad_sources(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        load_images(tmp_path / "missing")
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "a.txt").write_text("x")
    with pytest.raises(ValueError, match="no image files"):
        load_images(empty)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "x.jpg").write_bytes(b"not a jpeg")
    s = load_images(broken)
    with pytest.raises(ValueError, match="x.jpg"):
        s[0]
    with pytest.raises(ValueError, match="seed"):
        load_images(_folder(tmp_path), seed=-1)
    with pytest.raises(ValueError, match="input kind"):
        load_inputs("audio")


def test_dobrushin_data_imagenet_folder_is_used(tmp_path, monkeypatch):
    import dobrushin.data.canonical as C

    root = tmp_path / "data"
    (root / "imagenet_samples").mkdir(parents=True)
    for name in ("n01_a.JPEG", "n02_b.JPEG"):
        Image.fromarray(np.full((8, 8, 3), 7, np.uint8)).save(root / "imagenet_samples" / name, format="JPEG")
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_SHA256", {  # these two stand in for the canonical photos
        name: hashlib.sha256((root / "imagenet_samples" / name).read_bytes()).hexdigest()
        for name in ("n01_a.JPEG", "n02_b.JPEG")})
    monkeypatch.setenv("DOBRUSHIN_DATA", str(root))
    s = load_images()
    assert sorted(s.ids) == ["n01_a.JPEG", "n02_b.JPEG"] and "DOBRUSHIN_DATA" in s.notes
    assert s.source == C.IMAGENET_SAMPLES_SOURCE
    # a data folder without images is an explicit failure, not a silent substitution
    (root / "imagenet_samples" / "n01_a.JPEG").unlink()
    (root / "imagenet_samples" / "n02_b.JPEG").unlink()
    (root / "imagenet_samples").rmdir()
    with pytest.raises(DataUnavailable, match="imagenet_samples"):
        load_images()


def test_embedded_images_without_data(monkeypatch):
    s = load_images(n=3)  # no data folder and the download refused: the embedded photos, saying why
    assert "scikit-image" in s.source and s.available == len(embedded_image_names()) >= 20
    assert s.notes.startswith("The canonical ImageNet sample photos were not used: downloading http://127.0.0.1:9/")
    for img in s.items():
        assert img.mode == "RGB" and min(img.size) >= 100
    e = load_images("embedded")
    assert len(e) == e.available and len(set(e.ids)) == len(e.ids)
    a = np.asarray(e[e.ids.index("skimage:astronaut")])
    import skimage.data

    assert np.array_equal(a, skimage.data.astronaut())
    c = np.asarray(e[e.ids.index("sklearn:china.jpg")])
    from sklearn.datasets import load_sample_image

    assert np.array_equal(c, load_sample_image("china.jpg"))


def test_hub_dataset_fails_fast_offline(monkeypatch):
    import socket

    attempts = []

    def no_network(self, address, *a, **k):  # any connection attempt is recorded and refused
        attempts.append(address)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    with pytest.raises(DataUnavailable, match="HF_HUB_OFFLINE"):
        load_images("hf:frgfm/imagenette", 4)
    with pytest.raises(DataUnavailable, match="HF_HUB_OFFLINE"):
        load_texts("glue", 4)
    assert attempts == []  # offline mode means no network attempt at all


def test_sst2_tsv_reading_keeps_quotes_and_row_ids(tmp_path):
    f = tmp_path / "dev.tsv"
    rows = ['a "quoted" film , really . ', "it 's fine ", '"starts with a quote', "plain words"]
    f.write_text("sentence\tlabel\n" + "".join(f"{s}\t{i % 2}\n" for i, s in enumerate(rows)))
    assert read_sst2_tsv(f) == [r.strip() for r in rows]
    s = load_texts(f)
    assert s.kind == "text" and s.available == 4
    by_id = dict(zip(s.ids, s.items()))
    assert by_id == {f"sst2-dev:{i}": r.strip() for i, r in enumerate(rows)}
    assert load_texts(f, 2, seed=9).ids == load_texts(f, seed=9).ids[:2]
    bad = tmp_path / "bad.tsv"
    bad.write_text("text\tlabel\nx\t1\n")
    with pytest.raises(ValueError, match="sentence"):
        load_texts(bad)


def test_sst2_from_dobrushin_data(tmp_path, monkeypatch):
    import dobrushin.data.canonical as C

    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\none .\t1\ntwo .\t0\nthree .\t1\n")
    monkeypatch.setattr(C, "SST2_DEV_SHA256", hashlib.sha256((tmp_path / "sst2" / "dev.tsv").read_bytes()).hexdigest())
    monkeypatch.setenv("DOBRUSHIN_DATA", str(tmp_path))
    s = load_texts()
    assert sorted(s.items()) == ["one .", "three .", "two ."] and "DOBRUSHIN_DATA" in s.notes
    assert s.source == C.SST2_SOURCE


def test_embedded_sentences_are_real_sentences_and_the_offline_fallback():
    sents = embedded_sentences()
    assert len(sents) >= 200 and len(set(sents)) == len(sents)
    assert sents == embedded_sentences()  # deterministic
    from pydoc_data.topics import topics

    corpus = " ".join(" ".join(t.split()) for t in topics.values())
    for s in sents:
        assert 40 <= len(s) <= 200 and s[0].isupper() and s.endswith(".") and len(s.split()) >= 8
        assert not re.search(r"[`\"*=\[\]{}<>]", s)
        assert s in corpus  # taken verbatim (up to whitespace) from the documentation
    # no DOBRUSHIN_DATA, offline: the fallback is used and says why
    s = load_texts(n=5)
    assert "pydoc_data" in s.source and "HF_HUB_OFFLINE" in s.notes and len(s) == 5
    assert set(s.items()) <= set(sents)


@pytest.mark.skipif(not (SHARED / "imagenet_samples").is_dir(), reason="shared offline data not present")
def test_real_shared_data(monkeypatch):
    monkeypatch.setenv("DOBRUSHIN_DATA", str(SHARED))
    s = load_images()
    assert len(s) == 100
    g = s[s.ids.index("n03908714_pencil_sharpener.JPEG")]  # the one greyscale JPEG
    assert g.mode == "RGB"
    t = load_texts()
    assert len(t) == 872 and t.available == 872


def _content_sha256(files) -> str:
    """The content key computed independently: SHA-256 over each file's SHA-256 hex digest and a newline."""
    h = hashlib.sha256()
    for f in files:
        h.update(hashlib.sha256(Path(f).read_bytes()).hexdigest().encode() + b"\n")
    return h.hexdigest()


def test_the_key_holds_the_content_of_the_selected_items(tmp_path):
    """A photo replaced under the same file name, or a sentence edited in place, changes the selection's
    key (so cached results are not reused for other inputs); the digest is the SHA-256 of the file's bytes
    (of the sentence's UTF-8), over the selected items in order; a prefix's key is the prefix's content."""
    d = _folder(tmp_path)
    a = load_images(d, 4, seed=3)
    k = a.key()
    files = [d / i for i in a.ids]
    assert k["content_sha256"] == _content_sha256(files)
    ident = {"kind": "image", "source": a.source, "seed": 3, "ids": a.ids}
    assert {x: k[x] for x in ("kind", "source", "seed", "ids")} == ident
    assert a.head(2).key()["content_sha256"] == a.content_sha256(0, 2) != k["content_sha256"]
    # a range (a sweep's shard): its ids, the range, and the content of its items only
    r = a.key(1, 3)
    assert r == {**ident, "ids": a.ids[1:3], "shard": [1, 3], "content_sha256": _content_sha256(files[1:3])}
    assert a.key(0, len(a)) == {**k, "shard": [0, len(a)]}
    unselected = next(f for f in d.iterdir() if f.is_file() and f.suffix == ".png" and f.name not in a.ids)
    Image.fromarray(np.zeros((5, 5, 3), np.uint8)).save(unselected)  # outside the selection: same key
    assert load_images(d, 4, seed=3).key() == k
    Image.fromarray(np.full((21, 30, 3), 7, np.uint8)).save(files[2])  # same name, other photo
    b = load_images(d, 4, seed=3)
    assert {x: b.key()[x] for x in ident} == ident and b.key() != k
    assert a.key() == b.key()  # the selection held since before the swap sees the new photo too
    t = tmp_path / "dev.tsv"
    t.write_text("sentence\tlabel\none two .\t1\nthree four .\t0\n")
    before = load_texts(str(t), None).key()
    t.write_text("sentence\tlabel\none two .\t1\nthree five .\t0\n")
    after = load_texts(str(t), None).key()
    assert before["ids"] == after["ids"] and before["content_sha256"] != after["content_sha256"]
    assert "content_sha256" not in load_images("embedded", 2).key()  # pinned by the package versions


def test_a_subset_is_the_selection_at_those_positions(tmp_path):
    """subset(indices): the ids, items and content digests of the parent at those positions, in the order
    given (files read independently); its key is the content of those items; the embedded sets keep no
    digests; a position out of range or not an integer is refused by name."""
    d = _folder(tmp_path)
    a = load_images(d, 6, seed=1)
    pos = [4, 0, 3]
    s = a.subset(pos)
    assert s.ids == [a.ids[i] for i in pos] and (s.kind, s.source, s.seed) == (a.kind, a.source, a.seed)
    for k, i in enumerate(pos):
        assert np.array_equal(np.asarray(s[k]), np.asarray(Image.open(d / a.ids[i]).convert("RGB")))
        assert s.content_sha256(k, k + 1) == _content_sha256([d / a.ids[i]])
    assert s.key()["content_sha256"] == _content_sha256([d / a.ids[i] for i in pos])
    tsv = tmp_path / "dev.tsv"
    tsv.write_text("sentence\tlabel\none two .\t1\nthree four .\t0\nfive six .\t1\n")
    texts = load_texts(str(tsv), None)
    t = texts.subset([2, 0])
    assert t.items() == [texts[2], texts[0]] and t.ids == [texts.ids[2], texts.ids[0]]
    assert t.content_sha256() == hashlib.sha256(b"".join(hashlib.sha256(x.encode()).hexdigest().encode() + b"\n"
                                                         for x in t.items())).hexdigest()
    assert load_images("embedded", 3).subset([1]).content_sha256() is None
    with pytest.raises(IndexError, match="input positions \\[6, -1\\] out of range for 6 inputs"):
        a.subset([1, 6, -1])
    with pytest.raises(ValueError, match="input positions repeat: \\[0\\]"):
        a.subset([0, 2, 0])
    with pytest.raises(ValueError, match="an input position must be an integer"):
        a.subset([1.0])
