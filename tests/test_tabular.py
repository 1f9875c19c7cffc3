"""FT-Transformer training, checkpoint cache and attention capture (tiny models on synthetic data).

The attention reference is an independent forward pass written here from the model's parameters
with plain tensor operations (no module forward is called), checked against the model's own output.
"""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import dobrushin
from dobrushin.capture import ft_transformer as ftc
from dobrushin.models import ft_transformer as tb
from dobrushin.data import tabular_data as td
from dobrushin.experiments.measure import measure

TINY = {"n_blocks": 2, "d_block": 16, "attention_n_heads": 4, "attention_dropout": 0.2,
        "ffn_d_hidden_multiplier": 4 / 3, "ffn_dropout": 0.1, "residual_dropout": 0.0}


def synthetic(task="regression", n=(240, 60, 60), seed=0, n_num=3, cards=(4, 3)):
    rng = np.random.default_rng(seed)
    Xn, Xc, y = {}, {}, {}
    for part, m in zip(td.PARTS, n):
        Xn[part] = rng.standard_normal((m, n_num)).astype(np.float32)
        Xc[part] = np.stack([rng.integers(0, c, m) for c in cards], 1)
        t = Xn[part] @ np.linspace(1, -1, n_num) + 0.5 * (Xc[part][:, 0] == 1)
        y[part] = t.astype(np.float32) if task == "regression" else (t > 0).astype(np.int64)
    return td.from_splits(f"synthetic-{task}", task, y, X_num=Xn, X_cat=Xc, cat_cardinalities=list(cards))


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Tiny models: one intra-op thread is many times faster than two on a busy 2-core machine."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def data():
    return synthetic()


