"""The canonical inputs (dobrushin.data.canonical): the ImageNet sample photos and SST-2's dev.tsv are the same
bytes, the same selection and the same cache key whether they are read from $DOBRUSHIN_DATA or downloaded (here
from a local HTTP server standing in for GitHub and GLUE); every file is checked against its SHA-256; an
interrupted download keeps what it finished; a data folder that lacks or alters a file is an error naming it."""
from __future__ import annotations

import functools
import hashlib
import http.server
import io
import os
import shutil
import threading
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import dobrushin.data.canonical as C
from dobrushin.data.inputs import DataUnavailable, load_images, load_texts

SHARED = Path(os.environ.get("DOBRUSHIN_TEST_DATA", "/work/shared/data"))


class _Quiet(http.server.SimpleHTTPRequestHandler):
    requests: list = []

    def log_message(self, *a):  # no request lines in the test output
        pass

    def do_GET(self):
        type(self).requests.append(self.path)
        super().do_GET()


@pytest.fixture
def server(tmp_path):
    """``(folder, base_url, requests)``: an HTTP server on localhost serving ``folder``."""
    folder = tmp_path / "served"
    folder.mkdir()

    class Handler(_Quiet):
        requests: list = []

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(folder)))
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield folder, f"http://127.0.0.1:{httpd.server_address[1]}", Handler.requests
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.delenv("DOBRUSHIN_DATA", raising=False)
    monkeypatch.setenv("DOBRUSHIN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # nothing reaches the real sources: a closed local port refuses at once
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_URL", "http://127.0.0.1:9/{file}")
    monkeypatch.setattr(C, "SST2_URL", "http://127.0.0.1:9/SST-2.zip")


def _photos(folder: Path, k: int = 4) -> dict:
    """``k`` small JPEGs named like the canonical ones; returns name -> SHA-256 (of the bytes written)."""
    rng = np.random.default_rng(5)
    out = {}
    for i in range(k):
        name = f"n0{i}00000{i}_thing{i}.JPEG"
        Image.fromarray(rng.integers(0, 256, size=(16 + i, 20, 3), dtype=np.uint8)).save(folder / name, "JPEG")
        out[name] = hashlib.sha256((folder / name).read_bytes()).hexdigest()
    return out


def test_downloaded_photos_are_the_data_folders_photos_with_the_same_key(server, tmp_path, monkeypatch):
    served, base, requests = server
    sums = _photos(served)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_SHA256", sums)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_URL", base + "/{file}")
    dl = load_images(n=3, seed=2)
    assert dl.source == C.IMAGENET_SAMPLES_SOURCE and "downloaded from" in dl.notes
    cached = tmp_path / "cache" / "data" / "imagenet_samples"
    assert sorted(p.name for p in cached.iterdir()) == sorted(sums)
    assert all((cached / n).read_bytes() == (served / n).read_bytes() for n in sums)
    assert len(requests) == len(sums)
    # the same photos from a data folder: the same selection, items and cache key
    data = tmp_path / "data"
    shutil.copytree(served, data / "imagenet_samples")
    (data / "imagenet_samples" / "manifest.csv").write_text("file,sha256\n")  # not a photo: allowed beside them
    monkeypatch.setenv("DOBRUSHIN_DATA", str(data))
    local = load_images(n=3, seed=2)
    assert "DOBRUSHIN_DATA" in local.notes
    assert local.key() == dl.key() and local.ids == dl.ids
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(local.items(), dl.items()))
    # downloaded once: later loads read the cache without a request
    monkeypatch.delenv("DOBRUSHIN_DATA")
    again = load_images(n=3, seed=2)
    assert again.key() == dl.key() and "downloaded earlier" in again.notes and len(requests) == len(sums)


