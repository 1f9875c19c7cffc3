"""The one weights resolver (dobrushin.models.provenance.resolve_weights): provenance and loader share its
answer, and the provenance — the results' cache key — is the same before and after the first download.

Hub caches are laid out here by hand the way huggingface_hub writes them
(models--org--name/refs/main -> snapshots/<commit>/...), under HF_HUB_CACHE or HF_HOME in tmp_path; the
hub itself is never contacted (HF_HUB_OFFLINE=1, or its two entry points replaced by stand-ins)."""
from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")

from dobrushin.models import loading as M  # noqa: E402
from dobrushin.models import provenance  # noqa: E402

REPO = "dobrushin-tests/tiny-vit"
REV = "0123456789abcdef0123456789abcdef01234567"
TIMM_NAME = "vit_tiny_patch16_224.augreg_in21k_ft_in1k"


def _tiny_vit(seed=0):
    cfg = transformers.ViTConfig(hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                                 image_size=32, patch_size=16)
    torch.manual_seed(seed)
    return transformers.ViTModel(cfg, add_pooling_layer=False)


def _snapshot(hub: Path, repo: str, rev: str, save, main: bool = True) -> Path:
    d = hub / f"models--{repo.replace('/', '--')}"
    snap = d / "snapshots" / rev
    snap.mkdir(parents=True, exist_ok=True)
    save(snap)
    if main:
        (d / "refs").mkdir(exist_ok=True)
        (d / "refs" / "main").write_text(rev)
    return snap


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return set(sa) <= set(sb) and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.fixture
def hub(tmp_path, monkeypatch):
    h = tmp_path / "hf-cache"
    h.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(h))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    return h


def test_hf_snapshot_is_resolved_once_for_provenance_and_loader(hub):
    src = _tiny_vit(3)
    snap = _snapshot(hub, REPO, REV, src.save_pretrained)
    r = M.resolve_weights(REPO)
    assert (r.where, r.revision, Path(r.path)) == ("hub-cache", REV, snap)
    want = {"source": "hub", "revision": REV, "proxy_for": None}
    assert r.provenance == want == M.weights_provenance(REPO)
    lm = M.load_model(REPO, image_size=32)
    assert lm.provenance == want and REV in lm.notes
    assert _same_weights(src, lm.model)
    # refs/main naming a snapshot without weights: the snapshot that has them is used
    _snapshot(hub, REPO, "f" * 40, lambda d: (d / "config.json").write_text("{}"))
    assert M.resolve_weights(REPO).revision == REV
    # untrained control: no weights to resolve
    assert M.resolve_weights(REPO, pretrained=False, seed=4).provenance == {"source": "untrained", "seed": 4}


def test_hf_home_is_read_at_call_time(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert M.hub_cache_dir() == tmp_path / "home" / "hub"
    r = M.resolve_weights(REPO)
    assert r.where == "unavailable" and "HF_HUB_OFFLINE" in r.reason and M.weights_provenance(REPO) == {
        "source": "unavailable"}
    with pytest.raises(M.WeightsUnavailable, match="HF_HUB_OFFLINE"):
        M.load_model(REPO)
    _snapshot(tmp_path / "home" / "hub", REPO, REV, _tiny_vit().save_pretrained)
    assert M.resolve_weights(REPO).revision == REV


def test_hf_key_is_the_same_before_and_after_the_first_download(hub, monkeypatch):
    """The hub is replaced by a stand-in: the probe names the revision, the download writes the snapshot
    into the cache (as huggingface_hub would) and loads it."""
    src = _tiny_vit(5)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE")
    asked = []
    monkeypatch.setattr(provenance, "probe_hub", lambda repo, timeout: asked.append(repo) or REV)
    real = transformers.AutoModel.from_pretrained
    downloads = []

    def from_pretrained(name, *a, revision=None, **kw):
        if name == REPO:  # a download: the snapshot of that revision lands in the cache
            downloads.append(revision)
            name = _snapshot(hub, REPO, revision, src.save_pretrained)
        return real(name, *a, **kw)

    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", from_pretrained)
    before = M.weights_provenance(REPO)
    assert before == {"source": "hub", "revision": REV, "proxy_for": None} and asked == [REPO]
    lm = M.load_model(REPO, image_size=32)
    assert downloads == [REV] and "downloaded" in lm.notes and _same_weights(src, lm.model)
    after = M.weights_provenance(REPO)
    assert lm.provenance == before == after  # the cache key does not change with the first download
    assert M.resolve_weights(REPO).where == "hub-cache" and asked == [REPO, REPO]  # no probe once cached


def _timm_checkpoint(seed):
    from safetensors.torch import save_file

    torch.manual_seed(seed)
    model = timm.create_model(TIMM_NAME, pretrained=False)

    def save(folder):
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))

    return model, save


def test_timm_file_in_the_hub_cache(hub):
    src, save = _timm_checkpoint(7)
    snap = _snapshot(hub, f"timm/{TIMM_NAME}", REV, save)
    f = snap / "model.safetensors"
    r = M.resolve_weights(f"timm/{TIMM_NAME}")
    assert (r.where, Path(r.path)) == ("hub-cache", f)
    want = {"source": "hub", "file": "model.safetensors", "size": f.stat().st_size,
            "sha256": hashlib.sha256(f.read_bytes()).hexdigest(), "proxy_for": None, "hub_id": f"timm/{TIMM_NAME}"}
    assert r.provenance == want == M.weights_provenance(f"timm/{TIMM_NAME}") == M.weights_provenance(TIMM_NAME)
    lm = M.load_model(f"timm/{TIMM_NAME}")
    assert lm.provenance == want and "cache" in lm.notes
    torch.testing.assert_close(lm.model.blocks[0].attn.qkv.weight, src.blocks[0].attn.qkv.weight, rtol=0, atol=0)


def test_timm_key_is_the_same_before_and_after_the_first_download(hub, monkeypatch):
    import huggingface_hub

    src, save = _timm_checkpoint(8)
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(provenance, "probe_hub", lambda repo, timeout: REV)
    fetched = []

    def hf_hub_download(repo_id, filename, revision=None, cache_dir=None, **kw):  # stands in for the hub
        fetched.append((repo_id, filename, revision))
        assert Path(cache_dir) == hub
        return str(_snapshot(hub, repo_id, revision, save) / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    before = M.weights_provenance(f"timm/{TIMM_NAME}")  # fetches the file once, as the loader would
    assert fetched == [(f"timm/{TIMM_NAME}", "model.safetensors", REV)] and before["source"] == "hub"
    lm = M.load_model(f"timm/{TIMM_NAME}")
    assert fetched == [(f"timm/{TIMM_NAME}", "model.safetensors", REV)]  # not fetched again
    assert lm.provenance == before == M.weights_provenance(f"timm/{TIMM_NAME}")
    torch.testing.assert_close(lm.model.blocks[0].attn.qkv.weight, src.blocks[0].attn.qkv.weight, rtol=0, atol=0)