def manual_forward(model, xn, xc):
    """FT-Transformer forward from the parameters; returns (output, [per block (B, H, n, n) attention])."""
    B = xn.shape[0]
    ce = model.cont_embeddings
    cat = model.cat_embeddings
    toks = [model.cls_embedding.weight.expand(B, 1, -1), xn[..., None] * ce.weight + ce.bias,
            torch.stack([e.weight[xc[:, i]] for i, e in enumerate(cat.embeddings)], 1) + cat.bias]
    x = torch.cat(toks, 1)
    lin = lambda z, m: z @ m.weight.T + m.bias  # noqa: E731
    ln = lambda z, m: F.layer_norm(z, m.normalized_shape, m.weight, m.bias, m.eps)  # noqa: E731
    blocks = list(model.backbone.blocks)
    atts = []
    for i, blk in enumerate(blocks):
        h = ln(x, blk["attention_normalization"]) if "attention_normalization" in blk else x
        a = blk["attention"]
        H = a._n_heads
        n, d = h.shape[1], h.shape[2]
        split = lambda z: z.reshape(B, n, H, d // H).permute(0, 2, 1, 3)  # noqa: E731
        q, k, v = split(lin(h, a.W_q)), split(lin(h, a.W_k)), split(lin(h, a.W_v))
        P = torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(d // H), dim=-1)
        atts.append(P)
        o = lin(torch.einsum("bhqk,bhkd->bhqd", P, v).permute(0, 2, 1, 3).reshape(B, n, d), a.W_out)
        x = x + (o[:, :1] if i == len(blocks) - 1 else o)
        z = lin(ln(x, blk["ffn_normalization"]), blk["ffn"].linear1)
        u, g = z.chunk(2, dim=-1)
        x = x + lin(u * torch.relu(g), blk["ffn"].linear2)
    out = model.backbone.output
    return lin(torch.relu(ln(x[:, 0], out.normalization)), out.linear), atts


def test_cls_is_prepended_and_capture_matches_independent_forward(data):
    model = tb.make_model(data, seed=3, **TINY)
    xn, xc = tb.tensors(data, "test", np.arange(7))
    with torch.no_grad():
        ref_out, ref_att = manual_forward(model, xn, xc)
        own_out = model(xn, xc)
    torch.testing.assert_close(ref_out, own_out, rtol=1e-5, atol=1e-6)  # the reference forward is right
    cap = ftc.capture(model, xn, xc)
    torch.testing.assert_close(cap.outputs, own_out)
    full = cap.full()
    assert full.shape == (7, 2, 4, 6, 6)  # 1 CLS + 3 numeric + 2 categorical tokens
    for layer in range(2):
        torch.testing.assert_close(full[:, layer], ref_att[layer], rtol=1e-5, atol=1e-6)
    # the last block computes only the CLS query: one row, equal to row 0 of the full matrix
    assert cap.hooked[-1].shape == (7, 4, 1, 6)
    torch.testing.assert_close(cap.hooked[-1][:, :, 0], ref_att[-1][:, :, ftc.CLS_POSITION], rtol=1e-5, atol=1e-6)
    assert ftc.CLS_POSITION == 0


def test_recomputation_equals_hooked_attention_for_earlier_blocks():
    d = synthetic(n=(64, 16, 40))
    model = tb.make_model(d, seed=1, **{**TINY, "n_blocks": 4})
    xn, xc = tb.tensors(d, "test")
    cap = ftc.capture(model, xn, xc)
    for layer in range(3):  # blocks that compute every query: the recomputation is the same kernel
        assert torch.equal(cap.hooked[layer], cap.recomputed[layer]), layer
    torch.testing.assert_close(cap.hooked[3][:, :, 0], cap.recomputed[3][:, :, 0], rtol=0, atol=1e-6)
    assert not torch.allclose(cap.recomputed[3][:, :, 0], cap.recomputed[3][:, :, -1])  # rows differ
    # capture leaves the model untouched
    assert all(type(b["attention"].dropout) is torch.nn.Dropout for b in model.backbone.blocks)


def test_extract_attention_roles_and_stochastic_rows(data):
    model = tb.make_model(data, seed=0, **{**TINY, "attention_dropout": 0.0})  # no dropout module at all
    xn, xc = tb.tensors(data, "test", np.arange(5))
    ex = dobrushin.extract_attention(model, {"x_num": xn, "x_cat": xc})
    assert ex.adapter == "ft-transformer"
    assert all(b["attention"].dropout is None for b in model.backbone.blocks)  # the stand-in is gone again
    assert ex.attention.dtype == torch.float32 and ex.attention.shape == (5, 2, 6, 6)
    assert ex.roles == [["cls"] + ["content"] * 5] * 5
    torch.testing.assert_close(ex.attention.sum(-1), torch.ones(5, 2, 6), atol=1e-6, rtol=0)
    per_head = ftc.extract(model, (xn, xc), average_heads=False).attention
    assert per_head.shape == (5, 2, 4, 6, 6)
    torch.testing.assert_close(per_head.mean(2), ex.attention)
    # the positional form (x_num, x_cat) goes through the public entry point too
    torch.testing.assert_close(dobrushin.extract_attention(model, (xn, xc)).attention, ex.attention, rtol=0, atol=0)
    df = measure(ex.attention, ex.roles, model="tiny", input_ids=[str(i) for i in range(5)], weights="untrained")
    assert set(df.loc[df.variant == "content", "n_tokens"]) == {5}
    assert set(df.loc[df.variant == "with_special", "n_tokens"]) == {6}


def test_bad_inputs_are_value_errors(data):
    model = tb.make_model(data, seed=0, **TINY)
    with pytest.raises(ValueError, match="x_num"):
        ftc.extract(model, {"numbers": None})
    with pytest.raises(ValueError, match="unknown FT-Transformer option"):
        tb.make_model(data, seed=0, n_layers=2)
    with pytest.raises(ValueError, match="max_epochs"):
        tb.fit(data, 0, cache=False, max_epochs=0)
    with pytest.raises(ValueError, match="FTTransformer"):
        ftc.capture(torch.nn.Linear(2, 2), None, None)


def test_a_few_steps_reduce_the_loss(data):
    r = tb.fit(data, seed=0, cache=False, max_epochs=6, batch_size=32, lr=1e-3, model_overrides=TINY)
    losses = [h["train_loss"] for h in r.history]
    assert len(losses) == 6 and losses[-1] < 0.8 * losses[0]
    base = float(np.sqrt(np.mean((data.y["test"] - data.y["train"].mean()) ** 2)))
    assert tb.score(data, tb.predict(r.model, data, "test"), "test")["rmse"] < base


def test_training_is_deterministic_and_classification_works():
    d = synthetic("binclass")
    kw = dict(cache=False, max_epochs=2, batch_size=64, model_overrides=TINY)
    a, b, c = tb.fit(d, 5, **kw), tb.fit(d, 5, **kw), tb.fit(d, 6, **kw)
    sa, sb, sc = a.model.state_dict(), b.model.state_dict(), c.model.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    acc = tb.score(d, tb.predict(a.model, d, "test"), "test")["accuracy"]
    assert 0.0 <= acc <= 1.0
    # the untrained control is the trained model's seeded initialisation
    init = tb.make_model(d, 5, **TINY).state_dict()
    assert not all(torch.equal(init[k], sa[k]) for k in sa)
    assert all(torch.equal(init[k], tb.make_model(d, 5, **TINY).state_dict()[k]) for k in init)


def test_checkpoint_cache_is_reused_and_corruption_is_detected(data, tmp_path):
    kw = dict(cache_root=tmp_path, max_epochs=2, batch_size=64, model_overrides=TINY)
    runs = tb.TRAIN_RUNS
    first = tb.fit(data, 0, **kw)
    assert not first.from_cache and first.cache_note == "miss" and tb.TRAIN_RUNS == runs + 1
    pt = first.checkpoint
    mtime = pt.stat().st_mtime_ns
    second = tb.fit(data, 0, **kw)
    assert second.from_cache and second.cache_note == "hit" and tb.TRAIN_RUNS == runs + 1
    assert pt.stat().st_mtime_ns == mtime
    assert second.epochs == first.epochs and second.train_seconds == first.train_seconds
    s1, s2 = first.model.state_dict(), second.model.state_dict()
    assert all(torch.equal(s1[k], s2[k]) for k in s1)
    # other seed / other data / other settings: other key, so no reuse
    assert tb.fit(data, 1, **kw).cache_note == "miss"
    assert tb.cache_key(synthetic(seed=9), 0, first.config, tb.train_settings(max_epochs=2, batch_size=64)) != first.key

    # flip one byte of the checkpoint: detected, retrained, rewritten
    blob = bytearray(pt.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    pt.write_bytes(bytes(blob))
    with pytest.warns(UserWarning, match="corrupt"):
        third = tb.fit(data, 0, **kw)
    assert not third.from_cache and third.cache_note.startswith("corrupt") and tb.TRAIN_RUNS == runs + 3
    s3 = third.model.state_dict()
    assert all(torch.equal(s1[k], s3[k]) for k in s1)  # same seed, same weights
    assert tb.fit(data, 0, **kw).from_cache

    # truncated checkpoint with a matching (forged) sidecar: torch.load fails -> corrupt
    meta = pt.with_suffix(".json")
    import hashlib
    import json

    short = pt.read_bytes()[:100]
    pt.write_bytes(short)
    rec = json.loads(meta.read_text())
    rec["sha256"] = hashlib.sha256(short).hexdigest()
    meta.write_text(json.dumps(rec))
    model, _, note = tb.load_checkpoint(data, 0, first.config, tb.train_settings(max_epochs=2, batch_size=64),
                                        tmp_path)
    assert model is None and note.startswith("corrupt") and "does not load" in note
    # missing sidecar
    meta.unlink()
    _, _, note = tb.load_checkpoint(data, 0, first.config, tb.train_settings(max_epochs=2, batch_size=64), tmp_path)
    assert note.startswith("corrupt") and "missing" in note
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert not tb.fit(data, 0, **kw).from_cache


def test_measure_tabular_tables(data, tmp_path):
    from dobrushin.experiments.tabular import TABULAR_CONFIG, measure_tabular
    from dobrushin.store.results import ResultStore

    model = tb.make_model(data, seed=0, **TINY)
    rows = np.arange(10)
    run = measure_tabular(ResultStore(tmp_path, "tabular"), "tiny", models={"untrained": model},
                          provenance={"untrained": {"source": "untrained", "seed": 0}}, data=data, rows=rows,
                          model_name="FT-Transformer tiny", config=TABULAR_CONFIG.replace(head_inputs=4, batch_size=4))
    tidy, heads, roll = run.table, run.heads, run.rollout
    assert len(tidy) == 10 * 2 * 2  # inputs x layers x variants
    assert set(tidy["input_id"]) == {f"test/{int(data.index['test'][i])}" for i in rows}
    # per-head rows on the first 4 inputs agree with an independent per-head pass through measure()
    ids4 = [f"test/{int(data.index['test'][i])}" for i in range(4)]
    assert set(heads["input_id"]) == set(ids4) and set(heads["head"]) == set(range(4))
    xn, xc = tb.tensors(data, "test", rows[:4])
    AH = ftc.capture(model, xn, xc).full()
    for h in range(4):
        m = measure(AH[:, :, h], [ftc.roles_for(model, 6)] * 4, model="t", input_ids=ids4,
                    weights="untrained", variants=("content",))
        got = heads[heads["head"] == h].sort_values(["input_id", "layer"])["holds"].to_numpy()
        assert np.array_equal(got, m.sort_values(["input_id", "layer"])["holds"].to_numpy())
    assert (roll["kappa_rollout"] <= roll["bound"] + 1e-12).all() and len(roll) == 10 * 2


def test_measure_tabular_caches_results_keyed_by_provenance(data, tmp_path):
    import pandas as pd

    from dobrushin.experiments.tabular import measure_tabular
    from dobrushin.store.results import ResultStore

    store = ResultStore(tmp_path, "tabular")
    models = {"pretrained": tb.make_model(data, 1, **TINY), "untrained": tb.make_model(data, 0, **TINY)}
    prov = {"pretrained": {"source": "trained here", "checkpoint": "abc", "sha256": "0" * 64},
            "untrained": {"source": "untrained", "seed": 0}}
    kw = dict(models=models, provenance=prov, data=data, rows=np.arange(6), model_name="FT-Transformer tiny",
              dataset="tiny")
    a = measure_tabular(store, "tiny-seed0", **kw)
    assert not a.cached and set(a.table["weights"]) == {"pretrained", "untrained"}
    entry = store.manifest()["entries"]["tiny-seed0"]
    assert entry["status"] == "ok" and entry["family"] == "ft-transformer" and entry["heads_file"]
    assert entry["dataset"] == "tiny" and entry["provenance"] == prov
    assert entry["runs"]["pretrained"]["provenance"] == prov["pretrained"]
    b = measure_tabular(store, "tiny-seed0", **kw)
    assert b.cached
    pd.testing.assert_frame_equal(a.table, b.table)
    # another checkpoint (same parameters otherwise), or a damaged secondary file: recomputed
    other = {**prov, "pretrained": {**prov["pretrained"], "checkpoint": "xyz"}}
    assert not measure_tabular(store, "tiny-seed0", **{**kw, "provenance": other}).cached
    store.path("tiny-seed0", ".rollout.parquet").write_bytes(b"garbage")
    assert not measure_tabular(store, "tiny-seed0", **{**kw, "provenance": other}).cached
    with pytest.raises(ValueError, match="pretrained"):
        measure_tabular(store, "x", **{**kw, "models": {"trained": models["pretrained"]}})


def test_select_rows():
    r = tb.select_rows(100, 10, seed=0)
    assert len(r) == 10 and np.array_equal(r, np.sort(r)) and np.array_equal(r, tb.select_rows(100, 10, seed=0))
    assert np.array_equal(tb.select_rows(5, None), np.arange(5)) and np.array_equal(tb.select_rows(5, 9), np.arange(5))
    with pytest.raises(ValueError):
        tb.select_rows(5, 0)


def test_protocol_table_is_what_builds_and_trains_the_models(data):
    """The chapter's protocol table (which replaced typed settings in the prose) reads the model that
    make_model builds and the settings fit trains with: blocks, width and heads counted on a built default
    model, the dropouts on its modules, the optimiser's numbers against rtdl's default optimiser, and the notebook's own
    batch size, patience, epoch cap and training rows."""
    from types import SimpleNamespace

    from dobrushin.report.tabular_chapter import protocol_table

    p = SimpleNamespace(max_epochs=7, patience=5, batch_size=64, train_rows=None)
    t = protocol_table(p).set_index("setting")["value"]
    model = tb.make_model(data, seed=0)
    blocks = list(model.backbone.blocks)
    att = blocks[0]["attention"]
    assert t["blocks"] == str(len(blocks))
    assert t["attention heads"] == str(att._n_heads)
    assert t["width (d_block)"] == str(att.W_q.in_features)
    assert t["attention dropout"] == str(att.dropout.p)
    assert t["FFN dropout"] == str(blocks[0]["ffn"].dropout.p)
    opt = model.make_default_optimizer()  # the package's own default optimiser, which fit reproduces
    assert t["learning rate"] == str(opt.defaults["lr"]) and t["weight decay"] == str(opt.defaults["weight_decay"])
    assert (t["batch size"], t["early-stopping patience (epochs)"], t["epoch cap"], t["training rows"]) == ("64", "5", "7", "all")
    q = protocol_table(SimpleNamespace(max_epochs=None, patience=16, batch_size=256, train_rows=8000)).set_index("setting")["value"]
    assert q["epoch cap"] == "none" and q["training rows"] == "at most 8000"