def test_a_corrupt_or_missing_download_is_refused_and_finished_photos_are_kept(server, tmp_path, monkeypatch):
    served, base, requests = server
    sums = _photos(served)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_SHA256", sums)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_URL", base + "/{file}")
    names = sorted(sums)
    good = (served / names[1]).read_bytes()
    (served / names[1]).write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # one bit differs
    with pytest.raises(DataUnavailable, match=f"{names[1]}: SHA-256 .* is not the canonical photo's"):
        C.photo_folder()
    cached = tmp_path / "cache" / "data" / "imagenet_samples"
    assert sorted(p.name for p in cached.iterdir()) == names[:1]  # the photo before it is kept, not the bad one
    # the book falls back to the embedded photos and says why, never silently
    s = load_images(n=2)
    assert "scikit-image" in s.source and "not used" in s.notes and names[1] in s.notes
    (served / names[1]).write_bytes(good)
    (served / names[2]).unlink()
    with pytest.raises(DataUnavailable, match=f"downloading .*{names[2]} failed"):
        C.photo_folder()
    (served / names[2]).write_bytes((served / names[1]).read_bytes())  # restored below
    _photos(served)  # the same deterministic bytes again
    del requests[:]
    folder, note = C.photo_folder()
    assert folder == cached and "downloaded from" in note
    assert sorted(r.lstrip("/") for r in requests) == names[2:]  # only what was missing is fetched


def test_a_data_folder_must_hold_exactly_the_canonical_photos(tmp_path, monkeypatch):
    data = tmp_path / "data"
    (data / "imagenet_samples").mkdir(parents=True)
    sums = _photos(data / "imagenet_samples", 3)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_SHA256", sums)
    monkeypatch.setenv("DOBRUSHIN_DATA", str(data))
    assert len(load_images()) == 3
    name = sorted(sums)[0]
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(data / "imagenet_samples" / "extra.png")
    with pytest.raises(DataUnavailable, match="extra.png is not one of the 3 canonical photos"):
        load_images()
    (data / "imagenet_samples" / "extra.png").unlink()
    (data / "imagenet_samples" / name).write_bytes(b"not the photo")
    with pytest.raises(DataUnavailable, match=f"{name}: SHA-256 .* is not the canonical photo {name}'s"):
        load_images()
    (data / "imagenet_samples" / name).unlink()
    with pytest.raises(DataUnavailable, match=f"{name} does not exist"):
        load_images()


def _sst2_zip(tsv: bytes, member: str = C.SST2_MEMBER) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("SST-2/train.tsv", b"sentence\tlabel\nnot this one .\t1\n")
        z.writestr(member, tsv)
    return buf.getvalue()


def test_sst2_downloaded_from_glue_is_the_data_folders_file_with_the_same_key(server, tmp_path, monkeypatch):
    served, base, requests = server
    tsv = "sentence\tlabel\nit 's a film . \t1\nno , it is not . \t0\nquite so . \t1\n".encode()
    (served / "SST-2.zip").write_bytes(_sst2_zip(tsv))
    monkeypatch.setattr(C, "SST2_DEV_SHA256", hashlib.sha256(tsv).hexdigest())
    monkeypatch.setattr(C, "SST2_URL", base + "/SST-2.zip")
    dl = load_texts(n=2, seed=4)
    assert dl.source == C.SST2_SOURCE and "downloaded from" in dl.notes
    assert (tmp_path / "cache" / "data" / "sst2" / "dev.tsv").read_bytes() == tsv
    data = tmp_path / "data"
    (data / "sst2").mkdir(parents=True)
    (data / "sst2" / "dev.tsv").write_bytes(tsv)
    monkeypatch.setenv("DOBRUSHIN_DATA", str(data))
    local = load_texts(n=2, seed=4)
    assert local.key() == dl.key() and local.items() == dl.items()
    (data / "sst2" / "dev.tsv").write_bytes(tsv.replace(b"quite", b"quiet"))
    with pytest.raises(DataUnavailable, match="SHA-256 .* is not the canonical SST-2 dev.tsv's"):
        load_texts()
    monkeypatch.delenv("DOBRUSHIN_DATA")
    assert load_texts(n=2, seed=4).key() == dl.key() and len(requests) == 1  # read from the cache
    # an archive without the file, or with another file under its name, is refused
    (tmp_path / "cache" / "data" / "sst2" / "dev.tsv").unlink()
    (served / "SST-2.zip").write_bytes(_sst2_zip(tsv, member="SST-2/test.tsv"))
    with pytest.raises(DataUnavailable, match="no SST-2/dev.tsv in the downloaded archive"):
        C.sst2_file()
    (served / "SST-2.zip").write_bytes(_sst2_zip(tsv + b"x .\t1\n"))
    with pytest.raises(DataUnavailable, match="not the canonical file's"):
        C.sst2_file()
    fallback = load_texts(n=2)  # offline hub, so the embedded sentences, with both reasons
    assert "pydoc_data" in fallback.source and "not the canonical file's" in fallback.notes
    assert "HF_HUB_OFFLINE" in fallback.notes


def _sha256sums(root: Path) -> dict:
    out = {}
    for line in (root / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            out[name.strip().lstrip("*")] = digest
    return out


@pytest.mark.skipif(not (SHARED / "SHA256SUMS").is_file(), reason="shared offline data not present")
def test_the_recorded_checksums_are_the_data_folders(monkeypatch):
    """The package's checksums of the 100 photos and of dev.tsv against the data folder's own SHA256SUMS (an
    independent record) and against the files themselves."""
    sums = _sha256sums(SHARED)
    photos = {k.split("/", 1)[1]: v for k, v in sums.items()
              if k.startswith("imagenet_samples/") and k.endswith(".JPEG")}
    assert photos == C.IMAGENET_SAMPLES_SHA256 and len(photos) == 100
    assert sums["sst2/dev.tsv"] == C.SST2_DEV_SHA256
    monkeypatch.setenv("DOBRUSHIN_DATA", str(SHARED))
    folder, note = C.photo_folder()  # hashes every photo
    assert folder == SHARED / "imagenet_samples" and "DOBRUSHIN_DATA" in note
    assert C.sst2_file()[0] == SHARED / "sst2" / "dev.tsv"
    s = load_images()
    assert len(s) == 100 and s.source == C.IMAGENET_SAMPLES_SOURCE


def test_a_stray_photo_in_the_download_cache_is_refused(server, tmp_path, monkeypatch):
    """Only the canonical photos may lie in the download cache: another one would join the selection under the
    canonical source line."""
    served, base, _ = server
    sums = _photos(served, 3)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_SHA256", sums)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_URL", base + "/{file}")
    assert len(load_images()) == 3
    cached = tmp_path / "cache" / "data" / "imagenet_samples"
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(cached / "zz_extra.png")
    with pytest.raises(DataUnavailable, match="zz_extra.png is not one of the 3 canonical photos"):
        C.photo_folder()
    s = load_images()  # the embedded photos, saying why, never the stray one under the canonical line
    assert s.source != C.IMAGENET_SAMPLES_SOURCE and "zz_extra.png" in s.notes


def test_a_cache_that_cannot_be_written_is_data_unavailable(server, monkeypatch):
    served, base, _ = server
    sums = _photos(served, 2)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_SHA256", sums)
    monkeypatch.setattr(C, "IMAGENET_SAMPLES_URL", base + "/{file}")

    def refuse(path, data):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(C, "atomic_write_bytes", refuse)
    with pytest.raises(DataUnavailable, match="cannot write the download to .*No space left on device"):
        C.photo_folder()
    assert "No space left on device" in load_images(n=2).notes  # the chapter falls back and says why


def test_the_hub_fallback_for_sst2_says_why_the_file_was_not_used(monkeypatch):
    import dobrushin.data.inputs as I

    rows = [{"sentence": f"sentence number {i} . "} for i in range(5)]
    monkeypatch.setattr(I, "_hf_rows", lambda *a, **k: (rows, None))  # a hub that answers
    s = load_texts(n=3)
    assert s.source.startswith("GLUE SST-2 validation split (Hugging Face hub")
    assert s.notes.startswith("GLUE's dev.tsv was not used: downloading http://127.0.0.1:9/SST-2.zip failed")
